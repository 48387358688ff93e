"""The incremental render is byte for byte the from-scratch render.

A differential property test: random states drawn from every render fixture (all HTTP, TLS, TCP and
Route CRD kinds, Gateways, ListenerSets, Services, EndpointSlices, ReferenceGrants, BackendTLSPolicies)
plus generated Secrets and a CA ConfigMap, then random sequences of creates, updates (fixture variants
and random field mutations, some keeping the old resourceVersion as an UPDATE review does) and
deletes. One incremental Renderer follows the whole sequence; after each step its result (files,
description, origins, findings, statuses, or the RenderError) must equal a fresh from-scratch render.
States alternate between fresh snapshots and Overlays of one change, the two ways the Gate sees them.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from haproxy_check.descriptions import Description
from haproxy_check.render import increments
from haproxy_check.render.rendering import Renderer, RenderError
from haproxy_check.results import RenderResult
from tests.attachments import gwbuilders as gb
from tests.render_l4.conftest import ca_config_map, tls_secret
from validators.changes import Change, Operation
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState, Overlay, State

DATA = Path(__file__).resolve().parents[1] / "data"
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Route")


def _fixtures() -> list[Obj]:
    objs: list[Obj] = []
    for path in sorted([*DATA.glob("render/*.yaml"), *DATA.glob("render_l4/*.yaml")]):
        objs.extend(o for o in yaml.safe_load_all(path.read_text()) if o)
    return objs


def _extras() -> list[Obj]:
    """Kinds the fixtures lack: certificates the HTTPS/TLS listeners name, a CA, grants, namespaces."""
    out: list[Obj] = []
    for ns in ("default", "ns", "infra", "apps"):
        for name in ("api-cert", "edge-cert", "missing-cert"):
            out.append(tls_secret(name, f"{name}.example.com", ns))
        out.append(ca_config_map("backend-ca", ns))
        out.append(gb.namespace(ns, team=ns))
    out.append(gb.grant("ns", "HTTPRoute", "default"))
    out.append(gb.grant("default", "TCPRoute", "ns"))
    out.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "broken", "namespace": "default"},
                "type": "kubernetes.io/tls", "data": {"tls.crt": "bm90IGEgY2VydA==", "tls.key": ""}})
    return out


POOL = _fixtures() + _extras()
VARIANTS: dict[Ref, list[Obj]] = {}
for _obj in POOL:
    VARIANTS.setdefault(ref_of(_obj), []).append(_obj)
REFS = sorted(VARIANTS)


def _leaves(value: Any, out: list[Any]) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, out)
    elif (isinstance(value, str) and len(value) < 80) or isinstance(value, int):
        out.append(value)


_SEEN: list[Any] = []
for _obj in POOL:
    _leaves(_obj, _SEEN)
STRINGS = sorted({v for v in _SEEN if isinstance(v, str)} | {"", "a b", "*.example.com", "/x", "^/re(g)?$",
                                                             "10.9.9.9", "fd00::9", "Exact", "RegularExpression"})
INTS = sorted({v for v in _SEEN if isinstance(v, int) and not isinstance(v, bool)} | {0, 1, 80, 443, 8080, 65536})


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            out.extend(_paths(v, (*prefix, k)))
    return out


@st.composite
def mutated(draw: st.DrawFn, obj: Obj) -> Obj:
    """A copy of ``obj`` with one field replaced, removed or duplicated (kind, namespace, name kept)."""
    new = copy.deepcopy(obj)
    paths = [p for p in _paths(new) if p[0] not in ("kind", "apiVersion")
             and p[:2] not in (("metadata", "name"), ("metadata", "namespace"))]
    if not paths:
        return new
    path = draw(st.sampled_from(paths))
    parent: Any = new
    for part in path[:-1]:
        parent = parent[part]
    leaf = path[-1]
    action = draw(st.sampled_from(["str", "int", "drop", "dup"]))
    if action == "str":
        parent[leaf] = draw(st.sampled_from(STRINGS))
    elif action == "int":
        parent[leaf] = draw(st.sampled_from(INTS))
    elif action == "drop":
        if isinstance(parent, list):
            parent.pop(leaf)
        else:
            del parent[leaf]
    elif isinstance(parent, list):
        parent.append(copy.deepcopy(parent[leaf]))
    return new


@st.composite
def step(draw: st.DrawFn, objects: dict[Ref, Obj]) -> tuple[Operation, Obj]:
    ref = draw(st.sampled_from(REFS))
    if ref in objects and draw(st.integers(0, 3)) == 0:
        return Operation.DELETE, objects[ref]
    base = objects.get(ref) or draw(st.sampled_from(VARIANTS[ref]))
    how = draw(st.sampled_from(["variant", "mutate", "mutate", "version"]))
    if how == "variant":
        new = copy.deepcopy(draw(st.sampled_from(VARIANTS[ref])))
    elif how == "mutate":
        new = draw(mutated(base))
    else:  # the same content under a new resourceVersion
        new = copy.deepcopy(base)
        new["metadata"]["resourceVersion"] = str(draw(st.integers(1, 10**6)))
    return (Operation.UPDATE if ref in objects else Operation.CREATE), new


def outcome(renderer: Renderer, state: State, subject: Ref | None,
            previous: Description | None = None) -> RenderResult | str:
    try:
        return renderer.render(state, subject=subject, previous=previous)
    except RenderError as exc:
        return f"RenderError: {exc}"


def assert_same(got: RenderResult | str, want: RenderResult | str) -> None:
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert got.files == want.files  # haproxy.cfg, every map, every certificate
    assert got.description == want.description
    assert got.origins == want.origins
    assert got.findings == want.findings
    assert got.statuses == want.statuses


# no shrink phase: shrinking these sequences takes minutes; the failing draws are printed as they were
@settings(max_examples=12, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), start=st.lists(st.sampled_from(REFS), min_size=10, max_size=60, unique=True))
def test_incremental_equals_from_scratch(data: st.DataObject, start: list[Ref]) -> None:
    objects = {ref: copy.deepcopy(data.draw(st.sampled_from(VARIANTS[ref]))) for ref in start}
    incremental = Renderer()
    state: State = MemoryState(list(objects.values()))
    # the data plane's description (stable server slots): none, or an earlier render's
    previous: Description | None = None
    for _ in range(data.draw(st.integers(1, 8))):
        routes = sorted(r for r in objects if r.kind in ROUTE_KINDS)
        subject = data.draw(st.none() | st.sampled_from(routes)) if routes else None
        got = outcome(incremental, state, subject, previous)
        assert_same(got, outcome(Renderer(incremental=False), state, subject, previous))
        if not isinstance(got, str) and data.draw(st.booleans()):
            previous = got.description
        operation, obj = data.draw(step(objects))
        change = Change(operation, None if operation is Operation.DELETE else obj, objects.get(ref_of(obj)))
        if operation is Operation.DELETE:
            del objects[ref_of(obj)]
        else:
            objects[ref_of(obj)] = obj
        # the Gate's proposed state (a base plus one change) or a fresh snapshot of the result
        state = Overlay(state, change) if data.draw(st.booleans()) else MemoryState(list(objects.values()))
    assert_same(outcome(incremental, state, None, previous),
                outcome(Renderer(incremental=False), state, None, previous))


def _http_state(n: int, *, svc_port: int = 80) -> list[Obj]:
    objs: list[Obj] = [gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra"),
                       gb.gateway("other", gb.listener("http", 8080, frm="All"), ns="infra")]
    for i in range(n):
        objs.append(gb.service(f"s{i}", "default", ("http", svc_port)))
        objs.append(gb.endpoint_slice(f"s{i}-x", f"s{i}", "default", [("http", 8080)],
                                      [(f"10.0.{i}.1", True), (f"10.0.{i}.2", None)]))
        objs.append(gb.route("HTTPRoute", f"r{i}", gb.parent("edge", namespace="infra"), hosts=[f"r{i}.example.com"],
                             rules=[{"backendRefs": [{"name": f"s{i}", "port": svc_port}]}]))
    return objs


def _misses(renderer: Renderer, state: State) -> int:
    assert renderer.cache is not None
    before = renderer.cache.stats["misses"]
    renderer.render(state)
    return renderer.cache.stats["misses"] - before


def _replace(objs: Sequence[Obj], new: Obj) -> list[Obj]:
    return [new if ref_of(o) == ref_of(new) else o for o in objs]


def test_a_change_recompiles_only_the_routes_that_read_it() -> None:
    objs = _http_state(20)
    renderer = Renderer()
    assert _misses(renderer, MemoryState(objs)) == 20
    assert _misses(renderer, MemoryState(copy.deepcopy(objs))) == 0  # equal content, new objects
    route = copy.deepcopy(objs[4])
    route["spec"]["hostnames"] = ["moved.example.com"]
    assert _misses(renderer, Overlay(MemoryState(objs), Change(Operation.UPDATE, route, objs[4]))) == 1
    assert _misses(renderer, MemoryState(objs)) == 1  # r1 as it was
    eps = copy.deepcopy(objs[6])  # s1's EndpointSlice: only r1 reads it
    eps["endpoints"][0]["addresses"] = ["10.9.9.9"]
    objs = _replace(objs, eps)
    assert _misses(renderer, MemoryState(objs)) == 1
    gateway = copy.deepcopy(objs[1])  # the Gateway no route attaches to
    gateway["spec"]["listeners"][0]["port"] = 9090
    objs = _replace(objs, gateway)
    assert _misses(renderer, MemoryState(objs)) == 0
    edge = copy.deepcopy(objs[0])  # every route's parent
    edge["spec"]["listeners"][0]["hostname"] = "*.example.com"
    assert _misses(renderer, MemoryState(_replace(objs, edge))) == 20


def test_an_update_under_the_old_resource_version_is_recompiled() -> None:
    objs = _http_state(3)
    for o in objs:
        o["metadata"]["resourceVersion"] = "7"
    renderer = Renderer()
    renderer.render(MemoryState(objs))
    route = copy.deepcopy(objs[-1])
    route["spec"]["rules"][0]["backendRefs"][0]["name"] = "s0"
    state = Overlay(MemoryState(objs), Change(Operation.UPDATE, route, objs[-1]))
    assert_same(renderer.render(state), Renderer(incremental=False).render(state))
    assert b"gw_h_default_r2_s0_80" in renderer.render(state).files["haproxy.cfg"]


def test_concurrent_renders_of_different_states_share_one_renderer() -> None:
    base = _http_state(30)
    states: list[State] = [MemoryState(base)]
    for i in range(5):
        route = copy.deepcopy(base[3 * i + 2])
        route["spec"]["hostnames"] = [f"v{i}.example.com"]
        states.append(Overlay(states[0], Change(Operation.UPDATE, route, base[3 * i + 2])))
    want = [Renderer(incremental=False).render(s) for s in states]
    renderer = Renderer()
    failures: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for j in range(6):
                n = (k + j) % len(states)
                assert_same(renderer.render(states[n]), want[n])
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def _renamed_waves(renderer: Renderer, waves: int) -> None:
    """Render ``waves`` states whose routes all have new names, each checked against a from-scratch render."""
    for wave in range(waves):
        objs = _http_state(10)
        for o in objs:
            if o["kind"] == "HTTPRoute":
                o["metadata"]["name"] += f"-w{wave}"
        state = MemoryState(objs)
        assert_same(renderer.render(state), Renderer(incremental=False).render(state))


def test_the_cache_forgets_routes_that_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(increments, "SLACK_ROUTES", 0)
    renderer = Renderer()
    assert renderer.cache is not None
    for wave in range(1, 4):
        _renamed_waves(renderer, wave)
        assert len(renderer.cache.generation().routes) == 10  # only the last wave's routes


def test_small_renders_do_not_evict_the_whole_states_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(increments, "SLACK_ROUTES", 0)
    objs = _http_state(20)
    renderer = Renderer()
    assert _misses(renderer, MemoryState(objs)) == 20
    for k in range(3):  # a change's sub-state: two routes with what they read
        sub = [objs[0], *objs[2 + 3 * k: 2 + 3 * k + 6]]
        assert _misses(renderer, MemoryState(sub)) == 0
    assert _misses(renderer, MemoryState(objs)) == 0


def test_a_marker_table_that_outgrew_the_state_is_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(increments, "SLACK_ORIGINS", 0)
    renderer = Renderer()
    assert renderer.cache is not None
    _renamed_waves(renderer, 4)  # each wave's new names are new origins
    assert renderer.cache.stats["generations"] > 1


USER_TEMPLATE = """{% for s in resources("services") %}
# service {{ s.metadata.name | ident }} port {{ dig(s, "spec", "ports", 0, "port") }}
{% endfor %}
{% set svc = get("Service", "default", "s0") %}
{% if svc %}
{{ Backend({"name": "user_s0", "mode": "tcp",
            "servers": [{"name": "s1", "address": "10.1.1.1", "port": dig(svc, "spec", "ports", 0, "port")}]}) }}
{% endif %}
"""


def test_user_templates_see_every_state_change(tmp_path: Path) -> None:
    (tmp_path / "700-user.cfg.j2").write_text(USER_TEMPLATE)
    incremental = Renderer(template_dirs=[tmp_path])
    objs = _http_state(3)
    for port in (80, 81, 82):  # the same routes and Services, each time with a new port on s0
        objs = _replace(objs, gb.service("s0", "default", ("http", port)))
        state = MemoryState(objs)
        got = incremental.render(state)
        assert_same(got, Renderer(template_dirs=[tmp_path], incremental=False).render(state))
        assert f"# service s0 port {port}" in got.config
        assert f"server s1 10.1.1.1:{port} weight 1" in got.config
