"""A real HAProxy data plane for tests: ``haproxy -W`` (master-worker) on a render, with an admin stats
socket, bound to loopback; and real HTTP backends (one small Python server per loopback address).

``DataPlane.snapshot()`` is what the runtime tests compare between a data plane updated by a plan and
one started fresh on the new render: ``show map`` of every map (entries without their pointers, sorted
for unordered maps), ``show servers state`` (the columns a configuration decides: not ids, the initial
weight or timers, which differ between a server added at runtime and one loaded from a file) and
``show backend``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from haproxy_check.results import RenderResult
from haproxy_check.runtime.runtimeapi import send

STATE_COLUMNS = ("be_name", "srv_name", "srv_addr", "srv_op_state", "srv_admin_state", "srv_uweight", "srv_port",
                 "srv_use_ssl")
BACKEND_SERVER = r"""
import http.server, sys
name = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{name} x-env={self.headers.get('x-env', '')} port={sys.argv[2]}\n".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_connectable(host: str, port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on {host}:{port} within {timeout}s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@contextmanager
def backend_servers(addresses: list[str], port: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", BACKEND_SERVER, a, str(port)], start_new_session=True)
             for a in addresses]
    try:
        for addr, proc in zip(addresses, procs, strict=True):
            _wait_connectable(addr, port, proc, f"backend server {addr}")
        yield
    finally:
        for proc in procs:
            _stop(proc)


def dataplane_config(cfg: str, sock: str) -> str:
    """The render with what a data plane adds: an admin stats socket, and binds on loopback only."""
    out = cfg.replace("global\n", f"global\n    stats socket {sock} level admin\n", 1)
    return "\n".join(line.replace("    bind :", "    bind 127.0.0.1:", 1) for line in out.split("\n"))


def write_render(render: RenderResult, where: Path) -> None:
    for path, data in render.files.items():
        target = where / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def ask(sock: str, command: str) -> str:
    """One Runtime API command over the stats socket, retried while the master (re)starts its worker."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return asyncio.run(send(sock, command))
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def worker_pid(sock: str) -> int:
    for line in ask(sock, "show info").splitlines():
        if line.startswith("Pid:"):
            return int(line.split(":", 1)[1])
    raise AssertionError("show info has no Pid")


class DataPlane:
    def __init__(self, binary: str, render: RenderResult) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="rgdp"))  # short: a unix socket path has ~100 bytes
        self.socket = str(self.dir / "s.sock")
        self.binary = binary
        self.write(render)
        self.log = self.dir / "haproxy.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([binary, "-W", "-f", "haproxy.cfg"], cwd=self.dir, start_new_session=True,
                                         stdout=log, stderr=log)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.log.read_text(errors="replace")
                self.stop()
                raise AssertionError(f"haproxy did not start: {err[-2000:]}")
            time.sleep(0.05)
        self.ask("show info")  # the worker answers

    def write(self, render: RenderResult) -> None:
        """Promote a render into the data plane's directory (as the reconcile gate would): the running
        worker does not read it until a reload."""
        write_render(render, self.dir)
        cfg = render.files["haproxy.cfg"].decode()
        (self.dir / "haproxy.cfg").write_text(dataplane_config(cfg, self.socket))

    def ask(self, command: str) -> str:
        return ask(self.socket, command)

    def worker_pid(self) -> int:
        return worker_pid(self.socket)

    def snapshot(self, render: RenderResult) -> dict[str, Any]:
        maps: dict[str, list[str]] = {}
        for m in render.description.maps:
            entries = [line.split(" ", 1)[1] for line in self.ask(f"show map {m.path}").splitlines()
                       if line.startswith("0x")]
            maps[m.path] = entries if m.ordered else sorted(entries)
        lines = self.ask("show servers state").splitlines()
        header = next(line for line in lines if line.startswith("# be_id"))[2:].split()
        rows = sorted(tuple(dict(zip(header, line.split(), strict=False))[c] for c in STATE_COLUMNS)
                      for line in lines if line and line[0].isdigit() and len(line.split()) > 5)
        backends = sorted(line for line in self.ask("show backend").splitlines()
                          if line and not line.startswith("#"))
        return {"maps": maps, "servers": rows, "backends": backends}

    def stop(self) -> None:
        _stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def dataplane(binary: str, render: RenderResult) -> Iterator[DataPlane]:
    plane = DataPlane(binary, render)
    try:
        yield plane
    finally:
        plane.stop()


def get(port: int, host: str, path: str = "/") -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def served_certificate(port: int, server_name: str) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=server_name) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


# The binaries the live runtime tests run on, by version: 2.8 is the default one (``haproxy_path``); 3.2 and
# 3.4 are found and required the way tests/conftest.py finds them (``need_binary``: with CI=true a missing
# one fails): 3.2 at ``$ROUTEGATE_HAPROXY_32`` or ``.haproxy3/haproxy``, 3.4 at ``$ROUTEGATE_HAPROXY_34`` or
# ``.haproxy34/haproxy``.
def binary_of(version: str) -> str:
    from tests.conftest import REPO, haproxy34_path, need_binary

    if version == "3.4":
        return need_binary(haproxy34_path(), versions=("3.4", "3.5"),
                           why="runtime backend features need it (set ROUTEGATE_HAPROXY_34)")
    if version == "3.2":
        return need_binary(os.environ.get("ROUTEGATE_HAPROXY_32") or str(REPO / ".haproxy3" / "haproxy"),
                           versions=("3.2",), why="`scripts/get-haproxy3 .haproxy3 sid` fetches it")
    raise ValueError(f"no live-test binary for HAProxy {version}")
