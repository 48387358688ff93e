"""Render-l4 helpers: fixture sets from tests/data/render_l4, real TLS material, and the HTTP render tests' tools
(``tests.render.conftest``: render, write, the real ``haproxy -c`` runner, line/map accessors)."""

from __future__ import annotations

import base64
import datetime
import functools
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.render.conftest import haproxy_check  # noqa: F401 - re-exported fixture
from validators.objects import Obj

DATA = Path(__file__).resolve().parents[1] / "data" / "render_l4"


def fixture(name: str) -> list[Obj]:
    return [o for o in yaml.safe_load_all((DATA / name).read_text()) if o]


@functools.cache
def key_and_cert(cn: str, *, ca: bool = False) -> tuple[bytes, bytes]:
    """A self-signed ECDSA certificate (PEM) and its key (PEM), made once per test session."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(cn)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            cert.public_bytes(serialization.Encoding.PEM))


def tls_secret(name: str, cn: str, ns: str = "default") -> Obj:
    key, cert = key_and_cert(cn)
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": ns},
            "data": {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}}


def ca_config_map(name: str, ns: str = "default") -> Obj:
    _, cert = key_and_cert("routegate test CA", ca=True)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"ca.crt": cert.decode()}}
