"""Hot reload over real TLS: an aiohttp HTTPS server on `reloader.context`, real handshakes, real files."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from certs import files, generation
from certs.reloading import CertLoadError, CertReloader

NOW = datetime.now(UTC)
NAMES = ["localhost"]


def _pair(ca: generation.Issued, *, now: datetime = NOW) -> generation.Issued:
    return generation.new_leaf(ca, now=now, dns_names=NAMES, ip_addresses=["127.0.0.1"])


def _mount(directory: Path, leaf: generation.Issued) -> None:
    """Write the pair the way kubelet updates a Secret volume (one atomic ..data symlink swap)."""
    files.write_together(directory, {"tls.crt": (leaf.cert_pem(), 0o644), "tls.key": (leaf.key_pem(), 0o600)})


def _fp(der: bytes | None) -> str:
    assert der is not None
    return hashlib.sha256(der).hexdigest()


@dataclass
class Server:
    port: int
    client: ssl.SSLContext
    reloader: CertReloader
    mount: Path
    ca: generation.Issued


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    ca = generation.new_ca(now=NOW)
    mount = tmp_path / "mount"
    _mount(mount, _pair(ca))
    reloader = CertReloader(mount / "tls.crt", mount / "tls.key", interval=0.02)
    reloader.load()

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(0.4)
        return web.Response(text="slow-ok")

    app = web.Application()
    app.router.add_get("/healthz", ok)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=reloader.context)
    await site.start()
    port = runner.addresses[0][1]
    client = ssl.create_default_context(cadata=ca.cert_pem().decode())
    try:
        yield Server(port, client, reloader, mount, ca)
    finally:
        await runner.cleanup()


async def _request(srv: Server, path: str = "/healthz") -> tuple[str, bytes]:
    """One fresh connection (one full handshake) and one request; returns (served fingerprint, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port, ssl=srv.client,
                                                   server_hostname="localhost")
    try:
        fp = _fp(writer.get_extra_info("ssl_object").getpeercert(binary_form=True))
        writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()
    assert data.startswith(b"HTTP/1.1 200"), data[:80]
    return fp, data.split(b"\r\n\r\n", 1)[1]


@dataclass
class Load:
    handshakes: int = 0
    failures: list[str] = field(default_factory=list)
    served: list[tuple[float, str]] = field(default_factory=list)  # (connect started, fingerprint)


