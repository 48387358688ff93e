"""Server certificates of terminating TLS listeners: Secret -> ``certs/<ns>_<name>.pem``.

A certificate is written only when its Secret exists, a cross-namespace reference is covered by a
ReferenceGrant, ``tls.crt``/``tls.key`` parse as a PEM certificate and private key, and the key is the
certificate's (HAProxy refuses a mismatched pair). Anything else is skipped with a reason (haproxy -c
would otherwise fail on a file the user cannot see). A usable certificate outside its validity period
is written, with a warning: HAProxy serves it, and clients reject it.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from haproxy_check import escaping
from haproxy_check.render.servertls import FileSink
from validators.crossobject import backendrefs
from validators.objects import Ref, dig
from validators.states import State


@dataclass(frozen=True, slots=True)
class CertOutcome:
    path: str  # "" when skipped
    problem: str = ""
    invalid: bool = False  # the Secret exists and is permitted but holds no usable PEM pair
    warning: str = ""  # written, but clients will reject it (outside its validity period)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _spki(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _validity(cert: x509.Certificate, now: datetime.datetime) -> str:
    if now < cert.not_valid_before_utc:
        return f"is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
    if now > cert.not_valid_after_utc:
        return f"expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
    return ""


def _decode(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def cert_path(secret: Ref) -> str:
    return f"certs/{secret.namespace}_{secret.name}.pem"


def certificate(state: State, owner: Ref, secret: Ref, files: FileSink, *,
                clock: Callable[[], datetime.datetime] = _now) -> CertOutcome:
    """Write the PEM bundle of a listener's certificate Secret, or say why it cannot be used."""
    if secret.kind != "Secret":
        return CertOutcome("", f"certificateRefs kind {secret.kind} is not a Secret")
    if not backendrefs.grant_allows(state, from_kind=owner.kind, from_namespace=owner.namespace,
                                   to_kind="Secret", to_namespace=secret.namespace, to_name=secret.name):
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} is in another namespace and no "
                           "ReferenceGrant permits it")
    obj = state.get("Secret", secret.namespace, secret.name)
    if obj is None:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} does not exist")
    crt, key = _decode(dig(obj, "data", "tls.crt")), _decode(dig(obj, "data", "tls.key"))
    if not crt or not key:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} lacks tls.crt or tls.key", True)
    try:
        chain = x509.load_pem_x509_certificates(crt)
        private = serialization.load_pem_private_key(key, password=None)
        # The first certificate is the leaf HAProxy serves and pairs with the key.
        matches = _spki(chain[0].public_key()) == _spki(private.public_key())
    except (ValueError, TypeError, AttributeError) as exc:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} holds no usable PEM pair ({exc})",
                           True)
    if not matches:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name}: tls.key is not the private key of "
                           "the tls.crt certificate (HAProxy refuses the pair)", True)
    expired = _validity(chain[0], clock())
    warning = f"the certificate of Secret {secret.namespace}/{secret.name} {expired}" if expired else ""
    pem = crt.rstrip(b"\n") + b"\n" + key.rstrip(b"\n") + b"\n"
    try:
        return CertOutcome(files.add_file(cert_path(secret), pem, "cert"), warning=warning)
    except escaping.Unsafe as exc:  # a name the API server would refuse (state files): never a render crash
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} cannot name a certificate file ({exc})",
                           True)
