"""`routegate serve` with no flags: a self-signed CA and serving pair in a per-user cache dir.

Generated once and reused while it is still good, so a developer trusts `ca.crt` once. The CA key is kept
next to it (0600) so that a changed `--dns-name` re-issues only the leaf under the same CA.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from certs import files, generation

log = structlog.get_logger()

CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE = "ca.crt", "ca.key", "tls.crt", "tls.key"
RENEW_AT = 2 / 3  # same rule as self-managed mode: re-issue when two thirds of the life have passed


@dataclass(frozen=True)
class CertPaths:
    ca: Path
    cert: Path
    key: Path


def default_cert_dir() -> Path:
    """`$XDG_CACHE_HOME/routegate/certs`, else `~/.cache/routegate/certs`."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "routegate" / "certs"


def paths_in(cert_dir: Path) -> CertPaths:
    return CertPaths(ca=cert_dir / CA_FILE, cert=cert_dir / CERT_FILE, key=cert_dir / KEY_FILE)


def write_pair(out: Path, ca: generation.Issued, leaf: generation.Issued, *,
               keep_ca_key: bool = False) -> CertPaths:
    """Write ca.crt, tls.crt (leaf only) and tls.key (0600) into `out` (0700); returns their paths."""
    files.private_dir(out)
    paths = paths_in(out)
    if keep_ca_key:
        files.write_atomic(out / CA_KEY_FILE, ca.key_pem(), mode=files.KEY_MODE)
    files.write_atomic(paths.ca, ca.cert_pem(), mode=files.PUBLIC_MODE)
    files.write_atomic(paths.key, leaf.key_pem(), mode=files.KEY_MODE)
    files.write_atomic(paths.cert, leaf.cert_pem(), mode=files.PUBLIC_MODE)
    return paths


def _existing_ca(cert_dir: Path, now: datetime) -> generation.Issued | None:
    try:
        ca = generation.load_issued((cert_dir / CA_FILE).read_bytes(), (cert_dir / CA_KEY_FILE).read_bytes())
    except (OSError, generation.CertError):
        return None
    if generation.life_fraction(ca.cert, now) >= RENEW_AT or not generation.valid_at(ca.cert, now):
        return None
    return ca


def _reusable(paths: CertPaths, dns: Sequence[str], ips: Sequence[str], now: datetime) -> str | None:
    """None when the files on disk can be served as they are, else the reason to regenerate."""
    try:
        ca = generation.load_certs(paths.ca.read_bytes(), what=str(paths.ca))[0]
        leaf = generation.load_issued(paths.cert.read_bytes(), paths.key.read_bytes())
    except FileNotFoundError as e:
        return f"missing {e.filename}"
    except (OSError, generation.CertError) as e:
        return str(e)
    if not generation.signed_by(leaf.cert, ca):
        return "tls.crt is not signed by ca.crt"
    if not generation.valid_at(leaf.cert, now) or not generation.valid_at(ca, now):
        return "expired or not yet valid"
    if generation.life_fraction(leaf.cert, now) >= RENEW_AT:
        return "less than a third of its life left"
    if not generation.covers(leaf.cert, dns, ips):
        return "does not cover the requested names"
    return None


def ensure_self_signed(cert_dir: Path, *, dns_names: Sequence[str] = (), ip_addresses: Sequence[str] = (),
                       now: datetime | None = None) -> CertPaths:
    """Return usable ca.crt/tls.crt/tls.key in `cert_dir`, generating them only when needed.

    Always covers `localhost` and `127.0.0.1`. Raises generation.CertError for an invalid name.
    """
    now = now or datetime.now(UTC)
    wanted = (generation.check_dns_name(n) for n in dns_names)
    dns = list(dict.fromkeys([*generation.DEFAULT_DNS_NAMES, *wanted]))
    ips = list(dict.fromkeys([*generation.DEFAULT_IP_ADDRESSES, *ip_addresses]))
    for ip in ips:
        generation.check_ip(ip)
    paths = paths_in(cert_dir)
    reason = _reusable(paths, dns, ips, now)
    if reason is None:
        log.debug("certificate_reused", cert=str(paths.cert))
        return paths
    ca = _existing_ca(cert_dir, now)
    if ca is None:
        ca = generation.new_ca(now=now, common_name="routegate local CA")
    leaf = generation.new_leaf(ca, now=now, dns_names=dns, ip_addresses=ips)
    write_pair(cert_dir, ca, leaf, keep_ca_key=True)
    log.info("certificate_generated", reason=reason, ca=str(paths.ca), cert=str(paths.cert),
             not_after=leaf.cert.not_valid_after_utc.isoformat(), dns_names=dns, ip_addresses=ips)
    return paths
