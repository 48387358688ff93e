"""Server certificates of terminating TLS listeners: Secret -> ``certs/<ns>_<name>.pem``.

A certificate is written only when its Secret exists, a cross-namespace reference is covered by a
ReferenceGrant, and ``tls.crt``/``tls.key`` parse as a PEM certificate and private key. Anything else
is skipped with a reason (haproxy -c would otherwise fail on a file the user cannot see).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from haproxy_check import escaping
from haproxy_check.backendtls import FileSink
from validators import references
from validators.objects import Ref, dig
from validators.states import State


@dataclass(frozen=True, slots=True)
class CertOutcome:
    path: str  # "" when skipped
    problem: str = ""
    invalid: bool = False  # the Secret exists and is permitted but holds no usable PEM pair


def _decode(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def cert_path(secret: Ref) -> str:
    return f"certs/{secret.namespace}_{secret.name}.pem"


def certificate(state: State, owner: Ref, secret: Ref, files: FileSink) -> CertOutcome:
    """Write the PEM bundle of a listener's certificate Secret, or say why it cannot be used."""
    if secret.kind != "Secret":
        return CertOutcome("", f"certificateRefs kind {secret.kind} is not a Secret")
    if not references.grant_allows(state, from_kind=owner.kind, from_namespace=owner.namespace,
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
        x509.load_pem_x509_certificates(crt)
        serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError) as exc:
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} holds no usable PEM pair ({exc})",
                           True)
    pem = crt.rstrip(b"\n") + b"\n" + key.rstrip(b"\n") + b"\n"
    try:
        return CertOutcome(files.add_file(cert_path(secret), pem, "cert"))
    except escaping.Unsafe as exc:  # a name the API server would refuse (state files): never a render crash
        return CertOutcome("", f"Secret {secret.namespace}/{secret.name} cannot name a certificate file ({exc})",
                           True)
