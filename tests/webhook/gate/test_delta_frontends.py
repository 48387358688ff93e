"""A review's closure renders only the frontends of the Gateways its routes use (DELTA-CHECK.md, rule 4),
yet each of them exactly as the full render does: the address (the port's oldest Gateway binds
``:<port>``, every other one a pod port whose collisions resolve over all Gateways of the state), the
protocol, the passthrough sharing, the certificates. Checked on random clusters of Gateways and
ListenerSets sharing ports (some with TLS passthrough or TCP listeners, some with colliding pod-port
slots): the subject's lines in every rendered file, the lines of the frontends the closure renders,
the subject's findings and status equal the full render's; and the delta verdict equals the full one."""

from __future__ import annotations

import asyncio
import collections
import copy
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.render.rendering import Renderer
from haproxy_check.results import RenderResult
from tests.webhook.deltastates import GW, NAMESPACES, endpoint_slices, route, secrets
from tests.webhook.deltastates import cluster_and_change as delta_cluster_and_change
from tests.webhook.gate.test_delta_check import _gates, _outcome, _state
from validators.changes import Change, Operation
from validators.objects import Obj, Ref, ref_of
from validators.schema.crds import SchemaSet
from validators.states import MemoryState, Overlay
from validators.views import closures
from validators.views.closures import closure
from webhook.gate.gates import Gate

TIMES = ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z")
BASE, SPAN = 20000, 10000  # RenderSettings' default pod port range
PASSTHROUGH = {"type": "ExtensionRef", "extensionRef": {"group": "routegate.io", "kind": "SSLPassthrough",
                                                        "name": "x"}}


def _slot(namespace: str, name: str, port: int) -> int:
    return zlib.crc32(f"{namespace}/{name}:{port}".encode()) % SPAN


def colliding_names(port_a: int, port_b: int) -> tuple[str, str]:
    """Two Gateway names in namespace "a" whose pod-port slots collide (on ``port_a`` and ``port_b``)."""
    seen: dict[int, str] = {}
    for i in range(100000):
        seen.setdefault(_slot("a", f"ga{i}", port_a), f"ga{i}")
        other = f"gb{i}"
        hit = seen.get(_slot("a", other, port_b))
        if hit is not None:
            return hit, other
    raise AssertionError("no collision found")  # pragma: no cover - a birthday search over 10,000 slots


COLLIDE = colliding_names(80, 80)
COLLIDE_ACROSS = colliding_names(70, 80)


def _http(name: str, port: int, protocol: str, host: str | None = None, cert: str = "good") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": port, "protocol": protocol,
                           "allowedRoutes": {"namespaces": {"from": "All"}}}
    if host:
        out["hostname"] = host
    if protocol == "HTTPS":
        out["tls"] = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": cert}]}
    if protocol == "TLS":
        out["tls"] = {"mode": "Passthrough"}
    return out


def _gateway(name: str, ts: str, listeners: list[dict[str, Any]], ns: str = "a") -> Obj:
    return {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": name, "namespace": ns, "creationTimestamp": ts},
            "spec": {"gatewayClassName": "haproxy", "listeners": listeners,
                     "allowedListeners": {"namespaces": {"from": "All"}}}}


@st.composite
def listener(draw: st.DrawFn, index: int) -> dict[str, Any]:
    protocol = draw(st.sampled_from(("HTTP", "HTTP", "HTTPS", "HTTPS", "HTTPS", "TLS", "TCP")))
    port = draw(st.sampled_from((80, 443, 443, 8443) if protocol != "TCP" else (9000, 443, BASE + 1)))
    host = draw(st.sampled_from((None, None, "a.example.com", "*.example.com")))
    return _http(f"l{index}", port, protocol, host if protocol != "TCP" else None,
                 draw(st.sampled_from(("good", "good", "junk", "missing"))))


@st.composite
def gateway(draw: st.DrawFn, name: str) -> Obj:
    return _gateway(name, draw(st.sampled_from(TIMES)), [draw(listener(i)) for i in range(draw(st.integers(1, 3)))],
                    draw(st.sampled_from(NAMESPACES)))


