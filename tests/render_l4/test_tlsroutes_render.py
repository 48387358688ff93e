"""TLSRoute rendering: passthrough/terminate SNI routing, wildcards, conflicts, weights; real haproxy -c."""

from __future__ import annotations

import pytest

from tests.render.conftest import Check, assert_valid, lines, map_lines, render
from tests.render_l4.conftest import fixture, tls_secret
from tests.render_l4.test_tcproutes_render import section
from validators.objects import Obj


def tls_objects() -> list[Obj]:
    return [*fixture("tls.yaml"), tls_secret("edge-cert", "*.example.com")]


def test_tls_fixture_passes_haproxy(haproxy_check: Check) -> None:
    assert_valid(haproxy_check(render(tls_objects())))


def test_passthrough_frontend_routes_by_sni_and_rejects_unclaimed_names() -> None:
    result = render(tls_objects())
    fe = section(lines(result), "frontend gateway-tls-port-6443")
    assert fe == [
        "frontend gateway-tls-port-6443 from base", "mode tcp", "bind :6443", "tcp-request inspect-delay 5s",
        "tcp-request content reject unless { req.ssl_hello_type 1 }",
        "tcp-request content set-var(txn.tls_be) req.ssl_sni,lower,map_str(maps/tls-sni-6443.map)",
        "tcp-request content set-var(txn.tls_be) req.ssl_sni,lower,map_end(maps/tls-sni-wild-6443.map) "
        "unless { var(txn.tls_be) -m found }",
        "tcp-request content reject unless { var(txn.tls_be) -m found }",
        "use_backend %[var(txn.tls_be)]"]
    # the older route keeps secure.example.com; the copycat only adds its wildcard; longest suffix first
    assert map_lines(result, "tls-sni-6443.map") == ["secure.example.com gtw_tls_default_secure_0"]
    assert map_lines(result, "tls-sni-wild-6443.map") == [".apps.example.com gtw_tls_default_secure_0",
                                                          ".example.com gtw_tls_default_copycat_0"]
    assert any(f.code == "RG0518" and f.about == "TLSRoute default/copycat" for f in result.findings)


def test_a_server_name_that_is_no_hostname_leaves_the_whole_route_out() -> None:
    objs = tls_objects()
    route = next(o for o in objs if o["kind"] == "TLSRoute" and o["metadata"]["name"] == "secure")
    route["spec"]["hostnames"] = ["secure.example.com", "bad_name.example.com"]
    result = render(objs)  # went into the SNI map through map_key, not the hostname check HTTP routes use
    assert "bad_name" not in "".join(t.decode() for t in result.files.values())
    assert "gtw_tls_default_secure_0" not in " ".join(lines(result))
    assert any(f.code == "RG0519" and f.about == "TLSRoute default/secure" for f in result.findings)


def test_terminate_frontend_decrypts_with_the_listener_certificate_and_intersects_hostnames() -> None:
    result = render(tls_objects())
    fe = section(lines(result), "frontend gateway-tls-port-7443")
    assert "bind :7443 ssl crt certs/default_edge-cert.pem" in fe
    assert any("ssl_fc_sni,lower,map_str(maps/tls-sni-7443.map)" in x for x in fe)
    assert not any("inspect-delay" in x for x in fe)
    # other.org is outside the listener's *.example.com
    assert map_lines(result, "tls-sni-7443.map") == ["api.example.com gtw_tlst_default_terminated_0"]
    assert b"BEGIN CERTIFICATE" in result.files["certs/default_edge-cert.pem"]
    # a terminating backend without BackendTLSPolicy: plain servers, port defaulted to 443
    be = section(lines(result), "backend gtw_tlst_default_terminated_0")
    assert [x for x in be if x.startswith("server")] == ["server s1 10.0.2.1:443 weight 1"]


def test_mixed_mode_port_and_route_without_hostnames_render_nothing() -> None:
    result = render(tls_objects())
    cfg = lines(result)
    assert not any("8443" in x for x in cfg if x.startswith(("frontend", "bind")))
    assert "maps/tls-sni-8443.map" not in result.files
    assert not any("nohosts" in x for x in cfg)


def test_weights_and_the_invalid_refs_share_is_rejected() -> None:
    be = section(lines(render(tls_objects())), "backend gtw_tls_default_secure_0")
    assert be[1:] == ["# TLSRoute default/secure rule 0", "mode tcp", "balance roundrobin",
                      "tcp-request content reject if { rand(4) -m int lt 1 }",
                      "server r0-s1 10.0.1.1:8443 weight 1", "server r0-s2 10.0.1.2:8443 weight 1"]


@pytest.mark.parametrize(("weights", "want"), [
    pytest.param((0, 1), "tcp-request content reject", id="valid refs all weight 0 reject everything"),
    pytest.param((2, 0), None, id="a weight-0 invalid ref takes no share"),
])
def test_reject_share_edge_cases(weights: tuple[int, int], want: str | None) -> None:
    objs = tls_objects()
    route = next(o for o in objs if o["metadata"]["name"] == "secure")
    refs = route["spec"]["rules"][0]["backendRefs"]
    refs[0]["weight"], refs[1]["weight"] = weights
    be = section(lines(render(objs)), "backend gtw_tls_default_secure_0")
    rejects = [x for x in be if x.startswith("tcp-request content reject")]
    assert rejects == ([want] if want else [])


def test_passthrough_on_the_https_port_shares_it_with_the_engine_by_default(haproxy_check: Check) -> None:
    gw = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
          "metadata": {"name": "web", "namespace": "default"},
          "spec": {"gatewayClassName": "haptic", "listeners": [
              {"name": "https", "protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"name": "edge-cert"}]}},
              {"name": "pt", "protocol": "TLS", "port": 443, "tls": {"mode": "Passthrough"}}]}}
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
             "metadata": {"name": "pt", "namespace": "default"},
             "spec": {"parentRefs": [{"name": "web", "sectionName": "pt"}], "hostnames": ["db.example.com"],
                      "rules": [{"backendRefs": [{"name": "app", "port": 8443}]}]}}
    objs = [*tls_objects(), gw, route]
    plain = render(objs, share_https_with_passthrough=False)
    assert not any(x.startswith("frontend gateway-tls-port-443") for x in lines(plain))
    assert any(f.code == "RG0517" and f.about == "Gateway default/web" for f in plain.findings)
    shared = render(objs)
    assert_valid(haproxy_check(shared))
    cfg = lines(shared)
    assert section(cfg, "frontend gateway-tls-port-443")[-2:] == [
        "use_backend %[var(txn.tls_be)] if { var(txn.tls_be) -m found }", "default_backend routegate_https_443"]
    assert "server hop abns@routegate-https-443 send-proxy-v2" in cfg
    assert not any(f.code == "RG0517" for f in shared.findings)
    assert any(x.startswith("bind abns@routegate-https-443 accept-proxy ssl") for x in cfg)
    assert map_lines(shared, "tls-sni-443.map") == ["db.example.com gtw_tls_default_pt_0"]


def test_terminating_port_without_certificate_uses_a_placeholder_and_says_so(haproxy_check: Check) -> None:
    result = render(fixture("tls.yaml"))  # no edge-cert Secret
    assert_valid(haproxy_check(result))
    assert "bind :7443 ssl crt certs/routegate-placeholder.pem" in lines(result)
    assert [(f.code, f.field, f.about) for f in result.findings if f.code == "RG0521"] == [
        ("RG0521", "spec.listeners[1].tls.certificateRefs", "Gateway default/tls-edge")]
