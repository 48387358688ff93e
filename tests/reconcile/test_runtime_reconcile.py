"""``routegate reconcile --runtime-socket`` against a real ``haproxy -W`` master reading the promoted
directory: a map value change and an endpoint moving are applied over the stats socket (the worker pid
stays, real HTTP requests see the new value), a change the plan says needs a reload and a runtime
command that fails both end in a reload (SIGUSR2 to the master from ``--reload-pidfile``; a new worker).

Each ``reconcile --once`` runs the CLI's ``main`` in process (what it applies and logs is the command's,
not the process's; the reconcile process itself is proven in test_reconcile_command and test_status_writes).

The built-in HTTP frontend template is overridden (``--templates``) only to bind 127.0.0.1 instead of
every address: tests bind loopback only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.render.rendering import BUILTIN
from tests.attachments import gwbuilders as gb
from tests.haproxy_check import dataplanes as dp
from tests.webhook.clirun import in_process
from validators.objects import Obj

pytestmark = pytest.mark.haproxy

ADDRS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
BACKEND = "gw_h_default_r_web_80"


def _objects(port: int, backend_port: int, *, env: str, addrs: tuple[str, ...],
             second_route: bool = False) -> list[Obj]:
    objs: list[Obj] = [
        gb.gateway("edge", gb.listener("http", port, frm="All"), ns="infra"),
        gb.service("web", "default", ("http", 80)),
        gb.endpoint_slice("web-a", "web", "default", [("http", backend_port)], [(a, True) for a in addrs]),
        gb.route("HTTPRoute", "r", gb.parent("edge", namespace="infra"), hosts=["a.example.com"], rules=[{
            "backendRefs": [{"name": "web", "port": 80}],
            "filters": [{"type": "RequestHeaderModifier",
                         "requestHeaderModifier": {"set": [{"name": "X-Env", "value": env}]}}]}]),
    ]
    if second_route:
        objs += [gb.service("api", "default", ("http", 80)),
                 gb.endpoint_slice("api-a", "api", "default", [("http", backend_port)], [("127.0.0.3", True)]),
                 gb.route("HTTPRoute", "r2", gb.parent("edge", namespace="infra"), hosts=["c.example.com"],
                          rules=[{"backendRefs": [{"name": "api", "port": 80}]}])]
    return objs


class Setup:
    def __init__(self, tmp: Path, backend_port: int) -> None:
        self.tmp = tmp
        self.port = dp.free_port()
        self.backend_port = backend_port
        self.state = tmp / "state"
        self.state.mkdir()
        self.out = tmp / "out"
        self.socket = str(tmp / "admin.sock")
        self.pidfile = tmp / "haproxy.pid"
        self.templates = tmp / "templates"
        self.templates.mkdir()
        name = "400-http-frontends.cfg.j2"
        text = (BUILTIN / name).read_text()
        assert "bind {{ fe.bind }}" in text
        (self.templates / name).write_text(text.replace("bind {{ fe.bind }}", "bind 127.0.0.1{{ fe.bind }}"))
        self.master: subprocess.Popen[bytes] | None = None
        self.flags: tuple[str, ...] = ()  # given to every reconcile (--haproxy)

    def write(self, **kw: Any) -> None:
        objs = _objects(self.port, self.backend_port, **kw)
        (self.state / "all.yaml").write_text(yaml.safe_dump_all(objs))

    def reconcile(self, *extra: str) -> str:
        """One ``routegate reconcile --once``; its stderr (the structured log)."""
        done = in_process("reconcile", "--once", "--state", str(self.state), "--output-dir", str(self.out),
                          "--stats-socket", self.socket, "--templates", str(self.templates), "--log-level", "debug",
                          *self.flags, *extra, timeout=120, HOME=str(self.tmp))
        assert done.returncode == 0, done.stderr
        return done.stderr

    def runtime(self, *extra: str) -> str:
        return self.reconcile("--runtime-socket", self.socket, "--reload-pidfile", str(self.pidfile), *extra)

    def start(self, binary: str) -> None:
        cwd = self.tmp / "elsewhere"  # maps resolve beside haproxy.cfg (default-path config), not the cwd
        cwd.mkdir()
        self.master = subprocess.Popen([binary, "-W", "-db", "-p", str(self.pidfile), "-f",
                                        str(self.out / "haproxy.cfg")], cwd=cwd, start_new_session=True,
                                       stdout=subprocess.DEVNULL, stderr=(self.tmp / "haproxy.log").open("wb"))
        deadline = time.monotonic() + 15
        while not (os.path.exists(self.socket) and self.pidfile.exists()):
            assert self.master.poll() is None and time.monotonic() < deadline, self.log()
            time.sleep(0.05)

    def log(self) -> str:
        return (self.tmp / "haproxy.log").read_text(errors="replace")[-2000:]

    def ask(self, command: str) -> str:
        return dp.ask(self.socket, command)

    def worker_pid(self) -> int:
        return dp.worker_pid(self.socket)

    def new_worker(self, old: int, seconds: float = 15) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                pid = self.worker_pid()
                if pid != old:
                    return pid
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"no reload: the worker is still {old}; {self.log()}")

    def stop(self) -> None:
        if self.master is not None and self.master.poll() is None:
            os.killpg(self.master.pid, signal.SIGTERM)
            try:
                self.master.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.master.pid, signal.SIGKILL)
                self.master.wait(5)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    backend_port = dp.free_port()
    with dp.backend_servers(ADDRS, backend_port):
        made = Setup(tmp_path, backend_port)
        try:
            yield made
        finally:
            made.stop()


def _served(setup: Setup, host: str, n: int = 12) -> Counter[str]:
    return Counter(dp.get(setup.port, host)[1].split(" ")[0] for _ in range(n))


def _logged(log: str) -> dict[str, dict[str, Any]]:
    """The structured log's events by name (the last of each)."""
    out: dict[str, dict[str, Any]] = {}
    for line in log.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            out[entry["event"]] = entry
    return out


