"""The routing table of a render and the traffic diff of two (haproxy_check.traffic), on renders alone.
What HAProxy does with the same configurations is proven in tests/render/test_traffic_live.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from haproxy_check.render.rendering import Renderer
from haproxy_check.traffic import destinations, diffs, facts, tables
from haproxy_check.traffic.destinations import Request
from tests.render.conftest import fixture
from validators.changes import Change, Operation
from validators.objects import Obj, Ref
from validators.states import MemoryState
from validators.views import closures

RENDERER = Renderer(incremental=False)


def gateway(name: str, ns: str, created: str, port: int = 80) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "spec": {"gatewayClassName": "c", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": port, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}


def service(name: str, ns: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": "http", "port": 80}]}}


def route(name: str, ns: str, hosts: list[str], path: str, svc: str, *, parent: tuple[str, str] = ("edge", "infra"),
          created: str = "2026-01-02T00:00:00Z", **match: Any) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "spec": {"parentRefs": [{"name": parent[0], "namespace": parent[1]}], "hostnames": hosts,
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}, **match}],
                                "backendRefs": [{"name": svc, "port": 80}]}]}}


BASE = [gateway("edge", "infra", "2026-01-01T00:00:00Z"), service("shop", "team-a"), service("pay", "team-b"),
        route("shop", "team-a", ["*.shop.example"], "/", "shop", created="2026-01-01T00:00:01Z")]


def table_of(objs: list[Obj]) -> tables.RoutingTable:
    return tables.table(RENDERER.render(MemoryState(objs)).description)


def test_rows_name_route_rule_backend_and_owners_in_match_order() -> None:
    table = table_of(fixture("live.yaml"))
    rows = [(r.cls.host, r.cls.path, r.cls.matchers, r.destination.text()) for r in table.rows()
            if r.cls.host == "app.example.com"]
    order = [(path, matchers) for _, path, matchers, _ in rows]
    # exact paths first, then the regex, then longer prefixes before shorter; a header or method match
    # before the path-only match of the same prefix
    assert order.index(("/api/exact", ())) < order.index(("~/re[0-9]+", ())) < order.index(("/api/v2/*", ()))
    assert order.index(("/api/*", ("method POST",))) < order.index(("/api/*", ()))
    assert order.index(("/hdr/*", ("header x-env=canary",))) < order.index(("/hdr/*", ()))
    served = {(path, matchers): dest for _, path, matchers, dest in rows}
    assert served[("/api/*", ("method POST",))] == "gw_h_ns_r_b_80 (ns)"
    assert served[("/api/*", ())] == "gw_h_ns_r_a_80 (ns)"
    assert served[("/split/*", ())] == "gw_h_ns_r_a_80 90%, gw_h_ns_r_b_80 10% (ns)"
    assert served[("/old/*", ())] == "redirect 301 by HTTPRoute ns/r rule 5 (ns)"
    [row] = [r for r in table.rows() if r.cls.host == "app.example.com" and r.cls.path == "/api/*" and r.cls.matchers]
    assert row.destination.rule == "HTTPRoute ns/r rule 2" and row.destination.owners == {"ns"}
    assert row.gateway == "ns/edge" and row.listener == "Gateway ns/edge listener http"


def test_resolve_answers_a_request_like_the_frontend() -> None:
    table = table_of(fixture("live.yaml"))
    port = table.ports()[0]
    assert table.resolve(Request(port, "APP.example.com:123", "/api/v2/x")).rule == "HTTPRoute ns/r rule 1"
    assert table.resolve(Request(port, "deep.sub.wild.com", "/re12/more")).rule == "HTTPRoute ns/r rule 4"
    assert table.resolve(Request(port, "app.example.com", "/hdr", headers=(("X-Env", "prod, canary"),))
                         ).rule == "HTTPRoute ns/r rule 10"  # req.hdr() splits at commas
    assert table.resolve(Request(port, "other.example.com", "/api")).outcome == destinations.NOT_FOUND
    assert table.resolve(Request(port + 1, "app.example.com", "/api")).outcome == destinations.NO_LISTENER


def test_an_exact_host_takes_the_wildcard_routes_requests_and_names_their_owner() -> None:
    pay = route("pay", "team-b", ["pay.shop.example"], "/api", "pay")
    moved = diffs.diff(table_of(BASE), table_of([*BASE, pay]))
    assert [(m.kind, m.line()) for m in moved.moves] == [
        ("lost", "HTTP :80 pay.shop.example /* -> gw_h_team-a_shop_shop_80 (team-a) => no route"),
        ("moved", "HTTP :80 pay.shop.example /api (prefix) -> gw_h_team-a_shop_shop_80 (team-a) => "
                  "gw_h_team-b_pay_pay_80 (team-b)"),
        ("moved", "HTTP :80 pay.shop.example /api/* -> gw_h_team-a_shop_shop_80 (team-a) => "
                  "gw_h_team-b_pay_pay_80 (team-b)")]
    assert moved.affected("team-b") == ["team-a"]
    assert moved.complete and moved.compared >= 3


def test_claiming_requests_nobody_served_affects_nobody() -> None:
    own = route("pay", "team-b", ["pay.example"], "/", "pay")
    moved = diffs.diff(table_of(BASE), table_of([*BASE, own]))
    assert [m.kind for m in moved.moves] == ["gained"]
    assert moved.affected("team-b") == []


def test_an_older_gateway_on_the_port_takes_the_port_and_its_requests() -> None:
    """The pod-port class of issue 29 as the diff sees it: a Gateway created with an older timestamp on
    the shared port binds :80, and every request the existing Gateway's routes served there moves."""
    before = [*BASE, route("other", "team-b", ["x.example"], "/", "pay", parent=("own", "team-b"))]
    newcomer = gateway("own", "team-b", "2025-01-01T00:00:00Z")
    moved = diffs.diff(table_of(before), table_of([*before, newcomer]))
    lost = [m for m in moved.moves if m.cls.entry == "HTTP :80" and m.kind == "lost"]
    assert [m.cls.text() for m in lost] == ["*.shop.example /*"]
    assert lost[0].gateways == ("infra/edge", "team-b/own")
    assert "team-a" in moved.affected("team-b")


