"""The sandbox around haproxy -c: empty environment, scratch cwd, deadline, process-group kill.

The environment tests use the real binary and HAProxy's own ``.if defined(VAR)`` conditional, so
they prove what haproxy itself can see. Only the hang uses a fake binary (a real haproxy -c does not
hang on demand).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from haproxy_check.check import sandboxes

BASE = "global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n"


def probe(var: str) -> str:
    return BASE + f'.if defined({var})\n.alert "{var} is visible"\n.endif\nfrontend f\n  bind 127.0.0.1:18080\n'


async def run(binary: str, workdir: Path, config: str, timeout: float = 5.0) -> sandboxes.RunOutput:
    (workdir / "haproxy.cfg").write_text(config)
    return await sandboxes.Runner(binary, timeout=timeout).run(workdir)


async def test_haproxy_sees_none_of_our_environment(
    haproxy_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROUTEGATE_SECRET_TOKEN", "hunter2")
    out = await run(haproxy_path, tmp_path, probe("ROUTEGATE_SECRET_TOKEN"))
    assert out.exit_code == 0, out.output
    assert "hunter2" not in out.output and "is visible" not in out.output


async def test_the_probe_can_fail_path_is_set_for_haproxy(haproxy_path: str, tmp_path: Path) -> None:
    out = await run(haproxy_path, tmp_path, probe("PATH"))
    assert out.exit_code != 0
    assert "PATH is visible" in out.output


async def test_openssl_conf_points_at_dev_null(haproxy_path: str, tmp_path: Path) -> None:
    config = BASE + '.if streq("$OPENSSL_CONF","/dev/null")\n.alert "openssl conf is null"\n.endif\n'
    out = await run(haproxy_path, tmp_path, config)
    assert "openssl conf is null" in out.output


async def test_relative_files_resolve_in_the_scratch_dir(haproxy_path: str, tmp_path: Path) -> None:
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "host.map").write_text("a.example.com be\n")
    config = BASE + "frontend f\n  bind 127.0.0.1:18080\n  use_backend %[req.hdr(host),map(maps/host.map)]\n" \
                    "backend be\n"
    out = await run(haproxy_path, tmp_path, config)
    assert out.exit_code == 0, out.output
    (tmp_path / "maps" / "host.map").unlink()
    out = await run(haproxy_path, tmp_path, config)
    assert out.exit_code != 0 and "host.map" in out.output


def fake_haproxy(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-haproxy"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


async def test_a_hanging_check_is_killed_with_its_children_at_the_deadline(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    binary = fake_haproxy(tmp_path, f"sleep 60 &\necho $! > {pidfile}\nwait\n")
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    out = await run(binary, work, "", timeout=0.5)
    assert out.timed_out and out.exit_code is None
    assert time.monotonic() - started < 3
    assert await asyncio.to_thread(gone, int(pidfile.read_text())), "the hanging check's child survived"


def gone(pid: int) -> bool:
    """The process has exited (or is a zombie awaiting its reaper) within a second."""
    for _ in range(50):
        stat_file = Path(f"/proc/{pid}/stat")
        if not stat_file.exists() or stat_file.read_text().split()[2] == "Z":
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("launcher", ["prlimit", "preexec_fn"])
async def test_resource_limits_apply_inside_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      launcher: str) -> None:
    if launcher == "prlimit":
        assert sandboxes.limits_wrapper() is not None, "prlimit (util-linux) works on this machine"
    else:  # where prlimit is missing or cannot set the limits
        monkeypatch.setattr(sandboxes, "limits_wrapper", lambda: None)
    out_file = tmp_path / "limits"
    binary = fake_haproxy(tmp_path, f"ulimit -c > {out_file}; ulimit -t >> {out_file}; ulimit -v >> {out_file}\n")
    work = tmp_path / "work"
    work.mkdir()
    runner = sandboxes.Runner(binary)
    assert (runner._launch()[1] is None) == (launcher == "prlimit")
    await runner.run(work)
    core, cpu, vmem = out_file.read_text().split()
    assert core == "0"
    assert int(cpu) == sandboxes.CPU_SECONDS
    assert int(vmem) * 1024 == sandboxes.ADDRESS_SPACE


def test_argv_never_hides_alerts() -> None:
    argv = sandboxes.Runner("/bin/haproxy").argv()
    assert "-q" not in argv and "-dr" in argv and argv[-2:] == ["-f", "haproxy.cfg"]
    # haproxy itself, or haproxy behind `unshare --net --` (the network-namespace isolation)
    assert argv.index("/bin/haproxy") in (0, 3) and argv[argv.index("/bin/haproxy") - 1 :][:1] in (["--"], [])


def test_a_check_is_spawned_without_a_preexec_fn_where_prlimit_works() -> None:
    """A preexec_fn makes Python fork() the whole server (on the event loop, tens of ms at 10,000 routes);
    without one it uses vfork. The limits then come from prlimit, which execs haproxy in the same process
    (the deadline's process-group kill still reaches it)."""
    assert sandboxes.limits_wrapper() is not None
    for niceness in (0, 19):
        argv, preexec = sandboxes.Runner("/bin/haproxy", niceness=niceness)._launch()
        assert preexec is None
        assert argv[-len(sandboxes.Runner("/bin/haproxy").argv()):] == sandboxes.Runner("/bin/haproxy").argv()
        lowered = niceness > os.getpriority(os.PRIO_PROCESS, 0)  # nice(1) only when the child's priority drops
        assert any(a.endswith("prlimit") for a in argv) and lowered == any(a.endswith("/nice") for a in argv)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12+ waits on a pidfd by default")
def test_within_child_waits_on_the_loop_a_check_starts_no_waiting_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    real_start = threading.Thread.start

    def recorded_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", recorded_start)
    binary = fake_haproxy(tmp_path, "echo checked\n")

    async def check(on_the_loop: bool) -> sandboxes.RunOutput:
        runner = sandboxes.Runner(binary)
        if not on_the_loop:
            return await runner.run(tmp_path)
        with sandboxes.child_waits_on_the_loop():
            return await runner.run(tmp_path)

    for on_the_loop in (True, False):  # and afterwards, another loop still waits the default way
        started.clear()
        out = asyncio.run(check(on_the_loop))
        assert out.exit_code == 0 and out.output == "checked\n"
        assert any("waitpid" in name for name in started) != on_the_loop, started


def test_the_session_cache_goes_off_only_in_configs_that_bind_tls_and_after_every_line() -> None:
    tls = b"frontend f\n  bind :443 ssl crt certs/a.pem alpn h2\n  default_backend b\n"
    checked = sandboxes.without_session_cache(tls)
    assert checked.startswith(tls) and checked.removeprefix(tls) == sandboxes.SESSION_CACHE_OFF
    assert sandboxes.without_session_cache(tls.rstrip(b"\n")).splitlines()[:3] == tls.splitlines()
    plain = b"frontend f\n  bind :80\n  # bind :443 ssl\nbackend b\n  server s 10.0.0.1:443 ssl verify none\n"
    assert sandboxes.without_session_cache(plain) is plain


def tls_pair(directory: Path) -> None:
    from datetime import UTC, datetime

    from certs import generation

    now = datetime.now(UTC)
    leaf = generation.new_leaf(generation.new_ca(now=now), now=now, dns_names=["app.example.com"])
    (directory / "certs").mkdir()
    (directory / "certs" / "app.pem").write_bytes(leaf.cert_pem() + leaf.key_pem())


@pytest.mark.parametrize("broken", ["", "  http-request set-header X %[nosuchfetch]\n",
                                    "  bind :8443 ssl crt certs/missing.pem\n"])
async def test_haproxy_judges_a_tls_config_alike_with_the_session_cache_off(
        haproxy_paths: list[str], tmp_path: Path, broken: str) -> None:
    """Same exit code, same output (every ALERT on the same line) on every binary: the checked copy's
    appended global section changes nothing haproxy -c reports."""
    config = (BASE + "frontend f\n  bind 127.0.0.1:18443 ssl crt certs/app.pem alpn h2,http/1.1\n" + broken
              + "  default_backend b\nbackend b\n  server s 127.0.0.1:1\n").encode()
    for k, binary in enumerate(haproxy_paths):
        outs = []
        for variant, text in (("as-rendered", config), ("checked", sandboxes.without_session_cache(config))):
            work = tmp_path / f"{k}-{variant}"
            work.mkdir()
            tls_pair(work)
            (work / "haproxy.cfg").write_bytes(text)
            out = await sandboxes.Runner(binary).run(work)
            outs.append((out.exit_code, re.sub(r"\(\d+\)", "(pid)", out.output)))  # each run's own pid
        assert outs[0] == outs[1], (binary, outs)
        assert (outs[0][0] == 0) == (not broken), outs[0]


async def test_a_relative_haproxy_path_is_made_absolute(haproxy_path: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks run in their scratch directory: ``--haproxy ./haproxy`` must still name the binary there."""
    from haproxy_check.check import binaries

    link = tmp_path / "bin" / "haproxy"
    link.parent.mkdir()
    link.symlink_to(haproxy_path)
    monkeypatch.chdir(tmp_path)
    binary = await binaries.detect("bin/haproxy")
    assert os.path.isabs(binary.path) and Path(binary.path) == link
    work = tmp_path / "work"
    work.mkdir()
    out = await run(binary.path, work, "defaults\n    mode http\nfrontend f\n    bind :8080\n")
    assert out.exit_code == 0, out  # 127 when the relative path was kept