@st.composite
def cluster_and_change(draw: st.DrawFn) -> tuple[list[Obj], Change]:
    """2-4 Gateways mostly on HTTP/HTTPS ports (often two with colliding pod-port slots), maybe a
    ListenerSet; a change of a route, a Gateway (same ports and protocols or not) or a ListenerSet."""
    names = ["gw0", "gw1", "gw2", "gw3"][:draw(st.integers(2, 4))]
    if draw(st.booleans()):
        names[:2] = COLLIDE
    gateways = [draw(gateway(n)) for n in names]
    if draw(st.booleans()):
        for g in gateways[:2]:
            g["metadata"]["namespace"] = "a"
            g["spec"]["listeners"][0].update({"port": 80, "protocol": "HTTP"})
            g["spec"]["listeners"][0].pop("tls", None)
    sets: list[Obj] = []
    if draw(st.booleans()):
        parent = draw(st.sampled_from(gateways))
        sets.append({"apiVersion": GW, "kind": "ListenerSet",
                     "metadata": {"name": "ls0", "namespace": draw(st.sampled_from(NAMESPACES)),
                                  "creationTimestamp": draw(st.sampled_from(TIMES))},
                     "spec": {"parentRef": {"name": parent["metadata"]["name"],
                                            "namespace": parent["metadata"]["namespace"]},
                              "listeners": [draw(listener(7))]}})
    sources = [*gateways, *sets]
    objects: list[Obj] = [*sources, *secrets(), *endpoint_slices()]
    for i in range(draw(st.integers(1, 5))):
        objects.append(draw(route(draw(st.sampled_from(("HTTPRoute", "HTTPRoute", "GRPCRoute", "TLSRoute"))),
                                  f"r{i}", draw(st.sampled_from(NAMESPACES)), sources)))
        if objects[-1]["kind"] == "HTTPRoute" and draw(st.integers(0, 3)) == 0:
            objects[-1]["spec"]["rules"][0].setdefault("filters", []).append(PASSTHROUGH)
    what = draw(st.sampled_from(("create", "update", "delete", "gateway", "gateway", "listenerset")))
    routes = [o for o in objects if o["kind"] in ("HTTPRoute", "GRPCRoute", "TLSRoute")]
    if what == "create" or (not routes and what in ("update", "delete")):
        new = draw(route("HTTPRoute", "new", draw(st.sampled_from(NAMESPACES)), sources))
        return objects, Change(Operation.CREATE, new)
    if what in ("update", "delete"):
        old = draw(st.sampled_from(routes))
        if what == "delete":
            return objects, Change(Operation.DELETE, None, old)
        new = copy.deepcopy(draw(route(old["kind"], old["metadata"]["name"], old["metadata"]["namespace"], sources)))
        new["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        return objects, Change(Operation.UPDATE, new, old)
    targets = sets if what == "listenerset" and sets else gateways
    old = draw(st.sampled_from(targets))
    new = copy.deepcopy(old)
    lst = draw(st.sampled_from(new["spec"]["listeners"]))
    tweak = draw(st.sampled_from(("cert", "host", "port", "protocol")))
    if tweak == "cert" and "tls" in lst and lst["tls"].get("mode") == "Terminate":
        lst["tls"]["certificateRefs"] = [{"kind": "Secret", "name": draw(st.sampled_from(("good", "junk")))}]
    elif tweak == "host":
        lst["hostname"] = draw(st.sampled_from(("b.example.com", "*.example.com")))
    elif tweak == "port":
        lst["port"] = draw(st.sampled_from((80, 443, 8443)))
    else:
        lst.update(_http(lst["name"], lst["port"], draw(st.sampled_from(("HTTP", "HTTPS", "TLS")))))
    return objects, Change(Operation.UPDATE, new, old)


def _lines(render: RenderResult) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for name, data in render.files.items():
        if name.endswith((".cfg", ".map")):
            for number, text in enumerate(data.decode().splitlines(), 1):
                out[(name, number)] = text
    return out


def _owned(render: RenderResult, refs: set[Ref]) -> collections.Counter[tuple[str, str, str]]:
    """Every line an object of ``refs`` produced, with its file and origin (line numbers differ)."""
    lines = _lines(render)
    return collections.Counter((file, lines.get((file, n), ""), f"{o.ref} {o.path}")
                               for (file, n), o in render.origins.items() if o.ref in refs)


def _frontends(render: RenderResult) -> dict[str, list[tuple[str, bool]]]:
    """The lines of each `frontend` section, each with whether a Gateway/ListenerSet produced it (its
    binds, certificates, 421 check) or it is a `bind`."""
    cfg = render.config.splitlines()
    origin = {n: o for (file, n), o in render.origins.items() if file == "haproxy.cfg"}
    out: dict[str, list[tuple[str, bool]]] = {}
    current: list[tuple[str, bool]] | None = None
    for number, text in enumerate(cfg, 1):
        if text and not text[0].isspace():
            current = out.setdefault(text, []) if text.startswith("frontend ") else None
            continue
        o = origin.get(number)
        if current is not None and text.strip():
            own = text.strip().startswith("bind ") or (o is not None and o.ref.kind in ("Gateway", "ListenerSet"))
            current.append((text.strip(), own))
    return out


def assert_renders_agree(renderer: Renderer, state: MemoryState, change: Change) -> None:
    view = closure(state, change)
    delta = renderer.render(Overlay(view, change), subject=change.ref)
    full = renderer.render(Overlay(state, change), subject=change.ref)
    subject = change.ref
    assert _owned(delta, {subject}) == _owned(full, {subject})
    want = _frontends(full)
    for name, lines in _frontends(delta).items():
        assert name in want, f"{name} is not in the full configuration"
        # What the Gateways render in it is the same; the rest is a part of the full frontend (which
        # also holds the routes outside the closure).
        assert [x for x, own in lines if own] == [x for x, own in want[name] if own], name
        assert {x for x, _ in lines} <= {x for x, _ in want[name]}, name
    assert [f for f in delta.findings if f.about == str(subject)] == [f for f in full.findings
                                                                      if f.about == str(subject)]
    assert delta.statuses == full.statuses


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer()


@pytest.mark.parametrize("clusters", [
    pytest.param(cluster_and_change, id="shared ports, pod-port collisions, passthrough, ListenerSets"),
    pytest.param(delta_cluster_and_change, id="the delta check's clusters: every route kind and protocol"),
])
def test_the_subjects_lines_and_its_frontends_are_the_full_renders(renderer: Renderer, clusters: Any) -> None:
    @given(clusters())
    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], Change]) -> None:
        objects, change = case
        assert_renders_agree(renderer, _state(objects), change)

    run()


