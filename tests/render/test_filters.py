"""Issue 3: filters, rule policies, GRPCRoute, HTTPS listeners; every fixture passes the real haproxy -c."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from haproxy_check.results import RenderResult
from tests.render.conftest import DATA, Check, assert_valid, fixture, lines, map_lines, render, tls_secret, write

FILTERS = fixture("filters.yaml")


@pytest.fixture(scope="module")
def filters() -> RenderResult:
    return render(FILTERS, debug_headers=True, dynamic_cookie_key="k3y")


def test_filters_fixture_passes_haproxy(filters: RenderResult, haproxy_check: Check) -> None:
    assert_valid(haproxy_check(filters))


def test_header_modifiers_are_map_entries_read_by_one_line_per_name(filters: RenderResult) -> None:
    assert map_lines(filters, "gw-reqhdr.map") == [
        "shop_web_0|add|x-deployment canary",
        "shop_web_0|remove|authorization 1",
        "shop_web_0|set|x-api-version v2%3B%20100%25%20%7Bx%7D",
        "shop_web_0~gw_h_shop_web_web_80|set|x-api-version v3",
    ]
    assert map_lines(filters, "gw-reshdr.map") == [
        "shop_web_0|remove|server 1",
        "shop_web_0|set|strict-transport-security max-age%3D31536000%3B%20includeSubDomains",
    ]
    cfg = lines(filters)
    rule = [i for i, line in enumerate(cfg) if line.startswith("http-request set-header x-api-version")]
    assert len(rule) == 2  # rule level, then backendRef level (runs after, wins)
    assert "var(txn.gw_rule_id)" in cfg[rule[0]] and "var(txn.gw_bk)" in cfg[rule[1]]
    assert any(line.startswith("http-request del-header authorization if {") for line in cfg)
    assert any(line.startswith("http-response del-header server if {") for line in cfg)


def test_redirects_are_map_entries(filters: RenderResult) -> None:
    assert map_lines(filters, "gw-redirect.map") == [
        "shop_web_1 301|https|-|-|prefix|%2Fnew",
        "shop_web_2 302|https|www.example.com|443|-|",  # default 302; :443 dropped at request time
        "shop_web_3 302|-|-|-|full|%2Fthere%2520100%25",  # user text URL-encoded, never log-format
    ]
    cfg = lines(filters)
    assert "http-request set-var(txn.gw_rd_port) str(-) if { var(txn.gw_rd_port) -m str 443 } " \
           "{ var(txn.gw_rd_scheme) -m str https }" in cfg
    assert "http-request set-var(txn.gw_rd_rest) path,bytes(4) if { var(txn.gw_rd_mode) -m str prefix } " \
           "{ var(txn.gw_plen) -m str 4 }" in cfg
    # one line per status code, with and without a query string, whatever the routes
    assert sum(line.startswith("http-request redirect location ") for line in cfg) == 10


def test_a_new_redirect_route_is_a_map_change_only() -> None:
    objs = fixture("filters.yaml")
    extra = {**objs[-1], "metadata": {"name": "more", "namespace": "shop"}}
    extra["spec"] = {**extra["spec"], "rules": [objs[-1]["spec"]["rules"][2]]}  # the /moved redirect
    before, after = render(objs), render([*objs, extra])
    assert before.files["haproxy.cfg"] == after.files["haproxy.cfg"]
    assert len(map_lines(after, "gw-redirect.map")) == len(map_lines(before, "gw-redirect.map")) + 1


def test_url_rewrite(filters: RenderResult) -> None:
    assert map_lines(filters, "gw-rewrite.map") == ["shop_web_0 internal.example.svc|prefix|%2Fv2"]
    cfg = lines(filters)
    assert "http-request set-path %[var(txn.gw_rw_path)] if { var(txn.gw_rw_mode) -m str prefix }" in cfg


def test_a_mirrored_rule_serves_without_the_mirror(filters: RenderResult) -> None:
    """HAProxy sends no copies without an SPOE agent: the rule with RequestMirror filters serves as it would
    without them (its backend; its other filters: tests/render/test_live_unhonoured.py), and nothing of the
    mirror is rendered."""
    assert "shop_web_10 gw_h_shop_web_web_80" in map_lines(filters, "rule-backend.map")
    assert "gw_mirror" not in filters.files["haproxy.cfg"].decode() and "maps/gw-mirror.map" not in filters.files
    assert "RequestMirror" not in filters.files["haproxy.cfg"].decode()  # not the rule's first applied filter
    assert "shop_web_4 gw_h_shop_web_web_80" in map_lines(filters, "rule-backend.map")  # the CORS rule


def test_a_route_policy_rule_answers_500(filters: RenderResult) -> None:
    """No HAProxyRoutePolicy is rendered, and a custom filter is never skipped: the rule answers 500."""
    assert "shop_web_11 @500" in map_lines(filters, "rule-backend.map")


def test_cors(filters: RenderResult) -> None:
    cfg = lines(filters)
    assert any("{ req.hdr(origin) -m str -- 'https://app.example.com' }" in line for line in cfg)
    (regex_line,) = [line for line in cfg if "req.hdr(origin) -m reg" in line]
    pattern = re.search(r"-m reg -- '([^']+)'", regex_line)
    assert pattern and re.match(pattern.group(1), "https://shop.example.net")
    assert not re.match(pattern.group(1), "https://example.net") and not re.match(pattern.group(1), "https://x.evil.com")
    (preflight,) = [line for line in cfg if line.startswith("http-request return status 204")]
    for part in ("hdr Access-Control-Allow-Methods 'GET, POST'", "hdr Access-Control-Allow-Headers 'X-Custom'",
                 "hdr Access-Control-Max-Age 600", "hdr Access-Control-Allow-Credentials true", "{ method OPTIONS }"):
        assert part in preflight
    assert any(line.startswith("http-response set-header Access-Control-Expose-Headers 'X-Trace'") for line in cfg)


def test_external_auth_wiring_and_500_cases(filters: RenderResult) -> None:
    assert map_lines(filters, "gw-extauth.map") == [
        "shop_web_5 http%3A%2F%2Fauth.shop.svc.cluster.local%3A8080%2Fverify", "shop_web_6 @500"]
    cfg = lines(filters)
    assert "http-request return status 500 if { var(txn.gw_auth) -m str @500 }" in cfg
    assert "http-request del-header x-auth-user if { var(txn.gw_auth) -m found }" in cfg
    # object-local problems (GRPC, unknown ExtensionRef) are the validators' findings; the render does not
    # repeat them, it only applies their effect (the 500, the ignored filter)
    assert not {f.code for f in filters.findings} & {"RG0114", "RG0115"}


@pytest.mark.parametrize(("change", "settings", "reason"), [
    ({"forwardBody": {"maxSize": 10}}, {}, ""),
    ({"http": {"allowedResponseHeaders": []}}, {}, ""),
    ({"http": {"allowedResponseHeaders": ["X_Bad"]}}, {}, ""),
    ({"http": {"allowedResponseHeaders": ["Content-Length"]}}, {}, ""),
    ({"backendRef": {"name": "nothere", "port": 80}}, {}, "does not exist"),
    ({"backendRef": {"name": "auth", "namespace": "other", "port": 80}}, {}, "RefNotPermitted"),
    ({"backendRef": {"name": "auth", "kind": "Bucket", "port": 80}}, {}, "InvalidKind"),
    ({}, {"external_auth": False}, "plugin is disabled"),
    ({}, {"external_auth_plaintext": False}, "allow_plaintext"),
])
def test_external_auth_settings_that_cannot_be_enforced_answer_500(change: dict[str, object],
                                                                   settings: dict[str, bool], reason: str) -> None:
    objs = fixture("filters.yaml")
    spec = objs[-1]["spec"]["rules"][5]["filters"][0]["externalAuth"]
    spec.update(change)
    result = render(objs, **settings)
    assert "shop_web_5 @500" in map_lines(result, "gw-extauth.map")
    auth = [f for f in result.findings if f.code == "RG0114"]
    if reason:  # state- or settings-dependent: only the render can tell
        assert len(auth) == 1 and reason in auth[0].message
    else:  # visible in the object alone: validators.objectrules.filters reports it
        assert auth == []


def test_timeouts(filters: RenderResult) -> None:
    assert map_lines(filters, "gw-timeouts.map") == ["shop_web_0 2000", "shop_web_9 2147483647"]
    profiles = {p.name: p.lines for p in filters.description.profiles}
    http = [ls for ls in profiles.values() if "mode http" in ls]  # the SPOA agent backend is tcp
    assert http and all(any(line.startswith("http-request set-timeout server") for line in ls) for ls in http)


def test_retry_and_session_persistence_get_their_own_backends(filters: RenderResult) -> None:
    backends = {b.name: b for b in filters.description.backends}
    assert {"gw_h_shop_web_web_80", "gw_h_shop_web_web_80_r7", "gw_h_shop_web_web_80_r8"} <= set(backends)
    profiles = {p.name: p.lines for p in filters.description.profiles}
    r7 = profiles[backends["gw_h_shop_web_web_80_r7"].profile]
    assert "retries 2" in r7 and "retry-on conn-failure empty-response response-timeout 502 503" in r7
    assert ("cookie 'SHOPSESSION' insert indirect nocache dynamic maxidle 600s maxlife 3600s "
            "attr \"Max-Age=3600\"") in r7
    assert "dynamic-cookie-key 'k3y'" in r7
    r8 = profiles[backends["gw_h_shop_web_web_80_r8"].profile]
    assert any("req.hdr(X-Shop-Session)" in line for line in r8)
    assert map_lines(filters, "gw-session-header.map") == ["shop_web_8 x-shop-session"]


def test_retry_code_421_is_kept_on_haproxy_3_1() -> None:
    result = render(FILTERS, haproxy_version=(3, 2))
    profiles = {p.name: p.lines for p in result.description.profiles}
    r7 = profiles[next(b.profile for b in result.description.backends if b.name.endswith("_r7"))]
    assert "retry-on conn-failure empty-response response-timeout 421 502 503" in r7


def test_invalid_session_name_is_refused() -> None:
    objs = fixture("filters.yaml")
    objs[-1]["spec"]["rules"][7]["sessionPersistence"]["sessionName"] = "bad name;"
    result = render(objs)
    (deny,) = [f for f in result.findings if f.severity == "deny"]
    assert deny.field == "spec.rules[7].sessionPersistence.sessionName"


@pytest.mark.parametrize("rule,field", [(7, "sessionName"), (8, "header.name")])
def test_a_session_name_ending_in_a_newline_is_a_finding_not_a_crash(rule: int, field: str) -> None:
    objs = fixture("filters.yaml")
    sp = objs[-1]["spec"]["rules"][rule]["sessionPersistence"]
    if field == "sessionName":
        sp["sessionName"] = "SHOPSESSION\n"
    else:
        sp["header"]["name"] = "X-Shop-Session\n"
    result = render(objs)  # raised escaping.Unsafe (a `$`-anchored regex let the newline through)
    (deny,) = [f for f in result.findings if f.severity == "deny"]
    assert deny.field == f"spec.rules[{rule}].sessionPersistence.{field}"


@pytest.mark.parametrize("header", ["X-User\n", 5])
def test_an_auth_response_header_that_is_no_token_answers_500_instead_of_failing_the_render(header: object) -> None:
    objs = fixture("filters.yaml")
    objs[-1]["spec"]["rules"][5]["filters"][0]["externalAuth"]["http"]["allowedResponseHeaders"] = [header]
    result = render(objs)  # "X-User\n": RenderError from the template's header filter; 5: AttributeError
    assert "shop_web_5 @500" in map_lines(result, "gw-extauth.map")


def test_a_dollar_in_a_header_session_name_is_never_expanded(haproxy_paths: list[str], tmp_path: Path) -> None:
    objs = fixture("filters.yaml")
    objs[-1]["spec"]["rules"][8]["sessionPersistence"]["header"]["name"] = "X-$Q"
    result = render(objs)
    assert all(f.severity != "deny" for f in result.findings)
    (line,) = [x for x in lines(result) if "add-header Cookie" in x]
    assert '"' not in line  # "$Q" inside double quotes is an environment variable to HAProxy
    write(result, tmp_path)
    for binary in haproxy_paths:  # a data plane whose environment has Q must read the same config
        proc = subprocess.run([binary, "-dr", "-c", "-f", "haproxy.cfg"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=30, check=False,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null",
                                   "Q": ")]%[nosuchfetch"})
        assert proc.returncode == 0 and "ALERT" not in proc.stderr, proc.stderr


def test_debug_headers_only_when_enabled(filters: RenderResult) -> None:
    assert any(line.startswith("http-response set-header X-Gateway-Matched-Route") for line in lines(filters))
    assert "X-Gateway-Matched-Route" not in render(FILTERS).config


@pytest.mark.parametrize("protocol,code", [("HTTPS", "RG0405"), ("TLS", "RG0520")])
def test_a_certificate_secret_whose_name_cannot_be_a_file_gets_the_placeholder(protocol: str, code: str,
                                                                               haproxy_check: Check) -> None:
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "gw", "namespace": "infra"},
               "spec": {"gatewayClassName": "c", "listeners": [
                   {"name": "l", "protocol": protocol, "port": 8443,
                    "tls": {"mode": "Terminate", "certificateRefs": [{"name": "bad name"}]}}]}}
    result = render([gateway, tls_secret("bad name", "infra", "a.example.com")])  # raised escaping.Unsafe
    (warn,) = [f for f in result.findings if f.code == code]
    assert warn.field == "spec.listeners[0].tls.certificateRefs[0]" and "bad name" in warn.message
    assert "crt certs/routegate-placeholder.pem" in result.config
    assert_valid(haproxy_check(result))


def test_https_listeners_certificates_placeholder_and_421(haproxy_check: Check) -> None:
    objs = [*fixture("grpc-https.yaml"), tls_secret("api-cert", "infra", "api.example.com")]
    result = render(objs)
    assert_valid(haproxy_check(result))
    assert result.files["certs/infra_api-cert.pem"].startswith(b"-----BEGIN CERTIFICATE-----")
    assert b"PRIVATE KEY" in result.files["certs/routegate-placeholder.pem"]
    bind = next(line for line in lines(result) if line.startswith("bind :443"))
    assert bind == ("bind :443 ssl crt certs/infra_api-cert.pem crt certs/routegate-placeholder.pem "
                    "alpn h2,http/1.1")
    (warn,) = [f for f in result.findings if f.code == "RG0405"]
    assert warn.field == "spec.listeners[1].tls.certificateRefs[0]" and warn.about == "Gateway infra/secure"
    assert map_lines(result, "https-listener.map") == ["api.example.com:443 infra_secure_api"]
    assert map_lines(result, "https-listener-wildcard.map") == [".apps.example.com:443 infra_secure_wild"]
    assert any(line.startswith("http-request return status 421 if") for line in lines(result))
    assert {f.path for f in result.description.files} == {"certs/infra_api-cert.pem",
                                                          "certs/routegate-placeholder.pem"}


def test_grpc_backends_speak_h2_and_methods_become_paths() -> None:
    result = render(fixture("grpc-https.yaml"))
    (grpc,) = [b for b in result.description.backends if b.name.startswith("gw_g_")]
    assert grpc.name == "gw_g_grpc_users_users_9090"
    profile = next(p for p in result.description.profiles if p.name == grpc.profile)
    assert "default-server proto h2" in profile.lines
    adv = next(line for line in lines(result) if "grpc_users_1|" in line)
    assert r"{ var(txn.gw_path) -m reg -- '^(?:/(?:com\.example\.UserService)/(?:[^/]+)$)' }" in adv
    assert "{ req.hdr(x-tenant) -m str -- 'blue' }" in adv
    assert map_lines(result, "gw-reqhdr.map") == ["grpc_users_1|set|x-api-version grpc"]


def test_all_fixtures_render_together_and_pass_haproxy(haproxy_check: Check) -> None:
    names = sorted(path.name for path in DATA.glob("*.yaml"))
    result = render([o for name in names for o in fixture(name)], debug_headers=True)
    assert_valid(haproxy_check(result))
    assert not [f for f in result.findings if f.severity == "deny"]
    alone = {b.name for name in names for b in render(fixture(name)).description.backends}
    assert {b.name for b in result.description.backends} == alone and len(alone) >= 8


def test_a_filter_type_is_log_format_escaped_in_the_debug_header() -> None:
    objs = fixture("filters.yaml")
    objs[-1]["spec"]["rules"][0]["filters"].insert(0, {"type": "%[req.hdr(cookie)]"})
    line = next(x for x in lines(render(objs, debug_headers=True)) if "X-Gateway-Filters-Applied" in x
                and "shop_web_0 }" in x)
    assert "'%%[req.hdr(cookie)]'" in line
