"""RG0129: an HTTPS listener a Gateway/ListenerSet change adds on a passthrough port takes the names it is
more specific for from the passthrough routes (Gateway API: the most specific listener hostname wins; the
render follows it). Denied where those connections enter through another owner's passthrough listener and
are served by another owner's route; a warning where the listener is the changer's own. Proven on a real
HAProxy: the connections the rule names do move, to the HTTP engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from haproxy_check.traffic import diffs, tables
from tests.render.test_traffic_live import (
    RENDERER,
    edge,
    l4_listener,
    l4_route,
    l4_services,
    run_scenario,
    tenant_passthrough,
)
from validators import codes
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.objects import Obj
from validators.states import MemoryState

GW = "gateway.networking.k8s.io/v1"


def https_set(ns: str, hostname: str | None, port: int = 443) -> Obj:
    """A ListenerSet of ``ns`` on infra's Gateway with one HTTPS listener."""
    return {"apiVersion": GW, "kind": "ListenerSet",
            "metadata": {"name": "web", "namespace": ns, "creationTimestamp": "2026-01-03T00:00:00Z"},
            "spec": {"parentRef": {"name": "edge", "namespace": "infra"},
                     "listeners": [l4_listener("web", "HTTPS", port, hostname)]}}


def base(*, tenant_set: bool = False, route_ns: str = "team-a") -> list[Obj]:
    """infra's Gateway with a wildcard passthrough listener on 443; a TLSRoute of ``route_ns`` passing
    ``*.example.com`` through it (or, ``tenant_set``, through team-a's own passthrough ListenerSet)."""
    objs = [*l4_services(), edge([l4_listener("pt", "TLS", 443, "*.example.com", "Passthrough")])]
    if tenant_set:
        objs.append(tenant_passthrough(None))
        objs.append(l4_route("TLSRoute", "shop", "team-a", "2026-01-02T00:00:00Z", "pt-a", ["*.example.com"],
                             "tcp0", listener_set=True))
    else:
        objs.append(l4_route("TLSRoute", "shop", route_ns, "2026-01-02T00:00:00Z", "pt", ["*.example.com"], "tcp0"))
    return objs


def review(objs: list[Obj], change: Change) -> list[tuple[str, str, str, str]]:
    found = Checks(schemas=None).check(change, MemoryState(objs))
    return [(f.code, str(f.severity), f.field, f.message) for f in found if f.code == codes.HTTPS_OVER_PASSTHROUGH]


def with_https(gateway: Obj, hostname: str | None) -> Obj:
    listeners = [*gateway["spec"]["listeners"], l4_listener("web", "HTTPS", 443, hostname)]
    return {**gateway, "spec": {**gateway["spec"], "listeners": listeners}}


def test_a_tenants_listener_set_may_not_take_another_tenants_passthrough_names() -> None:
    found = review(base(), Change(Operation.CREATE, https_set("team-b", "pay.example.com")))
    assert [(c, s, f) for c, s, f, _ in found] == [(codes.HTTPS_OVER_PASSTHROUGH, "deny", "spec.listeners[0].hostname")]
    message = found[0][3]
    for part in ("pay.example.com", "TLSRoute team-a/shop", "namespace 'team-a'", "'pt' of Gateway infra/edge",
                 "namespace 'infra' owns"):
        assert part in message, (part, message)


def test_the_gateway_owner_may_take_names_of_its_own_passthrough_listener_with_a_warning() -> None:
    objs = base()
    gateway = next(o for o in objs if o["kind"] == "Gateway")
    found = review(objs, Change(Operation.UPDATE, with_https(gateway, "pay.example.com"), gateway))
    assert [(c, s, f) for c, s, f, _ in found] == [(codes.HTTPS_OVER_PASSTHROUGH, "warn", "spec.listeners[1].hostname")]
    assert "TLSRoute team-a/shop" in found[0][3]


def test_the_gateway_owner_may_not_take_names_of_a_tenants_passthrough_listener() -> None:
    objs = base(tenant_set=True)
    gateway = next(o for o in objs if o["kind"] == "Gateway")
    found = review(objs, Change(Operation.UPDATE, with_https(gateway, "pay.example.com"), gateway))
    assert [(c, s) for c, s, _, _ in found] == [(codes.HTTPS_OVER_PASSTHROUGH, "deny")]
    assert "ListenerSet team-a/pt" in found[0][3]