def _verdicts_agree(delta: Gate, full: Gate) -> Any:
    @given(cluster_and_change())
    @settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], Change]) -> None:
        objects, change = case
        state = _state(objects)
        got = asyncio.run(delta.review(change, state=state, reload_note=False))
        want = asyncio.run(full.review(change, state=state, reload_note=False))
        assert _outcome(got) == _outcome(want), f"{change.operation} {change.ref}: {got.message} / {want.message}"

    return run


def test_delta_verdicts_equal_full_verdicts_on_shared_ports(haproxy_paths: list[str],
                                                            schemas: SchemaSet | None) -> None:
    for path in haproxy_paths:
        _verdicts_agree(*_gates(path, schemas))()


# ---------------------------------------------------------------- the cases one by one


def _route_on(gateway: str, name: str = "new", section: str | None = None, kind: str = "Gateway") -> Obj:
    parent: dict[str, Any] = {"name": gateway, "namespace": "a"}
    if kind != "Gateway":
        parent["kind"] = kind
    if section:
        parent["sectionName"] = section
    return {"apiVersion": GW, "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "a", "creationTimestamp": TIMES[3]},
            "spec": {"parentRefs": [parent], "hostnames": ["app.example.com"],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]}}


def _base(*sources: Obj) -> list[Obj]:
    return [*sources, *secrets(), *endpoint_slices()]


def _frontend_names(render: RenderResult) -> list[str]:
    return sorted(" ".join(x.split()[:2]) for x in render.config.splitlines() if x.startswith("frontend "))


def _review(objects: list[Obj], change: Change, renderer: Renderer) -> tuple[RenderResult, RenderResult]:
    state = MemoryState(objects, version="case")
    assert_renders_agree(renderer, state, change)
    view = closure(state, change)
    return (renderer.render(Overlay(view, change), subject=change.ref),
            renderer.render(Overlay(state, change), subject=change.ref))


