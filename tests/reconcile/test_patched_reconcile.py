"""Reconcile renders a changed state as a patch of the last render (haproxy_check.render.patching), and
what it promotes is byte for byte what a from-scratch render of the same view gives; a patched render
that fails ``haproxy -c`` is rendered again in full, so isolation still holds the broken object back.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from bench import bench_gate
from haproxy_check.check import binaries
from haproxy_check.render.rendering import Renderer
from haproxy_check.runtime.promotion import Promoter
from validators.states import MemoryState
from webhook import metrics
from webhook.gate import assembly
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Reconciler, Result

pytestmark = pytest.mark.haproxy


def _renders(how: str) -> float:
    return float(metrics.RECONCILE_RENDERS.labels(how)._value.get())


def _promoted(out: Path, version: str) -> dict[str, bytes]:
    base = out / version
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()
            and p.name not in ("description.json", "statuses.json")}


def test_a_changed_route_is_patched_promoted_as_a_full_render_and_a_broken_one_still_isolated(
        haproxy_path: str, tmp_path: Path) -> None:
    async def run() -> None:
        binary = await binaries.detect(haproxy_path)
        gate = assembly.build_gate(binary, assembly.GateSettings(render={"stats_socket": "/var/run/haproxy.sock"}))
        reconciler = Reconciler(gate, Promoter(tmp_path))
        objs: list[Any] = bench_gate.objects(12)
        first = await reconciler.reconcile(MemoryState(objs, version="a"))
        assert first.result is Result.PROMOTED

        changed = copy.deepcopy(objs)
        route = next(o for o in changed if o["kind"] == "HTTPRoute")
        route["spec"]["hostnames"] = ["moved." + route["spec"]["hostnames"][0].split(".", 1)[1]]
        route["spec"]["rules"][1]["matches"][0]["headers"][0]["value"] = "no"
        patched = _renders("patched")
        second = await reconciler.reconcile(MemoryState(changed, version="b"))
        assert second.result is Result.PROMOTED, second.rejection
        assert _renders("patched") == patched + 1
        assert first.promoted is not None and second.promoted is not None
        view = gate.scope.view(MemoryState(changed, version="b"))
        assert isinstance(gate.renderer, Renderer)
        full = Renderer(settings=gate.renderer.settings, incremental=False).render(
            view, previous=reconciler.memory.get(first.promoted.version).description)  # type: ignore[union-attr]
        assert _promoted(tmp_path, second.promoted.version) == {p: d for p, d in full.files.items()}
        assert b"moved." in full.files["maps/host.map"]

        broken = copy.deepcopy(changed)
        route = next(o for o in broken if o["kind"] == "HTTPRoute")
        assert route["spec"]["rules"][2]["matches"][0]["path"]["type"] == "RegularExpression"
        path = route["spec"]["rules"][2]["matches"][0]["path"]
        # the same length (so the same precedence: patched in place), and a regex haproxy -c refuses
        path["value"] = path["value"].replace("[a-z]+", "a{2,1}")
        rechecked = _renders("full:check")
        third = await reconciler.reconcile(MemoryState(broken, version="c"))
        assert third.result is Result.PROMOTED or third.result is Result.UNCHANGED, third.rejection
        held = {item.ref.name: item.treatment for item in third.left_out}
        assert held.get(route["metadata"]["name"]) is Treatment.HELD_BACK, third.left_out
        assert _renders("full:check") == rechecked + 1

    asyncio.run(run())
