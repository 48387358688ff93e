"""Frontend mTLS (Gateway spec.tls.frontend): ca-file + verify on the HTTPS bind, perPort overriding
default, unusable trust refusing all traffic with a finding on the field; real haproxy -c and real
clients with and without a valid client certificate."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import free_port
from tests.render.conftest import Check, assert_valid, lines, render
from tests.render.test_live import echo_server
from tests.render_l4.conftest import ca_config_map, key_and_cert, tls_secret
from tests.render_l4.livegw import GW, running, service, tls_get
from validators.objects import Obj

CA_NAME = "routegate test CA"


def gateway(port: int, tls: dict[str, Any] | None, ns: str = "default") -> Obj:
    spec: dict[str, Any] = {"gatewayClassName": "haptic", "listeners": [
        {"name": "https", "protocol": "HTTPS", "port": port, "tls": {"certificateRefs": [{"name": "www"}]}}]}
    if tls is not None:
        spec["tls"] = tls
    return {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": ns}, "spec": spec}


def validation(*refs: dict[str, str], mode: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"caCertificateRefs": list(refs)}
    if mode:
        out["mode"] = mode
    return out


def cm(name: str, ns: str | None = None) -> dict[str, str]:
    return {"group": "", "kind": "ConfigMap", "name": name, **({"namespace": ns} if ns else {})}


def base(port: int, tls: dict[str, Any] | None, web_port: int = 8080) -> list[Obj]:
    return [gateway(port, tls), tls_secret("www", "www.example.com"), ca_config_map("client-ca"),
            *service("web", web_port),
            {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "www", "namespace": "default"},
             "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["www.example.com"],
                      "rules": [{"backendRefs": [{"name": "web", "port": web_port}]}]}}]


def bind_of(result: Any) -> str:
    return next(x for x in lines(result) if x.startswith("bind "))


def test_default_validation_renders_ca_file_and_verify_required(haproxy_check: Check) -> None:
    result = render(base(443, {"frontend": {"default": {"validation": validation(cm("client-ca"))}}}))
    assert_valid(haproxy_check(result))
    assert bind_of(result).endswith("verify required ca-file certs/client-ca_default_edge_443.pem")
    assert b"BEGIN CERTIFICATE" in result.files["certs/client-ca_default_edge_443.pem"]
    # an alert on the bind line traces to the validation block
    at = 1 + [x.strip() for x in result.config.splitlines()].index(bind_of(result))
    origin = result.origin("haproxy.cfg", at)
    assert origin is not None and str(origin.ref) == "Gateway default/edge"
    assert origin.path == ("spec", "tls", "frontend", "default", "validation")
    assert not [f for f in result.findings if f.code == "RG0410"]


def test_per_port_overrides_default_and_fallback_mode(haproxy_check: Check) -> None:
    tls = {"frontend": {"default": {"validation": validation(cm("missing"))},
                        "perPort": [{"port": 443, "tls": {"validation": validation(
                            cm("client-ca"), mode="AllowInsecureFallback")}}]}}
    result = render(base(443, tls))
    assert_valid(haproxy_check(result))
    assert bind_of(result).endswith("verify optional ca-file certs/client-ca_default_edge_443.pem "
                                    "ca-ignore-err all crt-ignore-err all")
    assert not [f for f in result.findings if f.code == "RG0410"]  # the default's missing CA is not used here


@pytest.mark.parametrize(("refs", "extra", "why"), [
    pytest.param([cm("missing")], [], "ConfigMap default/missing does not exist", id="missing ConfigMap"),
    pytest.param([cm("client-ca", "certs")], [ca_config_map("client-ca", "certs")],
                 "no ReferenceGrant", id="cross-namespace without a grant"),
    pytest.param([{"group": "", "kind": "Service", "name": "web"}], [], "is not a ConfigMap or Secret",
                 id="wrong kind"),
])
def test_unusable_trust_accepts_no_traffic(haproxy_check: Check, refs: list[dict[str, str]], extra: list[Obj],
                                           why: str) -> None:
    result = render([*base(443, {"frontend": {"default": {"validation": validation(*refs)}}}), *extra])
    assert_valid(haproxy_check(result))
    assert "verify" not in bind_of(result)
    assert "tcp-request connection reject" in lines(result)
    (finding,) = [f for f in result.findings if f.code == "RG0410"]
    assert finding.field == "spec.tls.frontend.default.validation.caCertificateRefs[0]"
    assert finding.about == "Gateway default/edge" and why in finding.message
    assert "port 443 accepts no traffic" in finding.message


def test_cross_namespace_ca_with_a_grant_and_one_bad_ref_among_good() -> None:
    grant = {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
             "metadata": {"name": "ca", "namespace": "certs"},
             "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "default"}],
                      "to": [{"group": "", "kind": "ConfigMap"}]}}
    tls = {"frontend": {"default": {"validation": validation(cm("client-ca", "certs"), cm("missing"))}}}
    result = render([*base(443, tls), ca_config_map("client-ca", "certs"), grant])
    assert "verify required" in bind_of(result)
    (finding,) = [f for f in result.findings if f.code == "RG0410"]
    assert finding.field.endswith("caCertificateRefs[1]") and "this CA is ignored" in finding.message


def client_cert(tmp: Path, ca_signed: bool) -> tuple[Path, Path]:
    """A client certificate signed by the test CA (``ca_signed``) or self-signed."""
    ca_key_pem, ca_cert_pem = key_and_cert(CA_NAME, ca=True)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if ca_signed:
        cert = builder.issuer_name(ca_cert.subject).sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    else:
        cert = builder.issuer_name(subject).sign(key, hashes.SHA256())
    tag = "good" if ca_signed else "rogue"
    (tmp / f"{tag}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / f"{tag}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return tmp / f"{tag}.crt", tmp / f"{tag}.key"


def refused(port: int, cert: tuple[Path, Path] | None) -> bool:
    try:
        _, body = tls_get(port, "www.example.com", http_host="www.example.com", cert=cert)
    except (OSError, ssl.SSLError):
        return True
    return '"server": "web"' not in body


def test_client_certificates_live(haproxy_paths: list[str], tmp_path: Path) -> None:
    web, web_port = echo_server("web")
    good, rogue = client_cert(tmp_path, True), client_cert(tmp_path, False)
    try:
        for k, binary in enumerate(haproxy_paths):
            port = free_port()
            tls = {"frontend": {"default": {"validation": validation(cm("client-ca"))}}}
            with running(binary, base(port, tls, web_port), tmp_path / f"run{k}", port):
                cn, body = tls_get(port, "www.example.com", http_host="www.example.com", cert=good)
                assert cn == "www.example.com" and '"server": "web"' in body, (binary, body)
                assert refused(port, None), binary
                assert refused(port, rogue), binary
            port = free_port()  # no usable CA: nobody gets through, not even the good client
            tls = {"frontend": {"default": {"validation": validation(cm("missing"))}}}
            with running(binary, base(port, tls, web_port), tmp_path / f"none{k}", port):
                assert refused(port, good), binary
    finally:
        web.shutdown()


def test_terminating_tls_listeners_verify_clients_too(haproxy_check: Check) -> None:
    def objs(refs: list[dict[str, str]]) -> list[Obj]:
        gw = gateway(443, {"frontend": {"default": {"validation": validation(*refs)}}})
        gw["spec"]["listeners"].append({"name": "t", "protocol": "TLS", "port": 7443, "hostname": "db.example.com",
                                        "tls": {"mode": "Terminate", "certificateRefs": [{"name": "www"}]}})
        route = {"apiVersion": GW, "kind": "TLSRoute", "metadata": {"name": "db", "namespace": "default"},
                 "spec": {"parentRefs": [{"name": "edge", "sectionName": "t"}], "hostnames": ["db.example.com"],
                          "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}}
        return [*base(443, None), gw, route][1:]

    result = render(objs([cm("client-ca")]))
    assert_valid(haproxy_check(result))
    tls_bind = next(x for x in lines(result) if x.startswith("bind :7443 ssl"))
    assert tls_bind.endswith("verify required ca-file certs/client-ca_default_edge_7443.pem")
    refused = render(objs([cm("missing")]))
    assert_valid(haproxy_check(refused))
    assert "tcp-request connection reject" in section_of(refused, "frontend gateway-tls-port-7443")
    assert [f.field for f in refused.findings if f.code == "RG0410"] == [
        "spec.tls.frontend.default.validation.caCertificateRefs[0]"] * 2  # ports 443 and 7443


def section_of(result: Any, header: str) -> list[str]:
    cfg = lines(result)
    start = next(i for i, x in enumerate(cfg) if x.startswith(header))
    end = next((i for i in range(start + 1, len(cfg)) if not cfg[i]), len(cfg))
    return cfg[start:end]