def test_a_route_of_a_younger_gateway_renders_only_its_frontends(renderer: Renderer) -> None:
    objects = _base(*(_gateway(f"g{k}", TIMES[k], [_http("http", 80, "HTTP"), _http("https", 443, "HTTPS")])
                      for k in range(3)))
    delta, full = _review(objects, Change(Operation.CREATE, _route_on("g1")), renderer)
    names = _frontend_names(delta)
    assert len(names) == 2 and len(_frontend_names(full)) == 6
    assert not any(n in ("frontend gw-http-80", "frontend gw-https-443") for n in names)  # g0 owns :80 and :443


def test_pod_ports_collide_in_age_order_over_gateways_outside_the_closure(renderer: Renderer) -> None:
    older, younger = COLLIDE
    objects = _base(_gateway("owner", TIMES[0], [_http("http", 80, "HTTP")]),
                    _gateway(older, TIMES[1], [_http("http", 80, "HTTP")]),
                    _gateway(younger, TIMES[2], [_http("http", 80, "HTTP")]))
    delta, full = _review(objects, Change(Operation.CREATE, _route_on(younger)), renderer)
    moved = f"frontend gw-http-{BASE + (_slot('a', younger, 80) + 1) % SPAN}"
    assert _frontend_names(delta) == [moved] and moved in _frontend_names(full)


def test_pod_ports_taken_on_a_lower_port_by_gateways_outside_the_closure(renderer: Renderer) -> None:
    """Port 70's second Gateway takes the slot first (ports in order): the closure of a route on port
    80 holds neither port 70 Gateway, yet its Gateway moves to the next pod port as in the full render
    (this failed when the assignment counted the closure's Gateways only)."""
    first, second = COLLIDE_ACROSS
    objects = _base(_gateway("p70", TIMES[0], [_http("http", 70, "HTTP")]),
                    _gateway(first, TIMES[1], [_http("http", 70, "HTTP")]),
                    _gateway("p80", TIMES[0], [_http("http", 80, "HTTP")]),
                    _gateway(second, TIMES[1], [_http("http", 80, "HTTP")]))
    delta, full = _review(objects, Change(Operation.CREATE, _route_on(second)), renderer)
    moved = f"frontend gw-http-{BASE + (_slot('a', second, 80) + 1) % SPAN}"
    assert _frontend_names(delta) == [moved] and moved in _frontend_names(full)


def test_a_pod_port_ignores_a_port_a_gateway_outside_the_closure_declares(renderer: Renderer) -> None:
    """A listener may not declare a pod port (RG0126): the Gateway keeps its slot in the closure as in the
    full render, and the declaring listener is bound in neither."""
    slot = BASE + _slot("a", "g1", 80)
    objects = _base(_gateway("g0", TIMES[0], [_http("http", 80, "HTTP")]),
                    _gateway("g1", TIMES[1], [_http("http", 80, "HTTP")]),
                    _gateway("tcp", TIMES[0], [{"name": "t", "port": slot, "protocol": "TCP"}]))
    delta, full = _review(objects, Change(Operation.CREATE, _route_on("g1")), renderer)
    assert _frontend_names(delta) == [f"frontend gw-http-{slot}"]
    assert f"frontend gw-http-{slot}" in _frontend_names(full) and f"bind :{slot}" in full.config
    assert full.config.count(f"bind :{slot}") == 1


def test_a_port_shared_with_tls_passthrough_keeps_every_gateway_there(renderer: Renderer) -> None:
    objects = _base(_gateway("g0", TIMES[0], [_http("https", 443, "HTTPS")]),
                    _gateway("g1", TIMES[1], [_http("https", 443, "HTTPS")]),
                    _gateway("pt", TIMES[2], [_http("tls", 443, "TLS", "b.example.com")]),
                    _gateway("other", TIMES[0], [_http("http", 80, "HTTP")]))
    delta, _full = _review(objects, Change(Operation.CREATE, _route_on("g0")), renderer)
    view = closure(MemoryState(objects, version="case"), Change(Operation.CREATE, _route_on("g0")))
    assert {r.name for r in view.members if r.kind == "Gateway"} == {"g0", "g1", "pt"}
    assert "abns@routegate-https-443" in delta.config  # the TLS frontend owns :443, as in the full render
    assert "frontend gateway-tls-port-443" in _frontend_names(delta)