def test_an_ssl_passthrough_http_routes_names_are_judged_the_same() -> None:
    """team-a's HTTPRoute passing ``*.example.com`` through (SSLPassthrough) on infra's wildcard HTTPS
    listener: team-b's ListenerSet adding an HTTPS listener for pay.example.com takes that name from it."""
    objs = [*l4_services(), edge([l4_listener("wild", "HTTPS", 443, "*.example.com")]),
            {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "pass", "namespace": "team-a"},
             "spec": {"parentRefs": [{"name": "edge", "namespace": "infra", "sectionName": "wild"}],
                      "hostnames": ["*.example.com"],
                      "rules": [{"filters": [{"type": "ExtensionRef", "extensionRef": {
                          "group": "haproxy-haptic.org", "kind": "SSLPassthrough", "name": "on"}}],
                                 "backendRefs": [{"name": "tcp0", "port": 80}]}]}}]
    found = review(objs, Change(Operation.CREATE, https_set("team-b", "pay.example.com")))
    assert [(c, s) for c, s, _, _ in found] == [(codes.HTTPS_OVER_PASSTHROUGH, "deny")]
    assert "HTTPRoute team-a/pass" in found[0][3]
    moved = diffs.diff(*(tables.table(RENDERER.render(MemoryState(o)).description)
                         for o in (objs, [*objs, https_set("team-b", "pay.example.com")])))
    assert [m.line() for m in moved.moves if m.cls.host == "pay.example.com"] == [
        "TLS :443 pay.example.com -> gtw_tls_team-a_pass_0 (team-a) => HTTPS listeners of Gateway infra/edge (infra)"]


@pytest.mark.parametrize("case", ["own route", "no overlap", "hostname unchanged", "not https"])
def test_no_finding_where_no_other_owners_name_moves(case: str) -> None:
    objs = base(route_ns="team-b" if case == "own route" else "team-a")
    if case == "hostname unchanged":  # an update that keeps its HTTPS listeners takes nothing new
        objs.append(https_set("team-b", "pay.example.com"))
        listener_set = https_set("team-b", "pay.example.com")
        listener_set["metadata"]["labels"] = {"touched": "yes"}
        change = Change(Operation.UPDATE, listener_set, https_set("team-b", "pay.example.com"))
    elif case == "not https":
        listener_set = https_set("team-b", "pay.example.com")
        listener_set["spec"]["listeners"][0].update(protocol="HTTP", port=8080)
        change = Change(Operation.CREATE, listener_set)
    else:
        change = Change(Operation.CREATE, https_set("team-b", "pay.other.test" if case == "no overlap"
                                                    else "pay.example.com"))
    assert review(objs, change) == []


@pytest.mark.usefixtures("namespaced")
@pytest.mark.parametrize("which", [0, 1], ids=["2.8", "3.x"])
def test_the_denied_change_would_move_the_tenants_connections_on_haproxy(haproxy_paths: list[str], which: int,
                                                                       tmp_path: Path) -> None:
    """What RG0129 refuses, applied anyway: HAProxy sends pay.example.com to the HTTP engine (team-b's
    listener), no longer to team-a's backend; the diff names the move and its owner."""
    if which >= len(haproxy_paths):
        pytest.skip("no HAProxy 3.x binary (.haproxy3/haproxy)")
    before = base()
    after = [*before, https_set("team-b", "pay.example.com")]
    moved = diffs.diff(*(tables.table(RENDERER.render(MemoryState(o)).description) for o in (before, after)))
    assert [m.line() for m in moved.moves if m.cls.host == "pay.example.com"] == [
        "TLS :443 pay.example.com -> gtw_tls_team-a_shop_0 (team-a) => HTTPS listeners of Gateway infra/edge (infra)"]
    assert moved.affected("team-b") == ["infra", "team-a"]
    run_scenario(haproxy_paths[which], before, after, tmp_path)


@pytest.fixture
def namespaced() -> Any:
    from tests.render.test_traffic_live import unshare_works

    if not unshare_works():
        pytest.skip("unshare -n is not available")
