"""A listener Secret's PEM pair is parsed and matched once per content: a review renders the same Secret
again and again (the proposed closure and its baseline), and a changed Secret gets its own verdict."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from haproxy_check.render import listenercerts
from validators.objects import Ref
from validators.states import MemoryState

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
GATEWAY = Ref("Gateway", "gw", "edge")
SECRET = Ref("Secret", "gw", "tls")


class Sink:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def add_file(self, name: str, content: bytes, kind: str) -> str:
        self.files[name] = content
        return name


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(key: ec.EllipticCurvePrivateKey, after: datetime.datetime) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shop.example.com")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(NOW - DAY).not_valid_after(after)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def _state(crt: bytes, key: bytes) -> MemoryState:
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                              "metadata": {"name": SECRET.name, "namespace": SECRET.namespace},
                              "data": {"tls.crt": base64.b64encode(crt).decode(),
                                       "tls.key": base64.b64encode(key).decode()}}
    return MemoryState([secret])


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    listenercerts._pair.cache_clear()
    seen: list[bytes] = []
    load = serialization.load_pem_private_key

    def counted(data: bytes, password: bytes | None = None) -> Any:
        seen.append(data)
        return load(data, password=password)

    monkeypatch.setattr(listenercerts.serialization, "load_pem_private_key", counted)
    return seen


def test_the_same_pair_is_parsed_once_and_judged_the_same(parses: list[bytes]) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    crt, pem = _cert(key, NOW + DAY), _pem_key(key)
    first = [listenercerts.certificate(_state(crt, pem), GATEWAY, SECRET, Sink()) for _ in range(3)]
    assert first[0] == first[1] == first[2]
    assert first[0].path == "certs/gw_tls.pem" and not first[0].problem
    assert len(parses) == 1


def test_a_verdict_of_the_pair_holds_for_every_render(parses: list[bytes]) -> None:
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    crt = _cert(key, NOW + DAY)
    for _ in range(2):  # the second time from the memo: the same refusal
        mismatch = listenercerts.certificate(_state(crt, _pem_key(other)), GATEWAY, SECRET, Sink())
        assert mismatch.path == "" and mismatch.invalid and "is not the private key" in mismatch.problem
        garbage = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        broken = listenercerts.certificate(_state(crt, garbage), GATEWAY, SECRET, Sink())
        assert broken.path == "" and broken.invalid and "holds no usable PEM pair (" in broken.problem
    assert len(parses) == 2  # a changed Secret (another key) is judged on its own


def test_validity_is_judged_at_every_render_against_the_clock(parses: list[bytes]) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    state = _state(_cert(key, NOW + DAY), _pem_key(key))
    fresh = listenercerts.certificate(state, GATEWAY, SECRET, Sink(), clock=lambda: NOW)
    later = listenercerts.certificate(state, GATEWAY, SECRET, Sink(), clock=lambda: NOW + 2 * DAY)
    assert not fresh.warning and "expired on" in later.warning
    assert len(parses) == 1
