"""Reconcile judges a patched render by ``haproxy -c`` of the changed objects' closure (the gate's delta
check), checks the whole promoted configuration in the background, and lets the full result win: a
disagreement is counted and the next run renders and checks in full, holding the culprit back.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from bench import bench_gate
from haproxy_check.check import binaries
from haproxy_check.results import CheckResult, HAProxyBinary, RenderResult
from haproxy_check.runtime.promotion import Promoter
from validators.states import MemoryState
from webhook import metrics
from webhook.gate import assembly
from webhook.gate.gates import Checks
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Reconciler, Result

pytestmark = pytest.mark.haproxy


class Recording:
    """The real checker, recording each configuration it checks; ``lie`` makes the next check of a
    configuration other than ``whole`` pass unchecked (a delta check that misjudges)."""

    def __init__(self, real: Checks) -> None:
        self.real = real
        self.checked: list[bytes] = []
        self.lie = False
        self.binary: HAProxyBinary = real.binary

    async def check(self, render: RenderResult) -> CheckResult:
        config = render.files["haproxy.cfg"]
        self.checked.append(config)
        if self.lie:
            self.lie = False
            return CheckResult(ok=True, binary=self.binary, exit_code=0)
        return await self.real.check(render)


def _count(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


def _config(out: Path, version: str) -> bytes:
    return (out / version / "haproxy.cfg").read_bytes()


async def _setup(haproxy_path: str, tmp_path: Path) -> tuple[Reconciler, Recording, list[Any]]:
    binary = await binaries.detect(haproxy_path)
    gate = assembly.build_gate(binary, assembly.GateSettings(render={"stats_socket": "/var/run/haproxy.sock"}))
    recording = Recording(gate.checker)
    gate.checker = recording
    reconciler = Reconciler(gate, Promoter(tmp_path))
    objs: list[Any] = bench_gate.objects(12)
    first = await reconciler.reconcile(MemoryState(objs, version="a"))
    assert first.result is Result.PROMOTED
    await reconciler.full_checks.idle()
    return reconciler, recording, objs


def test_one_changed_route_is_checked_on_its_closure_and_in_full_in_the_background(
        haproxy_path: str, tmp_path: Path) -> None:
    async def run() -> None:
        reconciler, recording, objs = await _setup(haproxy_path, tmp_path)
        changed = copy.deepcopy(objs)
        route = next(o for o in changed if o["kind"] == "HTTPRoute")
        route["spec"]["rules"][1]["matches"][0]["headers"][0]["value"] = "no"
        agreed = _count(metrics.RECONCILE_FULL_CHECKS, "agreed")
        disagreements = _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS)
        full, delta = _count(metrics.RECONCILE_CHECKS, "full"), _count(metrics.RECONCILE_CHECKS, "delta")
        recording.checked.clear()
        second = await reconciler.reconcile(MemoryState(changed, version="b"))
        assert second.result is Result.PROMOTED, second.rejection
        assert second.promoted is not None
        whole = _config(tmp_path, second.promoted.version)
        # the hot path ran one haproxy -c, of a part of the configuration (the changed route's closure) ...
        assert _count(metrics.RECONCILE_CHECKS, "full") == full
        assert _count(metrics.RECONCILE_CHECKS, "delta") == delta + 1
        assert recording.checked[0] != whole and len(recording.checked[0]) < len(whole)
        # ... and the promoted configuration was checked in full in the background (it may have started
        # while the run wrote statuses), which agrees
        await reconciler.full_checks.idle()
        assert recording.checked[1:] == [whole]
        assert _count(metrics.RECONCILE_FULL_CHECKS, "agreed") == agreed + 1
        assert _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS) == disagreements

    asyncio.run(run())


def _with_broken_regex(objs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A copy of ``objs`` whose first HTTPRoute has a path regex of the same length that haproxy -c refuses
    (so the render is patched in place), and that route."""
    broken = copy.deepcopy(objs)
    route = next(o for o in broken if o["kind"] == "HTTPRoute")
    path = route["spec"]["rules"][2]["matches"][0]["path"]
    assert path["type"] == "RegularExpression"
    path["value"] = path["value"].replace("[a-z]+", "a{2,1}")
    return broken, route


def test_a_delta_check_the_full_check_contradicts_is_counted_and_the_full_result_wins(
        haproxy_path: str, tmp_path: Path) -> None:
    async def run() -> None:
        reconciler, recording, objs = await _setup(haproxy_path, tmp_path)
        broken, route = _with_broken_regex(objs)
        disagreements = _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS)
        renders = _count(metrics.RECONCILE_RENDERS, "full:disagreement")
        recording.lie = True  # the delta check misjudges the broken route
        lied = await reconciler.reconcile(MemoryState(broken, version="b"))
        assert lied.result is Result.PROMOTED, lied.rejection
        assert not lied.left_out
        await reconciler.full_checks.idle()
        assert _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS) == disagreements + 1

        # the next run judges in full, from the last fully checked view: the route is held back there
        recording.checked.clear()
        after = await reconciler.reconcile(MemoryState(broken, version="c"))
        assert _count(metrics.RECONCILE_RENDERS, "full:disagreement") == renders + 1
        assert after.result is Result.PROMOTED, after.rejection
        held = {item.ref.name: item.treatment for item in after.left_out}
        assert held.get(route["metadata"]["name"]) is Treatment.HELD_BACK, after.left_out
        assert after.promoted is not None
        promoted = tmp_path / after.promoted.version
        assert not any(b"a{2,1}" in p.read_bytes() for p in promoted.rglob("*") if p.is_file()
                       and p.name not in ("description.json", "statuses.json"))

    asyncio.run(run())


def test_a_state_whose_render_is_unchanged_is_not_checked_again(haproxy_path: str, tmp_path: Path) -> None:
    async def run() -> None:
        reconciler, recording, objs = await _setup(haproxy_path, tmp_path)
        recording.checked.clear()
        again = await reconciler.reconcile(MemoryState(copy.deepcopy(objs), version="b"))
        assert again.result is Result.UNCHANGED, again.rejection
        await reconciler.full_checks.idle()
        assert recording.checked == []  # the very render that passed in full: nothing to check

        # a delta-checked promotion found unchanged after: still checked in full, once, in the background
        changed = copy.deepcopy(objs)
        next(o for o in changed if o["kind"] == "HTTPRoute")["spec"]["rules"][1]["matches"][0]["headers"][0][
            "value"] = "no"
        assert (await reconciler.reconcile(MemoryState(changed, version="c"))).result is Result.PROMOTED
        assert (await reconciler.reconcile(MemoryState(copy.deepcopy(changed), version="d"))).result \
            is Result.UNCHANGED
        await reconciler.full_checks.idle()
        assert len(recording.checked) == 2  # the closure, then the promoted configuration in full

    asyncio.run(run())
