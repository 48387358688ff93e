"""Server certificates for HTTPS listeners: the Secret's PEM pair, or a placeholder.

When a listener's Secret is missing (or unusable) the check must still run, so the listener gets a
self-signed placeholder certificate (generated once per process with ``cryptography``) and the render
result carries a warning naming the listener's certificateRefs field.
"""

from __future__ import annotations

import datetime
import functools

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PLACEHOLDER_PATH = "certs/routegate-placeholder.pem"


@functools.cache
def placeholder_pem() -> bytes:
    """A self-signed ECDSA P-256 certificate + key for ``routegate.invalid`` (cached per process)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "routegate placeholder")])
    now = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=36500))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("routegate.invalid")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
