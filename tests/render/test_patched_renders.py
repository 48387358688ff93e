"""A patched render (haproxy_check.render.patching) is byte for byte the from-scratch full render.

Differential, seeded and derandomized: states drawn from every render fixture (HTTP, GRPC, TLS, TCP
and custom Routes, Gateways, ListenerSets, Services, EndpointSlices, ReferenceGrants,
BackendTLSPolicies, Secrets, a CA ConfigMap, Namespaces), then random sequences of creates, updates
(fixture variants and random field mutations) and deletes, one or a few objects per step. One Patcher
follows the sequence, patching each state from the last; after each step its files, description
(with the routing facts) and findings must equal a fresh full render's, and ``haproxy -c`` (2.8, and
3.x when ``.haproxy3`` is present) must judge the patched files as it judges the full ones. A run in
which no step was patched fails too: the test would otherwise compare two full renders.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from haproxy_check.descriptions import Description
from haproxy_check.render import patching
from haproxy_check.render.rendering import Renderer, RenderError
from haproxy_check.results import RenderResult
from tests.render.test_incremental import REFS, VARIANTS, step
from validators.changes import Operation
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState

HOW: Counter[str] = Counter()


def _same(got: RenderResult, want: RenderResult) -> None:
    assert sorted(got.files) == sorted(want.files)
    for path in want.files:
        assert got.files[path] == want.files[path], path
    assert got.description == want.description
    assert got.description.routing == want.description.routing
    assert got.findings == want.findings


def _full(state: MemoryState, previous: Description | None) -> RenderResult | str:
    try:
        return Renderer(incremental=False).render(state, previous=previous)
    except RenderError as exc:
        return f"RenderError: {exc}"


def _sequence(data: st.DataObject, start: list[Ref], check: Callable[[RenderResult], Any] | None) -> None:
    objects = {ref: copy.deepcopy(data.draw(st.sampled_from(VARIANTS[ref]))) for ref in start}
    patcher = patching.Patcher(Renderer())
    previous: Description | None = None
    for _ in range(data.draw(st.integers(2, 10))):
        state = MemoryState(list(objects.values()))
        want = _full(state, previous)
        try:
            got, how = patcher.render(state, previous=previous)
        except RenderError as exc:
            assert want == f"RenderError: {exc}"
            patcher.forget()
        else:
            assert not isinstance(want, str), want
            HOW[how] += 1
            _same(got, want)
            if check is not None and how == "patched" and data.draw(st.integers(0, 3)) == 0:
                assert check(got).returncode == check(want).returncode
            if data.draw(st.booleans()):
                previous = got.description  # promoted: the next render keeps its slot names
        for _ in range(data.draw(st.integers(1, 3))):
            operation, obj = data.draw(step(objects))
            if operation is Operation.DELETE:
                del objects[ref_of(obj)]
            else:
                objects[ref_of(obj)] = obj


@settings(max_examples=25, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), start=st.lists(st.sampled_from(REFS), min_size=10, max_size=60, unique=True))
def test_patched_equals_full_render(data: st.DataObject, start: list[Ref], haproxy_check: Any) -> None:
    _sequence(data, start, haproxy_check)


def test_the_differential_patched_most_route_and_endpoint_changes() -> None:
    """The property above compared patched renders, not only full ones (its counts, after it ran)."""
    if not HOW:
        test_patched_equals_full_render()  # run alone: draw the sequences here
    assert HOW["patched"] >= 20, HOW


def _routes(n: int) -> list[Obj]:
    from tests.attachments import gwbuilders as gb
    objs: list[Obj] = [gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra")]
    for i in range(n):
        objs.append(gb.service(f"s{i}", "default", ("http", 80)))
        objs.append(gb.endpoint_slice(f"s{i}-x", f"s{i}", "default", [("http", 8080)], [(f"10.0.{i}.1", True)]))
        objs.append(gb.route("HTTPRoute", f"r{i}", gb.parent("edge", namespace="infra"), hosts=[f"r{i}.example.com"],
                             rules=[{"backendRefs": [{"name": f"s{i}", "port": 80}]}]))
    return objs


def test_a_hostname_change_is_patched_and_a_gatewayclass_change_renders_in_full() -> None:
    objs = _routes(30)
    patcher = patching.Patcher(Renderer())
    first, how = patcher.render(MemoryState(objs))
    assert how == "full:first"
    changed = copy.deepcopy(objs)
    route = next(o for o in changed if o["kind"] == "HTTPRoute")
    route["spec"]["hostnames"] = ["moved.example.com"]
    state = MemoryState(changed)
    got, how = patcher.render(state, previous=first.description)
    assert how == "patched"
    _same(got, Renderer(incremental=False).render(state, previous=first.description))
    assert b"moved.example.com" in got.files["maps/host.map"]
    changed.append({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                    "metadata": {"name": "haproxy"}, "spec": {"controllerName": "x/y"}})
    _, how = patcher.render(MemoryState(changed), previous=first.description)
    assert how == "full:kind"
