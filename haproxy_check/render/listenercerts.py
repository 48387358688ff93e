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
import functools
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


# Distinct certificate/key pairs whose parse and match are remembered: a review's render parses the same
# listener Secret as the last one did (a private key's load and consistency check is ~0.5 ms, on every
# render of a closure with a TLS listener); a changed Secret is other bytes, so another entry.
PAIRS = 256


@functools.lru_cache(maxsize=PAIRS)
def _pair(crt: bytes, key: bytes) -> tuple[x509.Certificate | None, str | None]:
    """(the leaf certificate, None) when ``crt`` parses, ``key`` parses and is the leaf's key; (None, None)
    when the key is another's; (None, why) when the PEM pair is unusable. A pure function of the bytes."""
    try:
        chain = x509.load_pem_x509_certificates(crt)
        private = serialization.load_pem_private_key(key, password=None)
        # The first certificate is the leaf HAProxy serves and pairs with the key.
        matches = _spki(chain[0].public_key()) == _spki(private.public_key())
    except (ValueError, TypeError, AttributeError) as exc:
        return None, str(exc)
    return (chain[0], None) if matches else (None, None)


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
    leaf, problem = _pair(crt, key)
    if problem is not None:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} holds no usable PEM pair ({problem})",
                           True)
    if leaf is None:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name}: tls.key is not the private key of "
                           "the tls.crt certificate (HAProxy refuses the pair)", True)
    expired = _validity(leaf, clock())
    warning = f"the certificate of Secret {secret.namespace}/{secret.name} {expired}" if expired else ""
    pem = crt.rstrip(b"\n") + b"\n" + key.rstrip(b"\n") + b"\n"
    try:
        return CertOutcome(files.add_file(cert_path(secret), pem, "cert"), warning=warning)
    except escaping.Unsafe as exc:  # a name the API server would refuse (state files): never a render crash
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} cannot name a certificate file ({exc})",
                           True)
