"""``routegate check`` from the console ends its process at once when done (``checking.exit_now``): the
same report and exit code as a caller in the same process gets, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.webhook.clirun import env, routegate
from tests.webhook.conftest import STATE_DIR
from tests.webhook.gate.test_ruleworkers import routes_with_one_denied
from webhook.cli import routegate as cli

pytestmark = pytest.mark.haproxy


def _routes(tmp_path: Path) -> Path:
    """Enough routes for forked rule workers, one of them denied."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    return routes_with_one_denied(inputs)


def _processes_naming(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(pid))
    return found


def test_the_console_check_reports_what_main_returns_and_leaves_nothing_behind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _routes(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o700)
    args = ["check", "--state", str(STATE_DIR), "-f", str(inputs), "--scratch-dir", str(scratch), "-v"]
    run = routegate(*args, "--jobs", "2")
    assert cli.main([*args, "--jobs", "0"]) == run.returncode == 1, run.stderr
    assert run.stdout == capsys.readouterr().out
    assert "shop-3: allowed" in run.stdout and run.stdout.count(": denied") == 1
    assert list(scratch.iterdir()) == []  # the scratch directories were removed before the process ended
    assert _processes_naming(str(inputs)) == []  # no rule worker outlived it


def test_a_clean_console_check_exits_zero(tmp_path: Path) -> None:
    run = routegate("check", "--state", str(STATE_DIR), "-f", str(STATE_DIR), "-v")
    assert run.returncode == 0, run.stdout + run.stderr
    assert ": allowed" in run.stdout


def _in_a_fresh_process(code: str) -> int:
    """Run ``code`` in a new interpreter with this checkout first (not forked from pytest: a fork has
    none of this process's threads, the scratch remover's among them); its exit code."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env(), cwd=REPO, timeout=60,
                          check=False).returncode


def test_exit_now_waits_for_the_queued_scratch_removals(tmp_path: Path) -> None:
    big = tmp_path / "scratch"
    big.mkdir()
    for i in range(5000):
        (big / f"f{i}").write_bytes(b"x")
    assert _in_a_fresh_process(f"""
        from pathlib import Path
        from haproxy_check.check import scratches
        from webhook.cli import checking
        scratches.remove_later(Path({str(big)!r}))
        checking.exit_now(3)
        """) == 3
    assert not big.exists()


def test_exit_now_ends_the_workers_it_forked(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    assert _in_a_fresh_process(f"""
        import multiprocessing, time
        from pathlib import Path
        from webhook.cli import checking
        worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
        worker.start()
        Path({str(pid_file)!r}).write_text(str(worker.pid))
        checking.exit_now(0)
        """) == 0
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
