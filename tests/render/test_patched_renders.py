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


@settings(max_examples=12, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data(), start=st.lists(st.sampled_from(REFS), min_size=10, max_size=60, unique=True))
def test_patched_equals_full_render(data: st.DataObject, start: list[Ref], haproxy_check: Any) -> None:
    _sequence(data, start, haproxy_check)


# ------------------------------------------------------------ a gateway-shaped cluster, the edits reconcile sees most

EDITS = ("hostname", "path", "regex", "header", "weights", "backend", "endpoints", "service", "create", "delete",
         "method", "pathtype")


def _edit(draw: Callable[[Any], Any], objects: dict[Ref, Any], n: int) -> None:
    from bench import bench_gate
    what = draw(st.sampled_from(EDITS))
    routes = sorted(r for r in objects if r.kind == "HTTPRoute")
    if what == "create" or not routes:
        i = draw(st.integers(0, n + 5))
        obj = bench_gate.route(i)
        objects[ref_of(obj)] = obj
        return
    ref = draw(st.sampled_from(routes))
    if what == "delete":
        del objects[ref]
        return
    if what in ("endpoints", "service"):
        kind = "EndpointSlice" if what == "endpoints" else "Service"
        refs = sorted(r for r in objects if r.kind == kind)
        obj = copy.deepcopy(objects[draw(st.sampled_from(refs))])
        if kind == "EndpointSlice":
            k = draw(st.integers(0, 3))
            obj["endpoints"] = [{"addresses": [f"10.9.{draw(st.integers(0, 9))}.{x + 1}"],
                                 "conditions": {"ready": draw(st.booleans())}} for x in range(k)]
        else:
            obj["spec"]["ports"][0]["port"] = draw(st.sampled_from([8080, 8081]))
        objects[ref_of(obj)] = obj
        return
    obj = copy.deepcopy(objects[ref])
    rules = obj["spec"]["rules"]
    gw = obj["spec"]["parentRefs"][0]["name"]
    if what == "hostname":
        obj["spec"]["hostnames"] = [f"{draw(st.sampled_from(['a', 'b', 'app-1', 'app-2']))}.{gw}.example.com",
                                    *draw(st.lists(st.sampled_from([f"x.{gw}.example.com", "other.example.org"]),
                                                   max_size=1))]
    elif what == "path":
        rules[0]["matches"][0]["path"]["value"] = draw(st.sampled_from(["/api/1", "/api/2", "/x", "/"]))
    elif what == "regex" and len(rules) > 2 and rules[2]["matches"][0]["path"]["type"] == "RegularExpression":
        rules[2]["matches"][0]["path"]["value"] = draw(st.sampled_from(["/v[0-9]+/a", "/v[0-9]+/b/[a-z]+"]))
    elif what == "header":
        rules[1]["matches"][0]["headers"][0]["value"] = draw(st.sampled_from(["yes", "no", "maybe"]))
    elif what == "pathtype":  # the precedence score moves: advanced lines and regex entries reorder
        rule = rules[draw(st.integers(0, len(rules) - 1))]
        path = rule["matches"][0]["path"]
        path["type"] = draw(st.sampled_from(["Exact", "PathPrefix", "RegularExpression"]))
        path["value"] = draw(st.sampled_from(["/a", "/a/b/c/d", "/v[0-9]+/x"])) if path["type"] == "RegularExpression" \
            else draw(st.sampled_from(["/a", "/a/b/c/d"]))
    elif what == "method":
        rules[1]["matches"][0]["method"] = draw(st.sampled_from(["GET", "POST"]))
    elif what == "weights":
        for backend in rules[0]["backendRefs"]:
            backend["weight"] = draw(st.integers(0, 100))
    elif what == "backend":
        rules[1]["backendRefs"][0]["name"] = draw(st.sampled_from(["svc-0", "svc-1", "svc-3", "gone"]))
    objects[ref] = obj


@settings(max_examples=6, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_patched_equals_full_render_on_gateway_shaped_clusters(data: st.DataObject, haproxy_check: Any) -> None:
    from bench import bench_gate
    n = data.draw(st.integers(6, 24))
    objects: dict[Ref, Any] = {ref_of(o): o for o in bench_gate.objects(n)}
    patcher = patching.Patcher(Renderer())
    previous: Description | None = None
    for _ in range(data.draw(st.integers(3, 10))):
        state = MemoryState(list(objects.values()))
        want = Renderer(incremental=False).render(state, previous=previous)
        got, how = patcher.render(state, previous=previous)
        HOW["gateway-shaped " + how] += 1
        _same(got, want)
        if haproxy_check is not None and how == "patched" and data.draw(st.integers(0, 4)) == 0:
            proc = haproxy_check(got)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        if data.draw(st.booleans()):
            previous = got.description
        for _ in range(data.draw(st.integers(1, 2))):
            _edit(data.draw, objects, n)


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


# after the properties above (file order): their counts
def test_the_differential_patched_most_route_and_endpoint_changes() -> None:
    """The property above compared patched renders, not only full ones (its counts, after it ran)."""
    if not HOW:
        test_patched_equals_full_render(haproxy_check=None)  # run alone: draw the sequences here
    assert HOW["patched"] >= 12, HOW


def test_the_gateway_shaped_differential_patched_most_steps() -> None:
    if not HOW["gateway-shaped patched"]:
        test_patched_equals_full_render_on_gateway_shaped_clusters(haproxy_check=None)  # run alone
    assert HOW["gateway-shaped patched"] >= 10, HOW
