"""A CA rollover seen the way the apiserver sees it: real HTTPS servers on each replica's reloader, and
after every step a real handshake that trusts exactly the webhook configuration's current caBundle.

The fake clock starts 2440 days in the past and then jumps to the real now, so the rollover happens
at real time and OpenSSL's own validity checks apply to every certificate served.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from certfakes import FakeKube
from kubernetes_asyncio import client

from certs import generation
from certs.reloading import CertReloader
from certs.selfmanaged import SelfManaged

NS, SECRET, WEBHOOK, SERVICE = "routegate-system", "routegate-tls", "routegate", "routegate"
HOST = f"{SERVICE}.{NS}.svc"

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


@dataclass
class Replica:
    manager: SelfManaged
    reloader: CertReloader
    port: int = 0


def _vwc() -> dict[str, object]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK},
            "webhooks": [{"name": "validate.routegate.io", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None",
                          "clientConfig": {"service": {"name": SERVICE, "namespace": NS}}}]}


@pytest.fixture
async def api(aiohttp_server: ServerFactory) -> AsyncIterator[tuple[FakeKube, client.ApiClient]]:
    fake = FakeKube()
    fake.put("validatingwebhookconfigurations", "", _vwc())
    server = await aiohttp_server(fake.app())
    api = client.ApiClient(configuration=client.Configuration(host=str(server.make_url("")).rstrip("/")))
    try:
        yield fake, api
    finally:
        await api.close()


def _apiserver_trust(fake: FakeKube) -> ssl.SSLContext:
    """What the apiserver trusts right now: the caBundle of our webhook configuration."""
    vwc = fake.get("validatingwebhookconfigurations", "", WEBHOOK)
    assert vwc is not None
    bundle = base64.b64decode(vwc["webhooks"][0]["clientConfig"]["caBundle"]).decode()
    return ssl.create_default_context(cadata=bundle)


async def _handshake(port: int, trust: ssl.SSLContext) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust, server_hostname=HOST)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await reader.read()).startswith(b"HTTP/1.1 200")
    writer.close()
    with contextlib.suppress(ssl.SSLError, ConnectionError):
        await writer.wait_closed()
    return generation.fingerprint(generation.load_certs(ssl.DER_cert_to_PEM_cert(der).encode())[0])


async def test_every_handshake_through_a_ca_rollover_verifies_against_the_live_ca_bundle(
        api: tuple[FakeKube, client.ApiClient], tmp_path: Path) -> None:
    fake, kube = api
    real_now = datetime.now(UTC)
    clock = [real_now - timedelta(days=2440)]
    replicas = []
    for name in ("routegate-a", "routegate-b"):
        manager = SelfManaged(kube, namespace=NS, secret_name=SECRET, webhook_name=WEBHOOK, service=SERVICE,
                              out_dir=tmp_path / name, identity=name, now=lambda: clock[0])
        reloader = CertReloader(manager.paths.cert, manager.paths.key)
        manager.serving = lambda r=reloader: r.fingerprint  # report what the TLS server really serves
        replicas.append(Replica(manager, reloader))
    for r in replicas:  # the CA is born 2440 days ago
        await r.manager.step()
    clock[0] = real_now

    runners = []

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/healthz", ok)
    handshakes, seen_actions, served = 0, [], set()
    try:
        for tick in range(10):
            for i, r in enumerate(replicas):
                await r.manager.step()
                clock[0] += timedelta(seconds=5)
                if r.manager.last_plan is not None and r.manager.is_leader:
                    seen_actions.append(str(r.manager.last_plan.action))
                # replica b's reloader lags: it polls only every third tick
                for j, other in enumerate(replicas):
                    if j == 0 or (tick % 3 == 2 and i == 0):
                        other.reloader.poll()
                    if other.reloader.loaded and not other.port:
                        runner = web.AppRunner(app)
                        await runner.setup()
                        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=other.reloader.context)
                        await site.start()
                        runners.append(runner)
                        other.port = runner.addresses[0][1]
                trust = _apiserver_trust(fake)
                for other in replicas:
                    if other.port:
                        served.add(await _handshake(other.port, trust))
                        handshakes += 1
    finally:
        for runner in runners:
            await runner.cleanup()
    print(f"\nrollover over TLS: {handshakes} handshakes against the live caBundle, 0 failed; "
          f"{len(served)} distinct leaves served; leader actions {seen_actions}")
    assert all(r.port for r in replicas)
    for action in ("renew-leaf", "roll-ca", "trim-bundle"):
        assert action in seen_actions, seen_actions
    assert seen_actions.index("roll-ca") < seen_actions.index("trim-bundle")
    assert len(served) >= 2  # the leaf from the old CA, then the one from the new CA
    vwc = fake.get("validatingwebhookconfigurations", "", WEBHOOK)
    assert vwc is not None
    pem = base64.b64decode(vwc["webhooks"][0]["clientConfig"]["caBundle"])
    assert len(generation.load_certs(pem)) == 1  # the rollover finished
