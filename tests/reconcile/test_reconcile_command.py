"""``routegate reconcile`` and ``serve --reconcile`` as users start them: real processes, real files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.runtime.promotion import Promoter
from tests.conftest import free_port
from tests.reconcile.conftest import DATA

pytestmark = pytest.mark.haproxy


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _until(check: Callable[[], Any], proc: subprocess.Popen[str], log: Path, seconds: float = 60) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"the process exited: {log.read_text()}")
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.1)
    pytest.fail(f"timed out; log: {log.read_text()[-2000:]}")


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[str], Path]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], Path]:
        log = tmp_path / f"log{len(procs)}.txt"
        proc = subprocess.Popen([sys.executable, "-m", "webhook", *args], stdout=subprocess.DEVNULL,
                                stderr=log.open("w"), text=True, env={**os.environ, "HOME": str(tmp_path)})
        procs.append(proc)
        return proc, log

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("the process did not stop on SIGTERM")
        assert proc.returncode == 0


def test_reconcile_follows_the_state_dir(tmp_path: Path, started: Callable[..., Any]) -> None:
    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    shutil.copy(DATA / "state" / "cluster.yaml", state)
    port = free_port()
    socket_path = tmp_path / "admin.sock"
    proc, log = started("reconcile", "--state", str(state), "--output-dir", str(out), "--debounce", "0.1",
                        "--metrics-listen", f"127.0.0.1:{port}", "--stats-socket", str(socket_path))
    base = f"http://127.0.0.1:{port}"
    ready = _until(lambda: _get(f"{base}/readyz")[0] == 200 and json.loads(_get(f"{base}/readyz")[1]), proc, log)
    first = Promoter(out).last_known_good()
    assert first is not None and ready["live"] == first.version
    assert f"stats socket '{socket_path}' level admin expose-fd listeners" in (out / "haproxy.cfg").read_text()
    assert _get(f"{base}/healthz")[0] == 200
    assert _metric(_get(f"{base}/metrics")[1], "routegate_last_promotion_timestamp_seconds") == pytest.approx(
        first.promoted_at)

    shutil.copy(DATA / "inputs" / "bad-regex.yaml", state)  # left out: the rest is what is live already
    _until(lambda: _metric(_get(f"{base}/metrics")[1], 'routegate_isolated_objects{treatment="left-out"}') == 1,
           proc, log)
    assert Promoter(out).last_known_good() == first
    assert "HTTPRoute capture/broken" in log.read_text()

    (state / "bad-regex.yaml").unlink()
    shutil.copy(DATA / "inputs" / "good.yaml", state)
    _until(lambda: (Promoter(out).last_known_good() or first).version != first.version, proc, log)


def _once(state: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", "reconcile", "--once", "--state", str(state),
                           "--output-dir", str(out), "--stats-socket", ""], capture_output=True, text=True,
                          timeout=120, check=False)


def test_once_says_whether_it_promoted(tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    cluster = (DATA / "state" / "cluster.yaml").read_text()
    # a listener port haproxy -c rejects on the only Gateway: no line names an object, and a Gateway
    # (of which nothing was promoted yet) is never left out, so nothing can be isolated
    (state / "cluster.yaml").write_text(cluster.replace("      port: 80\n", "      port: 70000\n", 1))
    run = _once(state, out)
    assert run.returncode == 1, run.stderr
    assert "routegate: rejected" in run.stderr and "invalid port '70000'" in run.stderr
    assert Promoter(out).last_known_good() is None and not (out / "..data").exists()

    # a broken route is left out, and the rest promoted
    (state / "cluster.yaml").write_text(cluster)
    shutil.copy(DATA / "inputs" / "bad-regex.yaml", state)
    run = _once(state, out)
    assert run.returncode == 0, run.stderr
    assert "routegate: promoted" in run.stderr
    assert "HTTPRoute capture/broken: left out (not in the configuration)" in run.stderr
    assert "broken" not in (out / "haproxy.cfg").read_text()


def test_serve_reconcile_promotes_in_the_same_process(tmp_path: Path, started: Callable[..., Any]) -> None:
    out, cert_dir = tmp_path / "out", tmp_path / "certs"
    port, metrics_port = free_port(), free_port()
    proc, log = started("serve", "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics_port}",
                        "--cert-dir", str(cert_dir), "--state", str(DATA / "state"), "--reconcile",
                        "--output-dir", str(out), "--stats-socket", str(tmp_path / "admin.sock"), "--debounce", "0.1")
    record = _until(lambda: Promoter(out).last_known_good(), proc, log)
    assert (out / record.version / "haproxy.cfg").is_file()
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    assert _get(f"https://127.0.0.1:{port}/healthz", context)[0] == 200
