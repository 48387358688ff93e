"""Reloads cannot storm: an object flapping a reload-only change every 300 ms, reconciled with no debounce
against a real ``haproxy -W`` 3.4 master under steady traffic, reloads at most once per
``--min-reload-interval``; a runtime change meanwhile is applied at once; no request fails; the data plane
ends on the newest version (the deferred reload takes it).

The reconcile loop runs in this process (``following.follow`` over a source the test sets, the real
Reconciler, Promoter and RuntimeApplier with SIGUSR2 to the master's pidfile); only the source of the
state is a stand-in (no Kubernetes API is needed to flap an object).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.check import binaries
from haproxy_check.runtime.promotion import Promoter
from tests.haproxy_check import dataplanes as dp
from tests.reconcile.test_runtime_reconcile import ADDRS, Setup, _objects
from validators.objects import Obj
from validators.states import MemoryState
from webhook import metrics
from webhook.gate import assembly
from webhook.reconcile.following import follow
from webhook.reconcile.promotedmemory import PromotedMemory
from webhook.reconcile.reconciler import Reconciler
from webhook.reconcile.reconcileruntime import PidfileReload, RuntimeApplier

pytestmark = pytest.mark.haproxy

FLAP_EVERY = 0.3
FLAPS = 24  # about 7 s of flapping
INTERVAL = 2.0


class Source:
    def __init__(self, state: MemoryState) -> None:
        self.ready = True
        self.state = state

    def snapshot(self) -> MemoryState:
        return self.state

    def status(self) -> dict[str, Any]:
        return {}


def _flapped(objs: list[Obj], on: bool, env: str = "one") -> list[Obj]:
    """The route with a response header (a frontend line: reload-only on every version) or without."""
    out = copy.deepcopy(objs)
    rule = out[-1]["spec"]["rules"][0]
    rule["filters"][0]["requestHeaderModifier"]["set"][0]["value"] = env  # a map value: runtime
    if on:
        rule["filters"].append({"type": "ResponseHeaderModifier",
                                "responseHeaderModifier": {"set": [{"name": "X-Flap", "value": "on"}]}})
    return out


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry))
    return found


class Traffic(threading.Thread):
    """A steady request loop through HAProxy, and the master's worker processes sampled meanwhile."""

    def __init__(self, port: int, master: int) -> None:
        super().__init__(daemon=True)
        self.port, self.master = port, master
        self.ok = self.failed = self.peak = 0
        self.workers: set[int] = set()
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            children = _children(self.master)
            self.workers |= children
            self.peak = max(self.peak, len(children))
            try:
                status, _ = dp.get(self.port, "a.example.com")
                if status == 200:
                    self.ok += 1
                else:
                    self.failed += 1
                    self.errors.append(str(status))
            except (OSError, urllib.error.URLError) as exc:
                self.failed += 1
                self.errors.append(repr(exc))
            time.sleep(0.02)


def _header(port: int) -> tuple[str | None, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Host": "a.example.com"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.headers.get("X-Flap"), response.read().decode()


async def _eventually(check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        got = await asyncio.to_thread(check)
        if got or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.1)


async def test_a_flapping_object_reloads_at_most_once_per_interval(tmp_path: Path, haproxy34: str) -> None:
    backend_port = dp.free_port()
    with dp.backend_servers(ADDRS, backend_port):
        setup = Setup(tmp_path, backend_port)
        try:
            await _scenario(setup, haproxy34)
        finally:
            setup.stop()


async def _scenario(setup: Setup, haproxy34: str) -> None:
    binary = await binaries.detect(haproxy34)
    gate = assembly.build_gate(binary, assembly.GateSettings(templates=[str(setup.templates)],
                                                             render={"stats_socket": setup.socket}))
    base = _objects(setup.port, setup.backend_port, env="one", addrs=("127.0.0.1", "127.0.0.2"))
    promoter = Promoter(setup.out, keep=3)
    memory = PromotedMemory()
    applier = RuntimeApplier(promoter, setup.socket, dataplane_version=(3, 4),
                             reload=PidfileReload(setup.pidfile), memory=memory, min_reload_interval=INTERVAL)
    reconciler = Reconciler(gate, promoter, on_promoted=[applier], memory=memory)
    source = Source(MemoryState(_flapped(base, False), version="v0"))
    assert (await reconciler.reconcile(source.snapshot())).promoted is not None
    await asyncio.to_thread(setup.start, haproxy34)
    assert setup.master is not None
    deferred_before = metrics.RELOADS_DEFERRED._value.get()
    traffic = Traffic(setup.port, setup.master.pid)
    traffic.start()
    loop = asyncio.ensure_future(follow(source, reconciler, debounce=0.0, max_wait=2.0, poll=0.02))
    try:
        started = time.monotonic()
        for i in range(1, FLAPS + 1):
            source.state = MemoryState(_flapped(base, on=i % 2 == 1), version=f"v{i}")
            await asyncio.sleep(FLAP_EVERY)
        flapped_for = time.monotonic() - started
        # the last flap left the header on; then a runtime change (a map value) is applied at once, even
        # with a reload pending, and the pending reload still brings the header
        source.state = MemoryState(_flapped(base, on=True, env="two"), version="last")
        assert await _eventually(lambda: "x-env=two" in _header(setup.port)[1], 2.0), "runtime change waited"
        assert await _eventually(lambda: _header(setup.port)[0] == "on", INTERVAL + 3), "no final reload"
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
        await applier.close()
        traffic.stop.set()
        await asyncio.to_thread(traffic.join, 10)
    reloads_allowed = int(flapped_for / INTERVAL) + 2  # one per interval, the first at once, and the last
    new_workers = len(traffic.workers) - 1
    print(f"flapped {FLAPS} times in {flapped_for:.1f}s: {applier.reloads} reloads signalled, {new_workers} new "
          f"workers, peak {traffic.peak} HAProxy worker processes, {traffic.ok} requests ok, {traffic.failed} failed")
    assert 1 <= applier.reloads <= reloads_allowed, applier.reloads
    assert new_workers <= reloads_allowed, traffic.workers
    assert metrics.RELOADS_DEFERRED._value.get() > deferred_before
    assert traffic.failed == 0, traffic.errors[:5]
    assert traffic.ok > 50
