"""HTTPRoute / Gateway rendering (issue 2 scope): maps, precedence, weights, attachment, real haproxy -c."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from haproxy_check.render import isolation
from tests.render.conftest import Check, assert_valid, fixture, lines, map_lines, render
from validators.crossobject import crossobjects
from validators.objects import Obj, Ref
from validators.states import MemoryState

GW = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
      "metadata": {"name": "edge", "namespace": "ns"},
      "spec": {"gatewayClassName": "haptic", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
SVC = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"},
       "spec": {"ports": [{"name": "http", "port": 80}]}}


def route(name: str = "r", *, rules: list[Any] | None = None, created: str = "2026-01-01T00:00:00Z",
          **spec: Any) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"parentRefs": [{"name": "edge"}],
                     "rules": rules or [{"backendRefs": [{"name": "svc", "port": 80}]}],
                     **spec}}


def test_basic_fixture_passes_haproxy_and_fills_the_path_maps(haproxy_check: Check) -> None:
    result = render(fixture("basic.yaml"))
    assert_valid(haproxy_check(result))
    assert map_lines(result, "host.map") == ["api.example.com:80 api.example.com:80"]
    assert map_lines(result, "host-wildcard.map") == [".example.org:80 *.example.org:80"]
    assert "api.example.com:80/api/v1/users 300000|platform_api_0|0|path" in map_lines(result, "path-exact.map")
    # PathPrefix: segment boundary key with "/" and the prefix-exact key without it
    assert "api.example.com:80/api/ 100004|platform_api_1|4|path" in map_lines(result, "path-prefix.map")
    assert "api.example.com:80/api 100004|platform_api_1|4|path" in map_lines(result, "path-prefix-exact.map")
    assert r"^api\.example\.com:80(?=/)(?:/v[0-9]+/.*) 200012|platform_api_1|0|path" in map_lines(
        result, "path-regex.map")


def test_map_lookups_run_exact_then_regex_then_prefix_exact_then_prefix() -> None:
    cfg = lines(render(fixture("basic.yaml")))
    order = [next(i for i, line in enumerate(cfg) if f"maps/{m}" in line and "set-var(txn.gw_c)" in line)
             for m in ("path-exact.map", "path-regex.map", "path-prefix-exact.map", "path-prefix.map")]
    assert order == sorted(order)


def test_advanced_matcher_is_a_guarded_line_with_provenance_comment() -> None:
    cfg = lines(render(fixture("basic.yaml")))
    i = cfg.index("# HTTPRoute platform/api rule 1 match 2 - method GET header x-api-version query q")
    line = cfg[i + 1]
    assert line.startswith("http-request set-var(txn.gw_sel) str(100004|platform_api_1|4|")
    assert "!{ var(txn.gw_cs) -m int gt 100004 }" in line
    for cond in ("{ method GET }", "{ req.hdr(X-API-Version) -m str -- 'v2' }", "{ urlp(q) -m reg -- '^a b$' }"):
        assert cond in line


def test_advanced_lines_follow_precedence_method_then_header_count_then_age() -> None:
    rules = [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}, "headers": [{"name": "x", "value": "1"}]}],
         "backendRefs": [{"name": "svc", "port": 80}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}, "method": "GET"}],
         "backendRefs": [{"name": "svc", "port": 80}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/a"},
                      "headers": [{"name": "x", "value": "1"}, {"name": "y", "value": "2"}]}],
         "backendRefs": [{"name": "svc", "port": 80}]},
        {"matches": [{"path": {"type": "Exact", "value": "/a"}, "queryParams": [{"name": "q", "value": "1"}]}],
         "backendRefs": [{"name": "svc", "port": 80}]},
    ]
    old = route("old", rules=[rules[0]], created="2020-01-01T00:00:00Z")
    cfg = lines(render([GW, SVC, route("r", rules=rules), old]))
    comments = [line for line in cfg if line.startswith("# HTTPRoute ns/") and " match " in line]
    assert comments == [
        "# HTTPRoute ns/r rule 3 match 0 - query q",           # Exact path first
        "# HTTPRoute ns/r rule 1 match 0 - method GET",        # then method
        "# HTTPRoute ns/r rule 2 match 0 - header x header y",  # then more headers
        "# HTTPRoute ns/old rule 0 match 0 - header x",        # then the older route
        "# HTTPRoute ns/r rule 0 match 0 - header x",
    ]


def test_same_path_in_two_routes_keeps_the_older_route_only() -> None:
    a = route("a", created="2026-02-01T00:00:00Z")
    b = route("b", created="2025-02-01T00:00:00Z")
    entries = map_lines(render([GW, SVC, a, b]), "path-prefix.map")
    assert entries == ["*:80/ 100000|ns_b_0|0|path"]


def test_weights_90_10_fill_100_slots_in_order(haproxy_check: Check) -> None:
    result = render(fixture("basic.yaml"))
    slots = map_lines(result, "weighted-multi-backend.map")
    assert len(slots) == 100
    assert slots[:90] == [f"{n}:platform_api_1 gw_h_platform_api_api_80" for n in range(90)]
    assert slots[90:] == [f"{n}:platform_api_1 gw_h_platform_api_api-canary_80" for n in range(90, 100)]
    assert "platform_api_1 @weighted" in map_lines(result, "rule-backend.map")


@pytest.mark.parametrize(("weights", "target"), [
    pytest.param([1, 0], "gw_h_ns_r_svc_80", id="a zero weight keeps the backend but takes no slot"),
    pytest.param([0, 0], "@500", id="all zero weights answer 500"),
])
def test_zero_weights(weights: list[int], target: str, haproxy_check: Check) -> None:
    other = copy.deepcopy(SVC)
    other["metadata"]["name"] = "other"
    refs = [{"name": "svc", "port": 80, "weight": weights[0]}, {"name": "other", "port": 80, "weight": weights[1]}]
    result = render([GW, SVC, other, route(rules=[{"backendRefs": refs}])])
    assert_valid(haproxy_check(result))
    assert map_lines(result, "rule-backend.map") == [f"ns_r_0 {target}"]
    assert "backend gw_h_ns_r_other_80 from" in result.config
    assert map_lines(result, "weighted-multi-backend.map") == []


def test_default_weights_split_50_50() -> None:
    other = copy.deepcopy(SVC)
    other["metadata"]["name"] = "other"
    refs = [{"name": "svc", "port": 80}, {"name": "other", "port": 80}]
    slots = map_lines(render([GW, SVC, other, route(rules=[{"backendRefs": refs}])]), "weighted-multi-backend.map")
    assert sum("gw_h_ns_r_svc_80" in s for s in slots) == 50


def test_backend_without_endpoints_has_no_servers_and_haproxy_accepts_it(haproxy_check: Check) -> None:
    result = render([GW, SVC, route()])
    assert_valid(haproxy_check(result))
    (be,) = result.description.backends
    assert be.name == "gw_h_ns_r_svc_80" and be.servers == ()


def test_route_attached_to_no_gateway_is_checked_behind_a_synthetic_listener(haproxy_check: Check) -> None:
    lone = route("lone")
    lone["spec"]["parentRefs"] = [{"name": "nope"}]
    subject = Ref("HTTPRoute", "ns", "lone")
    result = render([SVC, lone], subject=subject)
    assert_valid(haproxy_check(result))
    assert "frontend gw-http-unattached from base" in result.config
    assert "bind abns@routegate-unattached" in lines(result)
    assert map_lines(result, "path-prefix.map") == ["*:unattached/ 100000|ns_lone_0|0|path"]
    (finding,) = [f for f in result.findings if f.code == "RG0401"]
    assert finding.about == "HTTPRoute ns/lone" and finding.severity == "warn"
    # not the subject: not rendered at all
    assert "gw-http-unattached" not in render([SVC, lone]).config


def test_second_route_reusing_a_header_name_changes_maps_only(haproxy_check: Check) -> None:
    def hdr(name: str, value: str | None) -> Obj:
        filters = [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-API-Version", "value": value}]}}] if value else []
        return route(name, rules=[{"filters": filters, "backendRefs": [{"name": "svc", "port": 80}],
                                   "matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}]}])
    one = render([GW, SVC, hdr("a", "v1"), hdr("b", None)])
    two = render([GW, SVC, hdr("a", "v1"), hdr("b", "v2 100%")])
    assert_valid(haproxy_check(two))
    assert map_lines(one, "gw-reqhdr.map") == ["ns_a_0|set|x-api-version v1"]
    assert map_lines(two, "gw-reqhdr.map") == ["ns_a_0|set|x-api-version v1", "ns_b_0|set|x-api-version v2%20100%25"]
    assert one.files["haproxy.cfg"] == two.files["haproxy.cfg"]
    assert lines(two).count("http-request set-header x-api-version %[var(txn.gw_rule_id),concat(|set|x-api-version),"
                            "map_str(maps/gw-reqhdr.map),url_dec] if { var(txn.gw_rule_id),concat(|set|x-api-version),"
                            "map_str(maps/gw-reqhdr.map) -m found }") == 1


def test_sectionname_and_port_pick_listeners(haproxy_check: Check) -> None:
    result = render(fixture("grpc-https.yaml"))
    assert_valid(haproxy_check(result))
    # grpc/users uses sectionName api (443 only); grpc/cross uses sectionName plain (8081 only)
    assert "api.example.com:443/com.example.UserService/GetUser 300000|grpc_users_0|0|path" in map_lines(
        result, "path-exact.map")
    prefixes = map_lines(result, "path-prefix.map")
    assert "*:8081/ 100000|grpc_cross_0|0|path" in prefixes
    assert not any(p.startswith("*:443") for p in prefixes)
    # parentRef port 443: both HTTPS listeners, hostnames intersected per listener
    assert "shop.apps.example.com:443/ 100000|grpc_apps_0|0|path" in prefixes
    assert "api.example.com:443/ 100000|grpc_apps_0|0|path" in prefixes


def test_cross_namespace_refs_need_a_reference_grant() -> None:
    result = render(fixture("grpc-https.yaml"))
    slots = map_lines(result, "weighted-multi-backend.map")
    cross = [s.split(" ")[1] for s in slots if ":grpc_cross_0 " in s]
    assert cross.count("gw_h_grpc_cross_shop.store-b_80") == 50 and cross.count("@500") == 50
    # Reported once, by the cross-object rules (RG0502), not again by the render.
    assert not [f for f in result.findings if f.about == "HTTPRoute grpc/cross"]
    objs = fixture("grpc-https.yaml")
    route = next(o for o in objs if o["metadata"]["name"] == "cross" and o["kind"].endswith("Route"))
    (warn,) = crossobjects.route_findings(route, MemoryState(objs))
    assert warn.code == "RG0502" and warn.field == "spec.rules[0].backendRefs[1]"
    assert "RefNotPermitted" in warn.message and "answered with 500" in warn.message


def test_a_regex_pcre_rejects_fails_haproxy_and_traces_to_the_field(haproxy_check: Check) -> None:
    objs = fixture("basic.yaml")
    objs[-1]["spec"]["rules"][1]["matches"][1]["path"]["value"] = "/v[z-a]"
    result = render(objs)
    proc = haproxy_check(result)
    assert proc.returncode == 1 and "maps/path-regex.map" in proc.stderr
    origin = result.origin("maps/path-regex.map", 1)
    assert origin is not None and origin.ref == Ref("HTTPRoute", "platform", "api")
    assert origin.path == ("spec", "rules", 1, "matches", 1, "path", "value")


def test_an_unbalanced_regex_is_refused_before_rendering() -> None:
    objs = fixture("basic.yaml")
    objs[-1]["spec"]["rules"][1]["matches"][1]["path"]["value"] = "/v(1"
    result = render(objs, subject=Ref("HTTPRoute", "platform", "api"))
    (deny,) = [f for f in result.findings if f.severity == "deny"]
    assert deny.code == "RG0120" and deny.field == "spec.rules[1].matches[1].path.value"
    assert "platform_api" not in result.files["maps/rule-backend.map"].decode()


def _gateway(**listener: Any) -> Obj:
    gw = copy.deepcopy(GW)
    gw["spec"]["listeners"][0].update(listener)
    return gw


def _other_ns_route(ns: str = "team") -> Obj:
    r = route("t")
    r["metadata"]["namespace"] = ns
    r["spec"]["parentRefs"] = [{"name": "edge", "namespace": "ns"}]
    return r


def _namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(("allowed", "extra", "attached"), [
    pytest.param(None, [], False, id="Same is the default"),
    pytest.param({"namespaces": {"from": "All"}}, [], True, id="All"),
    pytest.param({"namespaces": {"from": "Selector", "selector": {"matchLabels": {"env": "prod"}}}},
                 [_namespace("team", env="prod")], True, id="Selector matching"),
    pytest.param({"namespaces": {"from": "Selector", "selector": {"matchLabels": {"env": "prod"}}}},
                 [_namespace("team", env="dev")], False, id="Selector not matching"),
    pytest.param({"namespaces": {"from": "All"}, "kinds": [{"kind": "GRPCRoute"}]}, [], False,
                 id="kinds without HTTPRoute"),
])
def test_allowed_routes_decide_what_is_rendered(allowed: Any, extra: list[Obj], attached: bool) -> None:
    gw = _gateway(**({"allowedRoutes": allowed} if allowed else {}))
    svc = copy.deepcopy(SVC)
    svc["metadata"]["namespace"] = "team"
    result = render([gw, svc, _other_ns_route(), *extra])
    assert ("*:80/ 100000|team_t_0|0|path" in map_lines(result, "path-prefix.map")) is attached


def test_listener_hostname_intersects_route_hostnames() -> None:
    gw = _gateway(hostname="shop.example.com")
    r = route(hostnames=["*.example.com", "other.org"])
    assert map_lines(render([gw, SVC, r]), "host.map") == ["shop.example.com:80 shop.example.com:80"]
    r = route(hostnames=[])
    assert map_lines(render([gw, SVC, r]), "path-prefix.map") == ["shop.example.com:80/ 100000|ns_r_0|0|path"]


def test_replace_prefix_match_needs_a_path_prefix_match() -> None:
    rules = [{"matches": [{"path": {"type": "RegularExpression", "value": "/a.*"}}], "filters": [
        {"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch",
                                                                 "replacePrefixMatch": "/b"}}}]}]
    result = render([GW, SVC, route(rules=rules)], subject=Ref("HTTPRoute", "ns", "r"))
    (deny,) = [f for f in result.findings if f.severity == "deny"]
    assert deny.field == "spec.rules[0].filters[0].requestRedirect.path.replacePrefixMatch"


def test_listener_set_listeners_get_frontends_and_routes(haproxy_check: Check) -> None:
    gw = _gateway()
    gw["spec"]["allowedListeners"] = {"namespaces": {"from": "All"}}
    ls = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
          "metadata": {"name": "extra", "namespace": "ns"},
          "spec": {"parentRef": {"name": "edge"}, "listeners": [
              {"name": "alt", "protocol": "HTTP", "port": 8088, "hostname": "alt.example.com"}]}}
    r = route(hostnames=["alt.example.com"])
    r["spec"]["parentRefs"] = [{"name": "extra", "kind": "ListenerSet", "sectionName": "alt"}]
    result = render([gw, ls, SVC, r])
    assert_valid(haproxy_check(result))
    assert "frontend gw-http-8088 from base" in result.config
    assert map_lines(result, "path-prefix.map") == ["alt.example.com:8088/ 100000|ns_r_0|0|path"]


def test_each_gateway_on_a_shared_port_gets_its_own_frontend(haproxy_check: Check) -> None:
    other = copy.deepcopy(GW)
    other["metadata"]["name"] = "edge2"
    r2 = route("r2", hostnames=["two.example.com"])
    r2["spec"]["parentRefs"] = [{"name": "edge2"}]
    result = render([GW, other, SVC, route(hostnames=["one.example.com"]), r2])
    assert_valid(haproxy_check(result))
    pod = isolation.pod_port(Ref("Gateway", GW["metadata"]["namespace"], "edge2"), 80, base=20000, span=10000,
                             taken={80})
    assert result.config.count("frontend gw-http-80 ") == 1
    assert f"bind :{pod}" in lines(result)
    # the older Gateway keeps :80; the other's routes match only on its own frontend's token
    assert map_lines(result, "host.map") == ["one.example.com:80 one.example.com:80",
                                             f"two.example.com:{pod} two.example.com:{pod}"]


@pytest.mark.parametrize(("field", "value", "path"), [
    pytest.param("hostnames", ["ok.example.com", "bad host"], "spec.hostnames[1]", id="hostname with a space"),
    pytest.param("rules", [{"matches": [{"path": {"type": "Exact", "value": "/a\nb"}}]}],
                 "spec.rules[0].matches[0].path.value", id="path with a line feed"),
    pytest.param("rules", [{"matches": [{"headers": [{"name": "X\"Y", "value": "v"}]}]}],
                 "spec.rules[0].matches[0].headers[0].name", id="header name with a double quote"),
    pytest.param("rules", [{"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
        "set": [{"name": "X", "value": "a\r\nX-Evil: 1"}]}}]}],
                 "spec.rules[0].filters[0].requestHeaderModifier.set[0].value", id="header value with CRLF"),
])
def test_unsafe_values_are_refused_naming_the_field(field: str, value: Any, path: str) -> None:
    result = render([GW, SVC, route(**{field: value})], subject=Ref("HTTPRoute", "ns", "r"))
    (deny,) = [f for f in result.findings if f.severity == "deny"]
    assert (deny.code, deny.field, deny.subject) == ("RG0120", path, True)
    assert "ns_r_" not in result.files["maps/rule-backend.map"].decode()
