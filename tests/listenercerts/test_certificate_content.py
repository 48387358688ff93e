"""Certificate content of listener Secrets: a key that is not the certificate's, and a certificate
outside its validity period, are findings on the Gateway's certificateRefs field (``routegate check``
with real ``haproxy -c``)."""

from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy
NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(key: ec.EllipticCurvePrivateKey, before: datetime.datetime, after: datetime.datetime) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shop.example.com")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(before).not_valid_after(after)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("shop.example.com")]), critical=False)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def _secret(name: str, crt: bytes, key: bytes) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": "shop"},
            "data": {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(key).decode()}}


def _gateway(name: str, secret: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"gatewayClassName": "haproxy", "listeners": [
                {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": f"{name}.example.com",
                 "tls": {"certificateRefs": [{"name": secret}]}}]}}


def _findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, list[dict[str, Any]]]:
    key, other = _key(), _key()
    state = tmp_path / "state"
    state.mkdir()
    (state / "secrets.yaml").write_text(yaml.safe_dump_all([
        _secret("good", _cert(key, NOW - DAY, NOW + 30 * DAY), _pem_key(key)),
        _secret("mismatched", _cert(key, NOW - DAY, NOW + 30 * DAY), _pem_key(other)),
        _secret("expired", _cert(key, NOW - 30 * DAY, NOW - DAY), _pem_key(key)),
        _secret("future", _cert(key, NOW + DAY, NOW + 30 * DAY), _pem_key(key)),
    ]))
    gateways = tmp_path / "gateways.yaml"
    gateways.write_text(yaml.safe_dump_all([_gateway(n, n) for n in ("good", "mismatched", "expired", "future")]))
    code = main(["check", "--state", str(state), "-f", str(gateways), "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    return {r["name"]: r["findings"] for r in report["results"]}


FIELD = "spec.listeners[0].tls.certificateRefs[0]"


def test_certificate_content_findings_name_the_certificate_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                haproxy_path: str) -> None:
    found = _findings(tmp_path, capsys)
    assert not [f for f in found["good"] if f["code"] in ("RG0405", "RG0409")], found["good"]
    mismatch = [f for f in found["mismatched"] if f["code"] == "RG0405"]
    assert mismatch and mismatch[0]["path"] == FIELD and "not the private key" in mismatch[0]["message"]
    expired = [f for f in found["expired"] if f["code"] == "RG0409"]
    assert expired and expired[0]["path"] == FIELD and "expired on" in expired[0]["message"], found["expired"]
    future = [f for f in found["future"] if f["code"] == "RG0409"]
    assert future and future[0]["path"] == FIELD and "not valid before" in future[0]["message"]
