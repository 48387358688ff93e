"""BackendTLSPolicy: server TLS options for HTTP, TCP and terminating TLS backends; never passthrough;
no usable CA blocks the backend. Real CA material, real haproxy -c."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.render.conftest import Check, assert_valid, lines, render
from tests.render_l4.conftest import ca_config_map, fixture, key_and_cert
from tests.render_l4.test_tcproutes_render import section
from validators.crossobject import crossobjects
from validators.objects import Obj
from validators.states import MemoryState

SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CM_TLS = ("ssl verify required ca-file certs/ca_default_cm.pem sni str(backend.example.com) "
          "verifyhost backend.example.com")


def objects() -> list[Obj]:
    return [*fixture("backendtls.yaml"), ca_config_map("backend-ca")]


def servers(cfg: list[str], address: str) -> list[str]:
    return [x for x in cfg if x.startswith("server") and address in x]


def test_policies_put_verification_on_http_and_tcp_servers(haproxy_check: Check) -> None:
    if not Path(SYSTEM_BUNDLE).exists():
        pytest.skip(f"{SYSTEM_BUNDLE} is needed for wellKnownCACertificates: System with this haproxy build")
    result = render(objects(), system_ca_file=SYSTEM_BUNDLE)
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    http = section(cfg, "backend gw_h_default_web_secure-cm_443")
    assert [x for x in http if x.startswith("server")] == [f"server s1 10.9.0.1:8443 weight 1 {CM_TLS}"]
    # the TCPRoute backend of the same Service verifies too
    tcp = section(cfg, "backend gtw_tcp_default_db_0")
    assert [x for x in tcp if x.startswith("server")] == [f"server s1 10.9.0.1:8443 weight 1 {CM_TLS}"]
    # the CA file is written into the scratch set, holding exactly the ConfigMap's certificate
    assert result.files["certs/ca_default_cm.pem"] == key_and_cert("routegate test CA", ca=True)[1]
    assert servers(cfg, "10.9.1.1:8443") == [
        f"server s1 10.9.1.1:8443 weight 1 ssl verify required ca-file {SYSTEM_BUNDLE} sni str(sys.example.com) "
        "verifyhost sys.example.com"]


def test_system_ca_defaults_to_haproxys_system_store() -> None:
    cfg = lines(render(objects()))
    assert any(x.endswith("ca-file @system-ca sni str(sys.example.com) verifyhost sys.example.com")
               for x in servers(cfg, "10.9.1.1:8443"))


def test_passthrough_backends_keep_the_clients_tls() -> None:
    tls = section(lines(render(objects())), "backend gtw_tls_default_pt_0")
    assert [x for x in tls if x.startswith("server")] == ["server s1 10.9.0.1:8443 weight 1"]


def test_no_usable_ca_blocks_the_backend_instead_of_plaintext(haproxy_check: Check) -> None:
    result = render(objects(), system_ca_file=SYSTEM_BUNDLE)
    assert_valid(haproxy_check(result))
    assert servers(lines(result), "10.9.2.1") == []
    assert "backend gw_h_default_web_secure-broken_443" in " ".join(lines(result))
    assert [(f.code, f.field, f.about) for f in result.findings] == [
        ("RG0515", "spec.rules[2].backendRefs[0]", "HTTPRoute default/web")]
    policy = next(o for o in objects() if o["metadata"]["name"] == "broken")
    assert [(f.code, f.field) for f in crossobjects.findings(policy, MemoryState(objects()))] == [
        ("RG0515", "spec.validation.caCertificateRefs[0]")]


def test_a_policy_whose_name_cannot_name_the_ca_file_blocks_instead_of_crashing(haproxy_check: Check) -> None:
    if not Path(SYSTEM_BUNDLE).exists():
        pytest.skip(f"{SYSTEM_BUNDLE} is needed for wellKnownCACertificates: System with this haproxy build")
    objs = objects()
    next(o for o in objs if o["metadata"]["name"] == "cm")["metadata"]["name"] = "c m"
    result = render(objs, system_ca_file=SYSTEM_BUNDLE)  # raised escaping.Unsafe from the CA file name
    assert_valid(haproxy_check(result))
    assert servers(lines(result), "10.9.0.1:8443") == ["server s1 10.9.0.1:8443 weight 1"]  # passthrough only
    assert ("RG0515", "spec.rules[0].backendRefs[0]") in [(f.code, f.field) for f in result.findings]
    assert not [p for p in result.files if p.startswith("certs/ca_")]


def test_section_name_policy_applies_only_to_that_port() -> None:
    objs = objects()
    sys_policy = next(o for o in objs if o["metadata"]["name"] == "sys")
    sys_policy["spec"]["targetRefs"][0]["sectionName"] = "other-port"
    assert all("ssl" not in x for x in servers(lines(render(objs)), "10.9.1.1:8443"))


def test_terminating_tlsroute_backends_get_the_policy(haproxy_check: Check) -> None:
    from tests.render_l4.conftest import tls_secret

    objs = objects()
    gw = next(o for o in objs if o["kind"] == "Gateway")
    gw["spec"]["listeners"].append({"name": "term", "protocol": "TLS", "port": 7443,
                                    "tls": {"certificateRefs": [{"name": "edge"}]}})
    objs += [tls_secret("edge", "t.example.com"),
             {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
              "metadata": {"name": "term", "namespace": "default"},
              "spec": {"parentRefs": [{"name": "edge", "sectionName": "term"}], "hostnames": ["t.example.com"],
                       "rules": [{"backendRefs": [{"name": "secure-cm"}]}]}}]
    result = render(objs, system_ca_file=SYSTEM_BUNDLE)
    assert_valid(haproxy_check(result))
    be = section(lines(result), "backend gtw_tlst_default_term_0")
    assert [x for x in be if x.startswith("server")] == [f"server s1 10.9.0.1:8443 weight 1 {CM_TLS}"]


def test_grpcroute_backends_get_the_policy(haproxy_check: Check) -> None:
    objs = [*objects(), {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
                         "metadata": {"name": "g", "namespace": "default"},
                         "spec": {"parentRefs": [{"name": "edge", "sectionName": "http"}],
                                  "hostnames": ["grpc.example.com"],
                                  "rules": [{"backendRefs": [{"name": "secure-cm", "port": 443}]}]}}]
    result = render(objs, system_ca_file=SYSTEM_BUNDLE)
    assert_valid(haproxy_check(result))
    be = section(lines(result), "backend gw_g_default_g_secure-cm_443")
    assert [x for x in be if x.startswith("server")] == [f"server s1 10.9.0.1:8443 weight 1 {CM_TLS}"]


def test_a_ca_that_only_looks_like_pem_blocks_its_backend_on_the_field(haproxy_check: Check) -> None:
    """``AAAA`` between PEM markers passed the marker regex and reached ``haproxy -c``, which refused it
    with an alert whose text depended on what else loaded it (the delta and full checks disagreed)."""
    objs = objects()
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "backend-ca")
    cm["data"]["ca.crt"] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    result = render(objs, system_ca_file=SYSTEM_BUNDLE)
    assert_valid(haproxy_check(result))
    assert "certs/ca_default_cm.pem" not in result.files
    assert servers(lines(result), "10.9.0.1:8443") == ["server s1 10.9.0.1:8443 weight 1"]  # passthrough only
    policy = next(o for o in objs if o["kind"] == "BackendTLSPolicy" and o["metadata"]["name"] == "cm")
    found = [(f.code, f.field, f.message) for f in crossobjects.findings(policy, MemoryState(objs))]
    assert [(c, p) for c, p, _ in found] == [("RG0515", "spec.validation.caCertificateRefs[0]")]
    assert "certificate 1 of 1 cannot be loaded" in found[0][2]