def test_an_ssl_passthrough_route_on_the_port_keeps_every_gateway_there(renderer: Renderer) -> None:
    passthrough = _route_on("g1", "pass")
    passthrough["spec"]["hostnames"] = ["p.example.com"]
    passthrough["spec"]["rules"][0]["filters"] = [PASSTHROUGH]
    objects = [*_base(_gateway("g0", TIMES[0], [_http("https", 443, "HTTPS")]),
                      _gateway("g1", TIMES[1], [_http("https", 443, "HTTPS")])), passthrough]
    change = Change(Operation.CREATE, _route_on("g0"))
    delta, _ = _review(objects, change, renderer)
    view = closure(MemoryState(objects, version="case"), change)
    assert {r.name for r in view.members if r.kind in ("Gateway", "HTTPRoute")} == {"g0", "g1", "new", "pass"}
    assert "abns@routegate-https-443" in delta.config  # the passthrough route's TLS frontend owns :443


def test_a_listener_set_brings_its_gateway_and_the_gateways_other_sets(renderer: Renderer) -> None:
    def listener_set(name: str, port: int) -> Obj:
        return {"apiVersion": GW, "kind": "ListenerSet",
                "metadata": {"name": name, "namespace": "a", "creationTimestamp": TIMES[0]},
                "spec": {"parentRef": {"name": "g1", "namespace": "a"}, "listeners": [_http("x", port, "HTTPS")]}}

    objects = _base(_gateway("g0", TIMES[0], [_http("http", 80, "HTTP"), _http("https", 8443, "HTTPS")]),
                    _gateway("g1", TIMES[1], [_http("http", 80, "HTTP")]),
                    listener_set("ls1", 8443), listener_set("ls2", 8443))
    change = Change(Operation.CREATE, _route_on("ls1", kind="ListenerSet"))
    delta, _full = _review(objects, change, renderer)
    view = closure(MemoryState(objects, version="case"), change)
    assert {r.name for r in view.members if r.kind in ("Gateway", "ListenerSet")} == {"g1", "ls1", "ls2"}
    assert len(_frontend_names(delta)) == 2  # g1 on its pod ports for 80 and 8443 (g0 owns both)


def test_a_gateway_change_on_its_ports_keeps_todays_closure(renderer: Renderer) -> None:
    g0 = _gateway("g0", TIMES[0], [_http("http", 80, "HTTP")])
    g1 = _gateway("g1", TIMES[1], [_http("http", 80, "HTTP")])
    new = copy.deepcopy(g1)
    new["spec"]["listeners"][0].update(_http("http", 80, "HTTPS"))
    # "a0" is the bind of rule 7 (the first Gateway by name other than the changed one, on a port of its own)
    objects = _base(g0, g1, _gateway("a0", TIMES[0], [_http("http", 81, "HTTP")]))
    change = Change(Operation.UPDATE, new, g1)
    _review(objects, change, renderer)
    assert {r.name for r in closure(MemoryState(objects, version="case"), change).members
            if r.kind == "Gateway"} == {"g0", "g1"}
    same = copy.deepcopy(g1)
    same["spec"]["listeners"][0]["hostname"] = "b.example.com"  # what renders on port 80 stays the same
    _review(objects, Change(Operation.UPDATE, same, g1), renderer)
    assert ref_of(g0) not in closure(MemoryState(objects, version="case"), Change(Operation.UPDATE, same, g1)).members



def test_a_route_changes_the_ssl_passthrough_ports_only_by_its_own_entries() -> None:
    """What a review derives from the stored state's SSLPassthrough index equals the proposed state's
    index built from scratch (the clusters hold SSLPassthrough routes; every change kind is drawn)."""
    @given(cluster_and_change(), st.booleans())
    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], Change], passes: bool) -> None:
        objects, change = case
        if passes and change.obj is not None and change.obj["kind"] == "HTTPRoute":  # the change's own entries
            change.obj["spec"]["rules"][0].setdefault("filters", []).append(PASSTHROUGH)
        state = _state(objects)
        proposed = Overlay(state, change)
        fresh = closures._passthrough_ports(MemoryState(
            [o for o in objects if ref_of(o) != change.ref] + ([change.obj] if change.obj is not None
                                                             and change.operation is not Operation.DELETE else []),
            version="fresh"))
        assert dict(closures._proposed_passthrough(state, proposed, change)) == fresh

    run()
