"""Property: with k broken stored objects, reconcile promotes exactly the rest (webhook.reconcile.isolating).

For random states built from a promoted base (one Gateway, four routes) with a valid change to one
route and k breakages haproxy -c rejects but nothing before it stops (stored past admission: regexes
HAProxy's PCRE refuses in a path, a header or a query match, a listener port out of range; the last
one names no object, so it is found by bisection), the promoted configuration is byte for byte the
from-scratch render (a fresh renderer, no incremental cache) of the base with the valid change, the
broken updates at their base versions and the broken new objects absent; and it passes haproxy -c.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.check import binaries
from haproxy_check.results import HAProxyBinary
from haproxy_check.runtime import descriptionfiles
from haproxy_check.runtime.promotion import Promoter
from tests.reconcile.conftest import DATA
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.loading import inputs
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Reconciler, Result

ROUTES = 4
BAD = {  # what haproxy -c rejects (numbers out of order in a {} quantifier) and the audit lets through
    "path": {"path": {"type": "RegularExpression", "value": "/x{2,1}"}},
    "header": {"headers": [{"type": "RegularExpression", "name": "x-t", "value": "y{3,1}"}]},
    "query": {"queryParams": [{"type": "RegularExpression", "name": "q", "value": "z{9,2}"}]},
}


def _route(name: str, rv: str = "1") -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "capture", "resourceVersion": rv, "generation": 1},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"{name}.example.com"],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}},
                                            {"headers": [{"type": "RegularExpression", "name": "x-v",
                                                          "value": f"v[0-9]+{name}"}]}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]}}


def _broken(obj: Obj, how: str) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = "2"
    out["spec"]["rules"].append({"matches": [BAD[how]], "backendRefs": [{"name": "web", "port": 8080}]})
    return out


def _bad_port(gateway: Obj) -> Obj:
    out = copy.deepcopy(gateway)
    out["metadata"]["resourceVersion"] = "2"
    out["spec"]["listeners"].append({"name": "bad", "protocol": "HTTP", "port": 70000})
    return out


def _base() -> dict[Ref, Obj]:
    objects: list[Obj] = [copy.deepcopy(dict(i.obj)) for i in inputs.load([str(DATA / "state")])]
    objects += [_route(f"r{i}") for i in range(ROUTES)]
    for obj in objects:
        obj["metadata"].setdefault("resourceVersion", "1")
    return {ref_of(o): o for o in objects}


EDGE = Ref("Gateway", "capture", "edge")

# A breakage: ("update", route index, how) | ("new", n, how) | ("port", 0, "") on edge | ("gateway", 0, "")
breakages = st.lists(
    st.one_of(st.tuples(st.just("update"), st.integers(1, ROUTES - 1), st.sampled_from(sorted(BAD))),
              st.tuples(st.just("new"), st.integers(0, 2), st.sampled_from(sorted(BAD))),
              st.just(("port", 0, "")), st.just(("gateway", 0, ""))),
    min_size=1, max_size=3, unique_by=lambda b: (b[0], b[1]))


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
            and p.name not in ("description.json", "statuses.json")}


async def _scenario(gate: Gate, binary: HAProxyBinary, broken: list[tuple[str, int, str]], out: Path) -> None:
    base = _base()
    reconciler = Reconciler(gate, Promoter(out, keep=3))
    first = await reconciler.reconcile(MemoryState.keyed(base, version="base"))
    assert first.result is Result.PROMOTED and first.promoted is not None

    # r0 always gets a valid change that must be promoted whatever else breaks
    changed = copy.deepcopy(base)
    valid = Ref("HTTPRoute", "capture", "r0")
    changed[valid] = copy.deepcopy(base[valid])
    changed[valid]["metadata"]["resourceVersion"] = "2"
    changed[valid]["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/r0-changed"
    expected = copy.deepcopy(changed)
    treatments: dict[Ref, Treatment] = {}
    for what, n, how in broken:
        if what == "update":
            ref = Ref("HTTPRoute", "capture", f"r{n}")
            changed[ref] = _broken(base[ref], how)
            treatments[ref] = Treatment.HELD_BACK
        elif what == "new":
            ref = Ref("HTTPRoute", "capture", f"new{n}")
            changed[ref] = _broken(_route(f"new{n}"), how)
            treatments[ref] = Treatment.LEFT_OUT
        elif what == "port":
            changed[EDGE] = _bad_port(base[EDGE])
            treatments[EDGE] = Treatment.HELD_BACK
        else:
            ref = Ref("Gateway", "capture", "edge2")
            gateway = copy.deepcopy(base[EDGE])
            gateway["metadata"]["name"] = "edge2"
            gateway["spec"]["listeners"] = [{"name": "bad", "protocol": "HTTP", "port": 70000}]
            changed[ref] = gateway
            treatments[ref] = Treatment.LEFT_OUT

    outcome = await reconciler.reconcile(MemoryState.keyed(changed, version="changed"))
    assert outcome.result is Result.PROMOTED, (outcome.result, outcome.rejection)
    assert {x.ref: x.treatment for x in outcome.left_out} == treatments
    for item in outcome.left_out:
        assert item.findings and all(f.code == "RG0800" for f in item.findings), item
        assert item.kept_resource_version == ("1" if item.treatment is Treatment.HELD_BACK else "")
        assert item.ref in outcome.at_fault

    # the from-scratch render of what should be live: a fresh renderer, the same live slot names
    fresh = assembly.build_gate(binary, assembly.GateSettings())
    previous = descriptionfiles.read(out / first.promoted.version)  # its maps' entries from its map files
    render = fresh.renderer.render(MemoryState.keyed(expected, version="expected"), subject=None, previous=previous)
    assert outcome.promoted is not None
    assert _files(out / outcome.promoted.version) == {k: bytes(v) for k, v in render.files.items()}
    assert b"/r0-changed" in b"".join(render.files.values())
    checked = await fresh.checker.check(render)
    assert checked.ok, checked.alerts


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken=breakages)
def test_everything_but_the_broken_objects_is_promoted(gate: Gate, binary: HAProxyBinary,
                                                       broken: list[tuple[str, int, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(gate, binary, broken, Path(tmp) / "out"))


WIDEST = [("update", 1, "header"), ("new", 0, "query"), ("port", 0, ""), ("gateway", 0, "")]


def test_every_kind_of_breakage_at_once(gate: Gate, binary: HAProxyBinary) -> None:
    """The widest case the strategy draws, every time: an update, a new route, both Gateway breakages."""
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(gate, binary, WIDEST, Path(tmp) / "out"))


def test_every_kind_of_breakage_at_once_on_every_binary(haproxy_paths: list[str]) -> None:
    """The same with each extra checker binary (``.haproxy3``: a 3.x data plane), rendered for it."""
    if len(haproxy_paths) < 2:
        pytest.skip("no extra haproxy binary (scripts/get-haproxy3 fetches one into .haproxy3)")
    for path in haproxy_paths[1:]:
        binary = asyncio.run(binaries.detect(path))
        gate = assembly.build_gate(binary, assembly.GateSettings())
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(_scenario(gate, binary, WIDEST, Path(tmp) / "out"))

