"""The webhook over real HTTPS: the AdmissionReview contract end to end with the real gate."""

from __future__ import annotations

import gzip
import json
import ssl
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from certs import bootstrap, reloading
from tests.conftest import need_shared
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.server import servers
from webhook.sources import StaticSource

pytestmark = pytest.mark.haproxy


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session, self.base = session, base

    async def post(self, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(self.base + "/validate", data=data,
                                     headers={"Content-Type": "application/json"}) as resp:
            return resp.status, await resp.json(content_type=None)


@pytest.fixture
async def client(gate: Gate, tmp_path: Path) -> AsyncIterator[Client]:
    paths = bootstrap.ensure_self_signed(tmp_path / "certs")
    reloader = reloading.CertReloader(paths.cert, paths.key)
    reloader.load()
    state = MemoryState(load_objects(STATE_DIR), version="test")
    app = servers.make_app(gate, StaticSource(state, origin=str(STATE_DIR)), certs=reloader)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=reloader.context, **servers.SERVER_OPTIONS)
    trust = ssl.create_default_context(cafile=str(paths.ca))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
        yield Client(session, f"https://localhost:{server.port}")
    await server.close()


def review(obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
           uid: str = "uid-1") -> dict[str, Any]:
    subject = obj or old or {}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": subject["kind"]},
        "operation": operation, "namespace": subject["metadata"]["namespace"],
        "name": subject["metadata"]["name"], "object": obj, "oldObject": old}}


def route(name: str) -> dict[str, Any]:
    return next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == name)  # type: ignore[index]


async def test_every_captured_apiserver_review_is_answered_with_its_uid(client: Client) -> None:
    fixtures = need_shared("fixtures", "admission-reviews")
    files = sorted(fixtures.glob("*.json"))
    assert len(files) >= 7
    for path in files:
        body = path.read_bytes()
        status, out = await client.post(body)
        assert status == 200, (path.name, out)
        assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
        assert out["response"]["uid"] == json.loads(body)["request"]["uid"], path.name
        assert out["response"]["allowed"] is True, (path.name, out["response"])


async def test_a_valid_route_is_allowed(client: Client) -> None:
    status, out = await client.post(review(route("shop")))
    assert status == 200 and out["response"]["allowed"] is True, out


async def test_a_regex_haproxy_rejects_is_denied_naming_the_field(client: Client) -> None:
    status, out = await client.post(review(route("broken")))
    assert status == 200
    response = out["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
    message = response["status"]["message"]
    assert message.startswith("HTTPRoute capture/broken: spec.rules[1].matches[0].path.value: haproxy ")
    assert "a{2,1}" in message


async def test_a_rule_violation_is_denied_with_the_field_path(client: Client) -> None:
    _, out = await client.post(review(route("sticky")))
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["message"].startswith(
        'HTTPRoute capture/sticky: spec.rules[0].sessionPersistence.sessionName: "a b"')


async def test_delete_is_allowed_when_the_rest_still_checks(client: Client) -> None:
    shop = route("shop")
    _, out = await client.post(review(None, operation="DELETE", old=shop))
    assert out["response"]["allowed"] is True


@pytest.mark.parametrize(("body", "says"), [
    (b"{", "not valid JSON"),
    (b"[]", "JSON object"),
    (json.dumps({"apiVersion": "v1", "kind": "AdmissionReview", "request": {"uid": "x"}}).encode(), "apiVersion"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(), "request"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "request": {"kind": {"kind": "HTTPRoute"}, "operation": "CREATE", "object": {}}}).encode(), "uid"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "x", "kind": {"kind": "HTTPRoute"}, "operation": "CREATE", "object": "nope"}}).encode(), "object"),
])
async def test_malformed_bodies_get_400_with_a_json_error(client: Client, body: bytes, says: str) -> None:
    status, out = await client.post(body)
    assert status == 400 and says in out["error"]


async def _post_raw(client: Client, body: bytes, **headers: str) -> tuple[int, dict[str, Any]]:
    async with client.session.post(client.base + "/validate", data=body,
                                   headers={"Content-Type": "application/json", **headers}) as resp:
        return resp.status, await resp.json(content_type=None)


@pytest.mark.parametrize(("body", "headers", "says"), [
    pytest.param(b"[" * 1000 + b"]" * 1000, {}, "nested deeper than 64 levels", id="nested 1000 deep"),
    pytest.param(b'{"a": ' + b"1" * 4300 + b"}", {}, "integer with 4300 digits", id="4300-digit integer"),
    pytest.param(b"not gzip at all", {"Content-Encoding": "gzip"}, "Content-Encoding gzip", id="invalid gzip"),
    pytest.param(b"not deflate data", {"Content-Encoding": "deflate"}, "Content-Encoding deflate",
                 id="invalid deflate"),
    # a corrupt stream that ends with the request: aiohttp's parser answered a text/plain "deflate"
    pytest.param(zlib.compress(b'{"apiVersion": "admission.k8s.io/v1"}' * 50)[:-9], {"Content-Encoding": "deflate"},
                 "the stream is truncated", id="truncated deflate"),
    pytest.param(gzip.compress(b"{}")[:-4], {"Content-Encoding": "gzip"}, "Content-Encoding gzip",
                 id="truncated gzip"),
    pytest.param(gzip.compress(b"{}") + b"trailing", {"Content-Encoding": "gzip"}, "after the end of the stream",
                 id="gzip with trailing bytes"),
])
async def test_bodies_that_break_parsers_get_400_with_a_specific_json_error(
        client: Client, body: bytes, headers: dict[str, str], says: str) -> None:
    status, out = await _post_raw(client, body, **headers)
    assert status == 400 and says in out["error"], out


