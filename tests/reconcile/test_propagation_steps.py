"""Every millisecond of a reconcile attributed, and no file round trip on the hot path: the steps cover
the whole run (what none covers is its own "unattributed" step), the end-to-end propagation histogram
counts from the change's first sight to the data plane updated, and the planner, the runtime applier
and the status hook get the promoted description, files and statuses in memory (description.json and
statuses.json are written for the reload wrapper and for humans, never read back by this process)."""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from haproxy_check.runtime.promotion import Promoter
from tests.reconcile.conftest import DATA
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.reconcile.promotedmemory import PromotedMemory
from webhook.reconcile.reconciler import Reconciler, Result
from webhook.reconcile.reconcileruntime import RuntimeApplier, TriggerReload
from webhook.reconcile.statuswriter import OutcomeStatuses, StatusWriter

STEPS = {"scope", "audit", "leaveouts", "render", "check", "findings", "shrink", "statuses", "serialize",
         "promote", "dataplane", "report", "outcome"}


def _objects() -> list[dict[str, Any]]:
    objs = [o for o in yaml.safe_load_all((DATA / "state" / "cluster.yaml").read_text()) if o]
    return [*objs, {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                    "metadata": {"name": "r", "namespace": "capture"},
                    "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["a.example.com"],
                             "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}}]


def _changed(objs: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    out = copy.deepcopy(objs)
    route = next(o for o in out if o["kind"] == "HTTPRoute")
    route["spec"]["hostnames"] = [*route["spec"]["hostnames"], f"n{n}.example.com"]
    return out


def _wired(gate: Gate, out: Path) -> tuple[Reconciler, RuntimeApplier]:
    promoter = Promoter(out, keep=3)
    memory = PromotedMemory()
    applier = RuntimeApplier(promoter, str(out / "no.sock"), dataplane_version=(3, 4),
                             reload=TriggerReload(out), memory=memory)
    statuses = OutcomeStatuses(StatusWriter(None), gate.scope, out, memory=memory)
    return Reconciler(gate, promoter, on_promoted=[applier], on_outcome=[statuses], memory=memory), applier


async def test_every_step_is_timed_and_the_rest_is_unattributed(tmp_path: Path, gate: Gate) -> None:
    reconciler, applier = _wired(gate, tmp_path / "out")
    await reconciler.reconcile(MemoryState(_objects(), version="a"))
    outcome = await reconciler.reconcile(MemoryState(_changed(_objects(), 1), version="b"))
    assert outcome.result is Result.PROMOTED
    steps = {k: v for k, v in outcome.timings.items() if k not in ("total", "unattributed")}
    assert set(steps) >= STEPS, set(steps)
    assert outcome.timings["total"] == pytest.approx(sum(steps.values()) + outcome.timings["unattributed"])
    assert outcome.timings["unattributed"] < 0.1 * outcome.timings["total"] + 0.01
    assert applier.last is not None
    assert {"plan", "reload", "publish"} <= set(applier.last.timings), applier.last
    assert (REGISTRY.get_sample_value("routegate_reconcile_step_duration_seconds_count", {"step": "total"})
            or 0) >= 2


async def test_propagation_counts_from_the_first_sight_of_the_change(tmp_path: Path, gate: Gate) -> None:
    reconciler, _ = _wired(gate, tmp_path / "out")
    await reconciler.reconcile(MemoryState(_objects(), version="a"))
    labels = {"how": "reload"}  # no socket here: every update is a reload request
    count = REGISTRY.get_sample_value("routegate_reconcile_propagation_seconds_count", labels) or 0
    total = REGISTRY.get_sample_value("routegate_reconcile_propagation_seconds_sum", labels) or 0
    seen = time.monotonic() - 0.5  # the change was seen half a second before this run
    await reconciler.reconcile(MemoryState(_changed(_objects(), 1), version="b"), seen_at=seen)
    assert REGISTRY.get_sample_value("routegate_reconcile_propagation_seconds_count", labels) == count + 1
    grew = (REGISTRY.get_sample_value("routegate_reconcile_propagation_seconds_sum", labels) or 0) - total
    assert 0.5 <= grew < 30


async def test_the_hooks_read_nothing_back(tmp_path: Path, gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    reconciler, applier = _wired(gate, tmp_path / "out")
    await reconciler.reconcile(MemoryState(_objects(), version="a"))
    read: list[str] = []
    for method in ("read_text", "read_bytes"):
        original = getattr(Path, method)

        def recording(self: Path, *args: Any, _original: Any = original, **kw: Any) -> Any:
            read.append(self.name)
            return _original(self, *args, **kw)

        monkeypatch.setattr(Path, method, recording)
    for n in range(1, 3):
        outcome = await reconciler.reconcile(MemoryState(_changed(_objects(), n), version=f"b{n}"))
        assert outcome.result is Result.PROMOTED
        assert applier.last is not None and applier.last.version == outcome.promoted.version  # type: ignore[union-attr]
    assert not {"description.json", "statuses.json"} & set(read), read
    assert not any(name.endswith((".pem", ".crt")) for name in read), read
    written = (tmp_path / "out" / outcome.promoted.version / "description.json").read_text()  # type: ignore[union-attr]
    assert written.startswith("{\n") and '"backends": [' in written  # still written, for the wrapper and humans


class Recorded:
    """A reload that only records what it was asked for."""

    def __init__(self) -> None:
        self.versions: list[str] = []

    def describe(self) -> str:
        return "recorded"

    async def reload(self, promoted: Any, reason: str) -> str:
        self.versions.append(promoted.version)
        return ""


def _header(objs: list[dict[str, Any]], value: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(objs)
    rule = next(o for o in out if o["kind"] == "HTTPRoute")["spec"]["rules"][0]
    rule["filters"] = [{"type": "ResponseHeaderModifier",  # a frontend line: a reload on every version
                        "responseHeaderModifier": {"set": [{"name": f"X-{value}", "value": "1"}]}}]
    return out


async def test_a_reload_within_the_interval_waits_and_takes_the_newest_version(tmp_path: Path, gate: Gate) -> None:
    promoter, memory, reload = Promoter(tmp_path / "out", keep=4), PromotedMemory(), Recorded()
    applier = RuntimeApplier(promoter, str(tmp_path / "no.sock"), dataplane_version=(3, 4), reload=reload,
                             memory=memory, min_reload_interval=1.0)
    refreshed = asyncio.Event()

    async def refresh() -> None:
        assert not refreshed.is_set()
        refreshed.set()

    applier.after_deferred.append(refresh)
    reconciler = Reconciler(gate, promoter, on_promoted=[applier], memory=memory)
    first = await reconciler.reconcile(MemoryState(_header(_objects(), "One"), version="a"))
    assert applier.last is not None and not applier.last.deferred  # nothing ran: reloaded at once
    second = await reconciler.reconcile(MemoryState(_header(_objects(), "Two"), version="b"))
    third = await reconciler.reconcile(MemoryState(_header(_objects(), "Three"), version="c"))
    assert applier.last.deferred  # within the interval: put off, and the two are one reload
    assert first.promoted and second.promoted and third.promoted
    assert reload.versions == [first.promoted.version]
    await asyncio.wait_for(refreshed.wait(), 10)
    assert reload.versions == [first.promoted.version, third.promoted.version]  # one reload, to the newest
    assert not applier.last.deferred and applier.last.version == third.promoted.version
    await applier.close()