def test_an_unchanged_host_is_not_probed() -> None:
    """O(change): only the host patterns whose answers can differ are compared."""
    many = [route(f"r{k}", "team-a", [f"h{k}.example"], "/", "shop") for k in range(50)]
    before = table_of([*BASE, *many])
    after = table_of([*BASE, *many, route("pay", "team-b", ["pay.example"], "/", "pay")])
    moved = diffs.diff(before, after)
    assert moved.compared <= 2


def test_the_diff_stops_at_its_deadline() -> None:
    ticks = itertools.count()
    many = [route(f"r{k}", "team-a", [f"h{k}.example"], "/", "shop") for k in range(80)]
    with pytest.raises(diffs.OverBudget):
        diffs.diff(table_of(BASE), table_of([*BASE, *many]), deadline=2.0, clock=lambda: float(next(ticks)))


def test_shared_entry_points_are_told_apart() -> None:
    routing = RENDERER.render(MemoryState([*BASE, route("pay", "team-b", ["pay.example"], "/", "pay")])
                              ).description.routing
    assert facts.shared_with_others(routing, "HTTPRoute", "team-b", "pay")  # infra's Gateway, team-a's route
    alone = [gateway("own", "team-b", "2026-01-01T00:00:00Z", port=8080), service("pay", "team-b"),
             route("pay", "team-b", ["pay.example"], "/", "pay", parent=("own", "team-b"))]
    routing = RENDERER.render(MemoryState(alone)).description.routing
    assert not facts.shared_with_others(routing, "HTTPRoute", "team-b", "pay")


def test_shared_tls_entry_points_are_told_apart() -> None:
    """A TLSRoute on another owner's passthrough port is on a shared entry point (a diff past its budget:
    could not decide); the Gateway owner's own route on its own port is not."""
    from tests.render.test_traffic_live import edge, l4_listener, l4_route, l4_services

    gw = edge([l4_listener("pt", "TLS", 443, None, "Passthrough")])
    tenant = l4_route("TLSRoute", "shop", "team-a", "2026-01-02T00:00:00Z", "pt", ["a.example.com"], "tcp0")
    routing = RENDERER.render(MemoryState([*l4_services(), gw, tenant])).description.routing
    assert facts.shared_with_others(routing, "TLSRoute", "team-a", "shop")
    assert facts.shared_with_others(routing, "Gateway", "infra", "edge")
    own = l4_route("TLSRoute", "shop", "infra", "2026-01-02T00:00:00Z", "pt", ["a.example.com"], "tcp0")
    routing = RENDERER.render(MemoryState([*l4_services(), gw, own])).description.routing
    assert not facts.shared_with_others(routing, "TLSRoute", "infra", "shop")


def test_the_closure_of_an_exact_host_holds_the_wildcard_route_it_shadows() -> None:
    pay = route("pay", "team-b", ["pay.shop.example"], "/api", "pay")
    members = closures.closure(MemoryState(BASE), Change(Operation.CREATE, pay))
    assert members.get("HTTPRoute", "team-a", "shop") is not None
    assert Ref("HTTPRoute", "team-a", "shop") in {Ref("HTTPRoute", r["metadata"]["namespace"], r["metadata"]["name"])
                                                   for r in members.list("HTTPRoute")}


def test_a_batch_diff_goes_to_the_changes_it_names() -> None:
    """``check -f DIR``: one diff of the inputs applied together, split by input; a tenant's ListenerSet
    is named by the moves on the port its listener opens."""
    from webhook.gate import trafficdiffs

    listener_set = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
                    "metadata": {"name": "ls", "namespace": "team-b", "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"parentRef": {"name": "edge", "namespace": "infra"}, "listeners": [
                        {"name": "extra", "protocol": "HTTP", "port": 8080,
                         "allowedRoutes": {"namespaces": {"from": "All"}}}]}}
    base = [{**BASE[0], "spec": {**BASE[0]["spec"], "allowedListeners": {"namespaces": {"from": "All"}}}}, *BASE[1:]]
    pay = route("pay", "team-b", ["pay.shop.example"], "/api", "pay")
    on_set = route("side", "team-b", ["side.example"], "/", "pay")
    on_set["spec"]["parentRefs"] = [{"kind": "ListenerSet", "name": "ls", "namespace": "team-b"}]
    moved = diffs.diff(table_of(base), table_of([*base, pay, listener_set, on_set]))
    refs = [Ref("HTTPRoute", "team-b", "pay"), Ref("ListenerSet", "team-b", "ls"), Ref("HTTPRoute", "team-b", "side")]
    split = trafficdiffs.attributed(moved, refs)
    # the shadowed wildcard's lost class names no input: it goes to the input with moves on that host
    assert sorted(m.line() for m in split[refs[0]].moves) == sorted(
        m.line() for m in moved.moves if m.cls.entry == "HTTP :80")
    assert [m.line() for m in split[refs[1]].moves] == [
        "HTTP :8080 side.example /* -> no listener => gw_h_team-b_side_pay_80 (team-b)"]
    assert split[refs[2]].moves == split[refs[1]].moves