@pytest.mark.parametrize(("body", "headers", "status", "says"), [
    pytest.param(gzip.compress(b" " * (17 * 1024**2)), {"Content-Encoding": "gzip"}, 413, "once decoded",
                 id="gzip bomb"),
    pytest.param(zlib.compress(b" " * (17 * 1024**2)), {"Content-Encoding": "deflate"}, 413, "once decoded",
                 id="deflate bomb"),
    pytest.param(b"{}", {"Content-Encoding": "br"}, 415, "'br' is not supported", id="brotli"),
    pytest.param(b"{}", {"Content-Encoding": "gzip, deflate"}, 415, "is not supported", id="two encodings"),
])
async def test_bombs_and_unsupported_encodings_get_a_json_error(
        client: Client, body: bytes, headers: dict[str, str], status: int, says: str) -> None:
    got, out = await _post_raw(client, body, **headers)
    assert got == status and says in out["error"], out


async def test_a_valid_gzip_body_is_reviewed(client: Client) -> None:
    status, out = await _post_raw(client, gzip.compress(json.dumps(review(route("shop"))).encode()),
                                  **{"Content-Encoding": "gzip"})
    assert status == 200 and out["response"]["allowed"] is True, out


async def test_a_17_mib_body_gets_413(client: Client) -> None:
    status, out = await client.post(b"{" + b" " * (17 * 1024**2) + b"}")
    assert status == 413 and "larger than" in out["error"]


async def test_a_16_mib_update_is_accepted(client: Client) -> None:
    shop = route("shop")
    padded = json.loads(json.dumps(shop))
    padded["metadata"]["annotations"] = {"pad": "x" * (15 * 1024**2)}
    status, out = await client.post(review(padded, operation="UPDATE", old=shop))
    assert status == 200 and out["response"]["uid"] == "uid-1"


async def test_wrong_method_gets_405(client: Client) -> None:
    async with client.session.get(client.base + "/validate") as resp:
        assert resp.status == 405


async def test_an_unhandled_kind_is_allowed_with_a_warning(client: Client) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "capture"}}
    status, out = await client.post(review(obj))
    assert status == 200 and out["response"]["allowed"] is True
    assert any("does not check ConfigMap" in w for w in out["response"]["warnings"])


async def test_health_and_readiness_report_the_haproxy_version(client: Client, gate: Gate) -> None:
    async with client.session.get(client.base + "/healthz") as resp:
        assert resp.status == 200
    async with client.session.get(client.base + "/readyz") as resp:
        body = await resp.json()
        assert resp.status == 200 and body["ready"] is True
        assert body["haproxy"]["version"] == gate.binary.version
        assert body["certificates"]["loaded"] is True and body["certificates"]["notAfter"]


async def test_not_ready_state_denies_with_retry(gate: Gate) -> None:
    class Syncing(StaticSource):
        @property
        def ready(self) -> bool:
            return False

    app = servers.make_app(gate, Syncing())
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{server.port}/validate",
                                    data=json.dumps(review(route("shop")))) as resp:
                status, retry_after, out = resp.status, resp.headers.get("Retry-After"), await resp.json()
            async with session.get(f"http://127.0.0.1:{server.port}/readyz") as ready:
                assert ready.status == 503
    finally:
        await server.close()
    # a call failure, so that the apiserver's failurePolicy applies (an AdmissionReview would reject)
    assert status == 503 and retry_after == "1" and out["kind"] == "Status" and out["code"] == 503
    assert out["message"] == "HTTPRoute capture/shop: routegate could not decide: still syncing cluster state; retry"


async def test_metrics_count_reviews_with_bounded_labels(client: Client) -> None:
    await client.post(review(route("shop")))
    await client.post(review({"apiVersion": "x/v1", "kind": f"Weird{id(client)}",
                              "metadata": {"name": "w", "namespace": "capture"}}))
    app = servers.make_metrics_app()
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{server.port}/metrics") as resp:
            text = await resp.text()
    finally:
        await server.close()
    assert 'routegate_reviews_total{kind="HTTPRoute",operation="CREATE",verdict="allow"}' in text
    assert 'kind="other"' in text and "Weird" not in text
    assert "routegate_haproxy_check_duration_seconds_bucket" in text
    assert 'routegate_cel_events_total{event="compile_errors"}' in text
    assert "routegate_cel_engine_info{engine=" in text



async def test_readiness_fails_with_an_expired_certificate(gate: Gate) -> None:
    from datetime import UTC, datetime, timedelta

    class Expired:
        loaded = True
        not_after = datetime.now(UTC) - timedelta(minutes=1)

    app = servers.make_app(gate, StaticSource(), certs=Expired())
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{server.port}/readyz") as resp:
            body = await resp.json()
            assert resp.status == 503 and body["certificates"]["loaded"] is False
    finally:
        await server.close()