def _eventually(check: Any, seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    got = None
    while time.monotonic() < deadline:
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.1)
    return got


def test_runtime_updates_and_reload_fallbacks(setup: Setup, haproxy_path: str) -> None:
    _scenario(setup, haproxy_path, "2.8")


def test_runtime_updates_and_reload_fallbacks_on_3x(setup: Setup, haproxy3: str) -> None:
    """The same on the fetched 3.x binary (patched to be re-executable by scripts/get-haproxy3), planned
    for that version (3.2: a new backend is still a reload)."""
    _scenario(setup, haproxy3, "3.2", "--haproxy", haproxy3)


def _scenario(setup: Setup, binary: str, before_backends_at_runtime: str, *flags: str) -> None:
    setup.flags = flags
    setup.write(env="one", addrs=("127.0.0.1", "127.0.0.2"))
    setup.reconcile()  # the first version, before the data plane starts on it
    setup.start(binary)
    assert "x-env=one" in dp.get(setup.port, "a.example.com")[1]
    pid = setup.worker_pid()

    # a map value: one `set map`, no reload
    setup.write(env="two", addrs=("127.0.0.1", "127.0.0.2"))
    log = _logged(setup.runtime())
    assert log["applied at runtime"]["commands"] == 1, log
    status, body = dp.get(setup.port, "a.example.com")
    assert status == 200 and "x-env=two" in body, body
    assert setup.worker_pid() == pid

    # an endpoint moving keeps its server slot: one `set server ... addr`, no reload
    setup.write(env="two", addrs=("127.0.0.1", "127.0.0.3"))
    log = _logged(setup.runtime())
    assert log["applied at runtime"]["commands"] == 1, log
    assert set(_served(setup, "a.example.com")) == {"127.0.0.1", "127.0.0.3"}
    assert "127.0.0.3" in next(line for line in setup.ask(f"show servers state {BACKEND}").splitlines()
                               if f" {BACKEND} " in line and " s2 " in line)
    assert setup.worker_pid() == pid

    # a new backend on a data plane before 3.4: the plan says reload -> SIGUSR2 to the master
    setup.write(env="two", addrs=("127.0.0.1", "127.0.0.3"), second_route=True)
    log = _logged(setup.runtime("--dataplane-version", before_backends_at_runtime))
    assert "rule 4: backend gw_h_default_r2_api_80 created" in log["reload signalled"]["reason"], log
    pid = setup.new_worker(pid)
    assert _eventually(lambda: set(_served(setup, "c.example.com", 4)) == {"127.0.0.3"})

    # a runtime command the data plane refuses (its map lost the entry): falls back to a reload
    key = next(line.split()[1] for line in setup.ask("show map maps/gw-reqhdr.map").splitlines()
               if "x-env" in line and line.startswith("0x"))
    assert setup.ask(f"del map maps/gw-reqhdr.map {key}").strip() == ""
    setup.write(env="three", addrs=("127.0.0.1", "127.0.0.3"), second_route=True)
    log = _logged(setup.runtime())
    assert "set map maps/gw-reqhdr.map" in log["runtime update failed; reloading"]["error"], log
    assert log["reload signalled"]["reason"].startswith("runtime command failed"), log
    setup.new_worker(pid)
    assert _eventually(lambda: "x-env=three" in dp.get(setup.port, "a.example.com")[1])
    assert setup.master is not None and setup.master.poll() is None  # the same master throughout
