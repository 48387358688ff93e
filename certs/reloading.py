"""Hot reload of the serving pair into one live server SSLContext.

kubelet updates a Secret volume by swapping a `..data` symlink, which inotify-style watchers miss, so we
poll the content (sha256 of cert + key bytes). A changed pair is first loaded into a scratch context; only
when it loads cleanly (parses, key matches, still valid) is it loaded into the live context. OpenSSL copies
the certificate into each connection at accept time, so in-flight connections keep theirs and every new
handshake gets the new pair: no restart, no dropped request. A broken pair is logged once per distinct
content and the last good pair stays in service.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import structlog

from certs import files, generation
from certs.certmetrics import CERT_NOT_AFTER

log = structlog.get_logger()


class CertLoadError(RuntimeError):
    """The serving pair cannot be used; the message names the files and the reason (never key bytes)."""


def _load_bytes(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """load_cert_chain from exactly these bytes (the files may change again while we load)."""
    with tempfile.TemporaryDirectory(prefix="routegate-cert-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        files.write_atomic(cert_file, cert_pem, mode=files.KEY_MODE)
        files.write_atomic(key_file, key_pem, mode=files.KEY_MODE)
        ctx.load_cert_chain(cert_file, key_file)


def _server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


class CertReloader:
    """Owns `.context`, a server SSLContext whose certificate follows the files on disk."""

    def __init__(self, cert: Path, key: Path, *, interval: float = 5.0) -> None:
        self.cert_path = Path(cert)
        self.key_path = Path(key)
        self.interval = interval
        self.context = _server_context()
        self.loaded = False
        self.not_after: datetime | None = None
        self.fingerprint = ""
        self.reloads = 0
        self._digest = ""
        self._rejected = ""

    def __repr__(self) -> str:
        return f"CertReloader(cert={str(self.cert_path)!r}, fingerprint={self.fingerprint[:16]!r})"

    def ready(self, now: datetime | None = None) -> bool:
        """True when a pair is loaded and inside its validity window (what /readyz reports)."""
        now = now or datetime.now(UTC)
        return self.loaded and self.not_after is not None and now < self.not_after

    def _read(self) -> tuple[bytes, bytes, str]:
        try:
            cert_pem = self.cert_path.read_bytes()
            key_pem = self.key_path.read_bytes()
        except OSError as e:
            raise CertLoadError(f"cannot read {e.filename}: {e.strerror}") from None
        digest = hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()
        return cert_pem, key_pem, digest

    def _check(self, cert_pem: bytes, key_pem: bytes, now: datetime) -> generation.Issued:
        try:
            issued = generation.load_issued(cert_pem, key_pem)
        except generation.CertError as e:
            raise CertLoadError(f"{self.cert_path} / {self.key_path}: {e}") from None
        try:
            _load_bytes(_server_context(), cert_pem, key_pem)
        except (ssl.SSLError, OSError) as e:
            raise CertLoadError(
                f"{self.cert_path} / {self.key_path}: OpenSSL rejects the pair ({e})"
            ) from None
        if issued.cert.not_valid_after_utc <= now:
            raise CertLoadError(
                f"{self.cert_path}: expired at {issued.cert.not_valid_after_utc.isoformat()}"
            )
        return issued

    def _install(self, issued: generation.Issued, cert_pem: bytes, key_pem: bytes, digest: str) -> None:
        _load_bytes(self.context, cert_pem, key_pem)
        self._digest = digest
        self._rejected = ""
        self.loaded = True
        self.not_after = issued.cert.not_valid_after_utc
        self.fingerprint = generation.fingerprint(issued.cert)
        CERT_NOT_AFTER.set(self.not_after.timestamp())

    def load(self) -> None:
        """Initial load; raises CertLoadError with a clear reason when the pair is unusable."""
        cert_pem, key_pem, digest = self._read()
        issued = self._check(cert_pem, key_pem, datetime.now(UTC))
        self._install(issued, cert_pem, key_pem, digest)
        log.info("certificate_loaded", cert=str(self.cert_path), fingerprint=self.fingerprint,
                 not_after=self.not_after.isoformat() if self.not_after else None)

    def poll(self) -> bool:
        """Check the files once; returns True when a new pair went into service."""
        try:
            cert_pem, key_pem, digest = self._read()
        except CertLoadError as e:
            self._reject(str(e), "unreadable")
            return False
        if digest in (self._digest, self._rejected):
            return False
        try:
            issued = self._check(cert_pem, key_pem, datetime.now(UTC))
        except CertLoadError as e:
            self._reject(str(e), digest)
            return False
        old = self.fingerprint
        self._install(issued, cert_pem, key_pem, digest)
        self.reloads += 1
        log.info("certificate_reloaded", cert=str(self.cert_path), old_fingerprint=old,
                 fingerprint=self.fingerprint,
                 not_after=self.not_after.isoformat() if self.not_after else None)
        return True

    def _reject(self, reason: str, digest: str) -> None:
        if digest == self._rejected:
            return
        self._rejected = digest
        log.warning("certificate_reload_rejected", reason=reason, keeping=self.fingerprint or None)

    async def run(self) -> None:
        """Poll every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.poll()
            except Exception as e:  # a reload bug must never take the server down
                log.error("certificate_reload_crashed", error=type(e).__name__, detail=str(e)[:200])