async def _hammer(srv: Server, load: Load, stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            fp, _ = await _request(srv)
        except (OSError, ssl.SSLError, AssertionError) as e:
            load.failures.append(f"{type(e).__name__}: {e}")
        else:
            load.handshakes += 1
            load.served.append((started, fp))  # connections begun after the install must get it


async def test_a_swap_under_load_fails_no_handshake_and_serves_the_new_certificate(server: Server) -> None:
    srv = server
    old_fp = srv.reloader.fingerprint
    new_leaf = _pair(srv.ca)
    new_fp = generation.fingerprint(new_leaf.cert)
    load, stop = Load(), asyncio.Event()
    poller = asyncio.create_task(srv.reloader.run())
    workers = [asyncio.create_task(_hammer(srv, load, stop)) for _ in range(6)]
    # a keep-alive connection and a slow request that are in flight across the swap
    keep_r, keep_w = await asyncio.open_connection("127.0.0.1", srv.port, ssl=srv.client,
                                                   server_hostname="localhost")
    slow = asyncio.create_task(_request(srv, "/slow"))
    await asyncio.sleep(0.3)
    before_swap = load.handshakes
    _mount(srv.mount, new_leaf)
    swapped_at = time.monotonic()
    for _ in range(200):
        if srv.reloader.fingerprint == new_fp:
            break
        await asyncio.sleep(0.01)
    installed_at = time.monotonic()
    await asyncio.sleep(0.4)
    stop.set()
    await asyncio.gather(*workers)
    poller.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await poller

    slow_fp, slow_body = await slow
    keep_w.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    kept = await keep_r.read()
    keep_fp = _fp(keep_w.get_extra_info("ssl_object").getpeercert(binary_form=True))
    keep_w.close()

    after = [fp for t, fp in load.served if t > installed_at]
    print(f"\nhot reload: {load.handshakes} handshakes ({before_swap} before the swap), "
          f"{len(load.failures)} failed, {len(after)} after install, "
          f"reload latency {1000 * (installed_at - swapped_at):.0f} ms")
    assert load.failures == []
    assert srv.reloader.fingerprint == new_fp and srv.reloader.reloads == 1
    assert before_swap > 10 and len(after) > 10
    assert set(after) == {new_fp}
    assert {fp for t, fp in load.served if t < swapped_at} == {old_fp}
    assert (slow_fp, slow_body) == (old_fp, b"slow-ok")
    assert kept.startswith(b"HTTP/1.1 200") and keep_fp == old_fp


def _break(mount: Path, how: str, ca: generation.Issued) -> None:
    good = _pair(ca)
    if how == "garbage certificate":
        files.write_together(mount, {"tls.crt": (b"-----BEGIN CERTIFICATE-----\nzzz\n", 0o644),
                                     "tls.key": (good.key_pem(), 0o600)})
    elif how == "key of another pair":
        files.write_together(mount, {"tls.crt": (good.cert_pem(), 0o644),
                                     "tls.key": (_pair(ca).key_pem(), 0o600)})
    elif how == "expired pair":
        _mount(mount, generation.new_leaf(ca, now=NOW - timedelta(days=400), dns_names=NAMES))
    elif how == "key deleted":
        (mount / "tls.key").unlink()
    elif how == "empty files":
        files.write_together(mount, {"tls.crt": (b"", 0o644), "tls.key": (b"", 0o600)})


@pytest.mark.parametrize("how", ["garbage certificate", "key of another pair", "expired pair", "key deleted",
                                 "empty files"])
async def test_a_broken_pair_is_logged_once_and_the_last_good_one_kept(server: Server, how: str) -> None:
    srv = server
    old_fp = srv.reloader.fingerprint
    _break(srv.mount, how, srv.ca)
    with capture_logs() as logs:
        assert srv.reloader.poll() is False
        assert srv.reloader.poll() is False
    assert [e["event"] for e in logs] == ["certificate_reload_rejected"]
    assert logs[0]["keeping"] == old_fp
    assert "PRIVATE KEY" not in repr(logs)
    assert srv.reloader.fingerprint == old_fp and srv.reloader.ready()
    fp, body = await _request(srv)
    assert (fp, body) == (old_fp, b"ok")
    # a good pair afterwards is picked up
    good = _pair(srv.ca)
    _mount(srv.mount, good)
    assert srv.reloader.poll() is True
    assert (await _request(srv))[0] == generation.fingerprint(good.cert)


async def test_a_half_written_pair_is_rejected_then_picked_up_when_complete(server: Server) -> None:
    srv = server
    old_fp = srv.reloader.fingerprint
    new = _pair(srv.ca)
    (srv.mount / "tls.crt").unlink()  # replace the symlinks by plain files written one at a time
    (srv.mount / "tls.key").unlink()
    (srv.mount / "tls.crt").write_bytes(new.cert_pem())
    (srv.mount / "tls.key").write_bytes(_pair(srv.ca).key_pem())  # still the wrong key
    assert srv.reloader.poll() is False and srv.reloader.fingerprint == old_fp
    (srv.mount / "tls.key").write_bytes(new.key_pem())
    assert srv.reloader.poll() is True
    assert (await _request(srv))[0] == generation.fingerprint(new.cert)


def test_the_expiry_gauge_follows_the_loaded_certificate(tmp_path: Path) -> None:
    ca = generation.new_ca(now=NOW)
    leaf = generation.new_leaf(ca, now=NOW, dns_names=NAMES, lifetime=timedelta(days=42))
    _mount(tmp_path, leaf)
    reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert not reloader.ready() and reloader.not_after is None
    reloader.load()
    expected = leaf.cert.not_valid_after_utc.timestamp()
    assert REGISTRY.get_sample_value("routegate_webhook_certificate_expiry_timestamp_seconds") == expected
    assert reloader.ready() and not reloader.ready(now=leaf.cert.not_valid_after_utc)


@pytest.mark.parametrize(("setup", "message"), [
    pytest.param("missing", "cannot read", id="missing files"),
    pytest.param("mismatch", "do not belong together", id="mismatched pair"),
    pytest.param("rsa-junk", "not an unencrypted PEM private key", id="key is junk"),
])
def test_initial_load_fails_with_a_clear_reason(tmp_path: Path, setup: str, message: str) -> None:
    ca = generation.new_ca(now=NOW)
    if setup == "mismatch":
        files.write_together(tmp_path, {"tls.crt": (_pair(ca).cert_pem(), 0o644),
                                         "tls.key": (_pair(ca).key_pem(), 0o600)})
    elif setup == "rsa-junk":
        junk = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        files.write_together(tmp_path, {"tls.crt": (_pair(ca).cert_pem(), 0o644), "tls.key": (junk, 0o600)})
    reloader = CertReloader(tmp_path / "tls.crt", tmp_path / "tls.key")
    with pytest.raises(CertLoadError, match=message) as info:
        reloader.load()
    assert "AAAA" not in str(info.value)
    assert not reloader.loaded and not reloader.ready()
