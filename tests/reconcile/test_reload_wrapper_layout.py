"""The promoted layout beside a hitless-reload wrapper: a real ``haproxy -W`` master started once on
OUTPUT/haproxy.cfg (from another cwd: ``default-path config`` resolves maps/ beside the config) serves
each promoted version after the wrapper stand-in signals it, without the master restarting."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import time
from pathlib import Path

from haproxy_check.runtime.promotion import Promoter
from tests.conftest import free_port
from tests.reconcile.standin import ReloadOnSwap


def _config(port: int, socket_path: Path) -> bytes:
    return f"""global
    stats socket {socket_path} level admin expose-fd listeners
    default-path config

defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s

frontend fe
    bind 127.0.0.1:{port}
    http-request return status 200 content-type text/plain lf-string "%[str(answer),map(maps/host.map,none)]"
""".encode()


def _get(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def _eventually_answers(port: int, want: str, deadline: float = 10.0) -> str:
    end, got = time.monotonic() + deadline, ""
    while time.monotonic() < end:
        try:
            got = _get(port)
            if got == want:
                return got
        except OSError:
            pass
        time.sleep(0.05)
    return got


def test_wrapper_standin_reloads_a_real_master_on_each_promotion(tmp_path: Path, haproxy_path: str) -> None:
    _reloads(tmp_path, haproxy_path)


def test_wrapper_standin_reloads_a_real_3x_master(tmp_path: Path, haproxy3: str) -> None:
    """The same on the fetched 3.x binary, which scripts/get-haproxy3 patches to be re-executable."""
    _reloads(tmp_path, haproxy3)


def _reloads(tmp_path: Path, haproxy_path: str) -> None:
    out = tmp_path / "out"
    port = free_port()
    promoter = Promoter(out)
    socket_path = tmp_path / "admin.sock"
    promoter.promote({"haproxy.cfg": _config(port, socket_path), "maps/host.map": b"answer one\n"},
                     state_version="v1")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    master = subprocess.Popen([haproxy_path, "-W", "-db", "-f", str(out / "haproxy.cfg")], cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert _eventually_answers(port, "one") == "one"
        with ReloadOnSwap(out, master.pid) as wrapper:
            promoter.promote({"haproxy.cfg": _config(port, socket_path), "maps/host.map": b"answer two\n"},
                             state_version="v2")
            assert _eventually_answers(port, "two") == "two"
            assert wrapper.reloads == 1
        assert master.poll() is None  # the same master, reloaded, not restarted
        assert socket_path.exists()  # the rendered stats socket line made the admin socket
    finally:
        master.send_signal(signal.SIGTERM)
        try:
            master.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(master.pid, signal.SIGKILL)
            master.wait()
