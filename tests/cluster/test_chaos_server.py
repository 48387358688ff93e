"""Chaos on the server side: certificate files deleted, watches that drop and answer 410, every watch
failing. Each step asserts the verdict kind (a judgement, or an honest "could not decide"; never an
allow that was not judged) and what /readyz answers."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from certs import bootstrap, generation, reloading
from tests.cluster.clusterkit import eventually, install_gateway_api, running
from tests.cluster.test_serving import post, review, route
from tests.fakekube import FakeKube
from tests.webhook.conftest import STATE_DIR, binary, gate, load_objects, schemas  # noqa: F401
from validators.states import MemoryState
from webhook.cluster import ClusterState
from webhook.gate.gates import Gate
from webhook.server import servers
from webhook.sources import StaticSource

pytestmark = pytest.mark.haproxy


async def _https(base: str, ca: Path, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    """One request on a fresh connection: a new TLS handshake against the live context."""
    trust = ssl.create_default_context(cafile=str(ca))
    connector = aiohttp.TCPConnector(ssl=trust, force_close=True)
    async with (aiohttp.ClientSession(connector=connector) as session,
                session.request(method, base + path, **kw) as resp):
        return resp.status, await resp.json(content_type=None)


async def _leaf(port: int) -> str:
    """The fingerprint of the certificate a new handshake gets."""
    pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
    return generation.fingerprint(generation.load_certs(pem.encode())[0])


async def test_deleted_certificate_files_keep_the_last_good_pair_serving_and_ready(
        gate: Gate, tmp_path: Path) -> None:  # noqa: F811
    paths = bootstrap.ensure_self_signed(tmp_path / "certs")
    reloader = reloading.CertReloader(paths.cert, paths.key)
    reloader.load()
    served_before = reloader.fingerprint
    app = servers.make_app(gate, StaticSource(MemoryState(load_objects(STATE_DIR))), certs=reloader)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=reloader.context, **servers.SERVER_OPTIONS)
    base = f"https://localhost:{server.port}"
    try:
        paths.cert.unlink()
        paths.key.unlink()
        assert reloader.poll() is False  # rejected: nothing to load, the live pair stays
        status, body = await _https(base, paths.ca, "POST", "/validate", json=review(route("shop")))
        assert status == 200 and body["response"]["allowed"] is True
        assert await _leaf(server.port) == served_before
        status, ready = await _https(base, paths.ca, "GET", "/readyz")
        assert status == 200 and ready["certificates"]["loaded"] is True, ready
        # the files come back with a new pair from the same CA: the next handshake serves it
        fresh = bootstrap.ensure_self_signed(tmp_path / "fresh")
        shutil.copy(fresh.cert, paths.cert)
        shutil.copy(fresh.key, paths.key)
        assert reloader.poll() is True
        status, body = await _https(base, fresh.ca, "POST", "/validate", json=review(route("broken")))
        assert status == 200 and body["response"]["allowed"] is False  # judged: a deny, with the new pair
        assert await _leaf(server.port) == reloader.fingerprint != served_before
    finally:
        await server.close()


@pytest.fixture
async def cluster_webhook(
        kube: FakeKube, api: Any, gate: Gate,  # noqa: F811 - the fixture
) -> AsyncIterator[tuple[TestClient[Any, Any], ClusterState]]:
    install_gateway_api(kube)
    for obj in load_objects(STATE_DIR):
        kube.create(obj)
    state = ClusterState(api, resync_backoff_cap=0.05, stale_after=1.0)
    async with TestClient(TestServer(servers.make_app(gate, state))) as client:
        yield client, state


async def test_watches_that_drop_and_answer_410_keep_reviews_judged_and_ready(
        kube: FakeKube, cluster_webhook: tuple[TestClient[Any, Any], ClusterState]) -> None:
    client, state = cluster_webhook
    async with running(state):
        await eventually(lambda: state.ready, within=10)
        for round_, as_http in enumerate((False, True, False)):
            kube.gone_as_http = as_http
            # another kind moves the version on, so the route watch's resume point is compacted away
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"chaos-{round_}"}})
            kube.compact()
            kube.drop_watches()  # every stream cut; the resume point is now too old: 410, re-list
            added = {**route("shop"), "metadata": {**route("shop")["metadata"], "name": f"late-{round_}"}}
            kube.create(added)
            out = await post(client, review(route("shop"), uid=f"chaos-{round_}"))
            assert not out.get("undecided"), out
            assert out["allowed"] is True, out  # judged: the state stays ready while it re-lists
            ready = await client.get("/readyz")
            assert ready.status == 200, await ready.text()
            await eventually(lambda r=round_: state.snapshot().get("HTTPRoute", "capture", f"late-{r}") is not None,
                             within=10, what="the object created during the gap")
        assert state.status()["kinds"]["HTTPRoute"]["relists"] >= 3


async def test_losing_every_watch_past_the_bound_makes_reviews_could_not_decide_and_readyz_503(
        kube: FakeKube, cluster_webhook: tuple[TestClient[Any, Any], ClusterState]) -> None:
    client, state = cluster_webhook
    async with running(state):
        await eventually(lambda: state.ready, within=10)
        kube.fail_next("watch", 503, times=10**6)
        kube.fail_next("list", 503, times=10**6)
        kube.drop_watches()  # the apiserver goes away
        await eventually(lambda: not state.ready, within=10, what="stale past the 1 s bound")
        out = await post(client, review(route("shop"), uid="stale-1"))
        assert out.get("undecided"), out
        assert "stale (every watch failing; bound 1s)" in out["message"], out
        ready = await client.get("/readyz")
        body = await ready.json()
        assert ready.status == 503 and any("stale" in r for r in body["reasons"]), body
        assert body["state"]["staleSeconds"] >= 1.0
        kube.failures.clear()  # the apiserver is back
        await eventually(lambda: state.ready, within=10)
        out = await post(client, review(route("broken"), uid="stale-2"))
        assert out["allowed"] is False and out["status"]["code"] == 403, out  # judged again
        assert (await client.get("/readyz")).status == 200
