"""Pure X.509 generation and inspection for the webhook's CA and serving leaf.

No file or network I/O lives here, so bootstrap, the CLI and the self-managed rotator share one
definition of "a good certificate": ECDSA P-256, a 10-year CA, a 1-year leaf backdated one hour (clock
skew between the apiserver and us must not make a fresh certificate "not yet valid"), serverAuth only.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = timedelta(days=3650)
LEAF_LIFETIME = timedelta(days=365)
BACKDATE = timedelta(hours=1)
DEFAULT_DNS_NAMES = ("localhost",)
DEFAULT_IP_ADDRESSES = ("127.0.0.1",)

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class CertError(ValueError):
    """A name, file or pair that cannot make a usable serving certificate; the message says why."""


@dataclass(frozen=True)
class Issued:
    """A certificate with its private key. The key never appears in a repr."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey = field(repr=False)

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The four names the apiserver may use to reach `service` in `namespace`."""
    for what, value in (("service", service), ("namespace", namespace)):
        if not _LABEL.match(value):
            raise CertError(f"{what} {value!r} is not a valid DNS-1123 label")
    base = f"{service}.{namespace}"
    return (service, base, f"{base}.svc", f"{base}.svc.cluster.local")


def check_dns_name(name: str) -> str:
    """Return `name` lower-cased, or raise CertError saying which label is wrong."""
    low = name.lower().rstrip(".")
    if not low or len(low) > 253:
        raise CertError(f"DNS name {name!r} must be 1-253 characters")
    labels = low.split(".")
    for i, label in enumerate(labels):
        if i == 0 and label == "*" and len(labels) > 1:
            continue
        if not _LABEL.match(label):
            raise CertError(f"DNS name {name!r}: label {label!r} is not a valid DNS label")
    return low


def check_ip(value: str) -> IPAddress:
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        raise CertError(f"{value!r} is not an IPv4 or IPv6 address") from None


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def new_ca(*, now: datetime, common_name: str = "routegate webhook CA",
           lifetime: timedelta = CA_LIFETIME) -> Issued:
    """A self-signed CA that may sign only end-entity certificates (pathlen 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True,
                          crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def new_leaf(ca: Issued, *, now: datetime, dns_names: Sequence[str] = (),
             ip_addresses: Sequence[str] = (), lifetime: timedelta = LEAF_LIFETIME) -> Issued:
    """A serving certificate for the given names, never outliving its CA."""
    dns = _unique(check_dns_name(n) for n in dns_names)
    ips = [check_ip(a) for a in _unique(ip_addresses)]
    if not dns and not ips:
        raise CertError("a serving certificate needs at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP256R1())
    common = dns[0] if dns else str(ips[0])
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns]
    sans += [x509.IPAddress(a) for a in ips]
    not_after = min(now + lifetime, ca.cert.not_valid_after_utc)
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common[:64])]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=False,
                          crl_sign=False, encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                       critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return Issued(cert, key)


# -- inspection ---------------------------------------------------------------------------------------


def load_certs(pem: bytes, *, what: str = "certificate") -> list[x509.Certificate]:
    """All certificates in a PEM blob; CertError when there are none or one is malformed."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as e:
        raise CertError(f"{what}: not a PEM certificate ({e})") from None
    return certs


def load_key(pem: bytes, *, what: str = "private key") -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        # The message of these exceptions never contains key material.
        raise CertError(f"{what}: not an unencrypted PEM private key ({type(e).__name__})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{what}: expected an EC key, got {type(key).__name__}")
    return key


def load_issued(cert_pem: bytes, key_pem: bytes) -> Issued:
    cert = load_certs(cert_pem)[0]
    key = load_key(key_pem)
    if not key_matches(cert, key):
        raise CertError("certificate and private key do not belong together")
    return Issued(cert, key)


def key_matches(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return cert.public_key().public_bytes(enc, pub) == key.public_key().public_bytes(enc, pub)


def fingerprint(cert: x509.Certificate) -> str:
    """sha256 of the DER encoding, lower-case hex: how reports and logs name a certificate."""
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def valid_at(cert: x509.Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now < cert.not_valid_after_utc


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def covers(cert: x509.Certificate, dns_names: Iterable[str] = (), ip_addresses: Iterable[str] = ()) -> bool:
    """True when every wanted name is an exact SAN entry of `cert` (no wildcard matching on purpose)."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have_dns = {n.lower() for n in san.get_values_for_type(x509.DNSName)}
    have_ip = set(san.get_values_for_type(x509.IPAddress))
    return all(check_dns_name(n) in have_dns for n in dns_names) and all(
        check_ip(a) in have_ip for a in ip_addresses
    )


def life_fraction(cert: x509.Certificate, now: datetime) -> float:
    """How much of the validity window has passed: 0.0 at notBefore, 1.0 at notAfter."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    total = (end - start).total_seconds()
    if total <= 0:
        return 1.0
    return (now - start).total_seconds() / total
