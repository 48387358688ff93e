"""ListenerSet delegation and cross-namespace references (ReferenceGrant) in the rendered config."""

from __future__ import annotations

from tests.attachments.gwbuilders import grant
from tests.render.conftest import Check, assert_valid, lines, render
from tests.render_l4.conftest import fixture
from tests.render_l4.test_tcproutes_render import section
from validators.crossobject import crossobjects
from validators.states import MemoryState


def test_listener_set_allowed_renders_and_refused_does_not(haproxy_check: Check) -> None:
    objs = fixture("listenersets.yaml")
    result = render(objs)
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert section(cfg, "frontend gateway-tcp-port-9000")[-1] == "default_backend gtw_tcp_team_via-allowed_0"
    assert not any("9001" in x or "via-refused" in x for x in cfg)
    refused = next(o for o in objs if o["metadata"]["name"] == "refused")
    assert [(f.code, f.field, f.about) for f in crossobjects.findings(refused, MemoryState(objs))] == [
        ("RG0514", "spec.parentRef", ""), ("RG0504", "spec.parentRefs[0]", "TCPRoute team/via-refused")]
    via = next(o for o in objs if o["metadata"]["name"] == "via-refused")
    assert [(f.code, f.field) for f in crossobjects.findings(via, MemoryState(objs))] == [
        ("RG0504", "spec.parentRefs[0]")]


def test_listener_set_admitted_once_the_gateway_allows_all(haproxy_check: Check) -> None:
    objs = fixture("listenersets.yaml")
    next(o for o in objs if o["kind"] == "Gateway")["spec"]["allowedListeners"]["namespaces"]["from"] = "All"
    result = render(objs)
    assert_valid(haproxy_check(result))
    # both ListenerSets now attach; the route via "refused" names it without namespace -> team/refused
    assert section(lines(result), "frontend gateway-tcp-port-9001")[-1] == "default_backend gtw_tcp_team_via-refused_0"


def test_cross_namespace_refs_without_grant_get_no_servers(haproxy_check: Check) -> None:
    objs = fixture("crossns.yaml")
    result = render(objs)
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    tcp = section(cfg, "backend gtw_tcp_app_t_0")
    assert "tcp-request content reject" in tcp and not any(x.startswith("server") for x in tcp)
    assert "server s1 10.8.0.1:80 weight 1" not in " ".join(cfg)
    route = next(o for o in objs if o["kind"] == "TCPRoute")
    assert [(f.code, f.field) for f in crossobjects.findings(route, MemoryState(objs))] == [
        ("RG0502", "spec.rules[0].backendRefs[0]")]


def test_cross_namespace_refs_with_grants_are_served(haproxy_check: Check) -> None:
    objs = [*fixture("crossns.yaml"), grant("data", "TCPRoute", "app", "Service", "store"),
            grant("data", "HTTPRoute", "app")]
    result = render(objs)
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert [x for x in section(cfg, "backend gtw_tcp_app_t_0") if x.startswith(("server", "tcp-request"))] == [
        "server s1 10.7.0.1:7000 weight 1"]
    assert any(x.startswith("server") and "10.8.0.1:80" in x for x in cfg), "HTTPRoute backend served"


def test_grant_for_the_wrong_kind_does_not_count() -> None:
    objs = [*fixture("crossns.yaml"), grant("data", "HTTPRoute", "app")]
    tcp = section(lines(render(objs)), "backend gtw_tcp_app_t_0")
    assert not any(x.startswith("server") for x in tcp)
