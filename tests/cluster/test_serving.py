"""End to end: the webhook app judging reviews against a ClusterState that follows the fake cluster.

This is ``routegate serve --kubeconfig`` minus the process: the same ``servers.make_app`` and Gate,
with the state coming from watches through the real kubernetes-asyncio client.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.cluster.clusterkit import GW, eventually, install_gateway_api, running
from tests.fakekube import FakeKube
from tests.webhook.conftest import INPUTS, STATE_DIR, binary, gate, load_objects, schemas  # noqa: F401
from webhook.cluster import ClusterState
from webhook.gate.gates import Gate
from webhook.server import servers

pytestmark = pytest.mark.haproxy


def review(obj: dict[str, Any], operation: str = "CREATE", uid: str = "u1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": GW, "version": "v1", "kind": obj["kind"]},
            "operation": operation,
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": None,
        },
    }


def route(name: str) -> dict[str, Any]:
    return next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == name)  # type: ignore[index,return-value]


def neighbour_of_broken() -> dict[str, Any]:
    """A healthy route on the broken route's host: the broken one is in its closure (a delta review
    of a route on another host never renders it)."""
    shop = copy.deepcopy(route("shop"))
    shop["spec"]["hostnames"] = ["broken.example.com"]
    return shop


Served = tuple[TestClient[Any, Any], ClusterState]


@pytest.fixture
async def webhook(kube: FakeKube, api: Any, gate: Gate) -> AsyncIterator[Served]:  # noqa: F811 - the fixture
    install_gateway_api(kube)
    for obj in load_objects(STATE_DIR):
        kube.create(obj)
    state = ClusterState(api, resync_backoff_cap=0.05)
    async with TestClient(TestServer(servers.make_app(gate, state))) as client:
        yield client, state


async def post(client: TestClient[Any, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview's response; "could not decide" (a 503 call failure, so that failurePolicy
    applies) as its Status document, marked ``undecided``."""
    resp = await client.post("/validate", json=body)
    doc = await resp.json()
    if resp.status == 503:
        assert resp.headers["Retry-After"] == "1" and doc["kind"] == "Status" and doc["code"] == 503, doc
        return {"undecided": True, **doc}
    assert resp.status == 200
    out: dict[str, Any] = doc["response"]
    return out


async def test_reviews_follow_the_cluster_state(kube: FakeKube, webhook: Served) -> None:
    client, state = webhook
    # before the first sync: never judged against an empty state
    early = await post(client, review(route("shop")))
    assert early.get("undecided") and "still syncing" in early["message"], early
    assert (await client.get("/readyz")).status == 503

    kube.create(route("broken"))  # an object the webhook never saw is already in the cluster
    async with running(state):
        await eventually(lambda: state.ready, within=10)
        ready = await client.get("/readyz")
        assert ready.status == 200, await ready.text()

        # the cluster is already broken by someone else: an unrelated change is admitted with a warning
        out = await post(client, review(neighbour_of_broken()))
        assert out["allowed"] is True, out
        assert any("already fails" in w for w in out.get("warnings", [])), out

        # the broken route goes away in the cluster; the next review sees a healthy baseline
        kube.delete(f"{GW}/v1", "HTTPRoute", "broken", "capture")
        await eventually(lambda: state.snapshot().get("HTTPRoute", "capture", "broken") is None)
        out = await post(client, review(neighbour_of_broken(), uid="u2"))
        assert out["allowed"] is True and not any("already fails" in w for w in out.get("warnings", [])), out

        # and the same broken route, proposed now, is denied naming its field
        out = await post(client, review(route("broken"), uid="u3"))
        assert out["allowed"] is False
        assert out["status"]["message"].startswith("HTTPRoute capture/broken: spec.rules[1]"), out


async def test_a_forbidden_secret_warns_on_its_gateway_and_blocks_nothing_else(kube: FakeKube, webhook: Served) -> None:
    from tests.cluster.clusterkit import gateway, secret

    client, state = webhook
    kube.create(secret("x", "shop"))
    kube.forbid("secrets", "shop", "x")  # RBAC resourceNames that do not grant shop/x
    gw = kube.create(gateway("gw", "shop", secrets=("x",)))
    async with running(state):
        await eventually(lambda: state.ready, within=10)
        ready = await client.get("/readyz")
        assert ready.status == 200, await ready.text()
        body = await ready.json()
        assert [u.split(":")[0] for u in body["state"]["kinds"]["Secret"]["unreadable"]] == ["shop/x"]

        out = await post(client, review(route("shop")))
        assert out["allowed"] is True, out
        assert not any("cannot read" in w for w in out.get("warnings", [])), out

        # the delete that undoes the reference is admitted, and says what could not be read
        delete = review(gw, operation="DELETE", uid="u2")
        delete["request"]["object"], delete["request"]["oldObject"] = None, gw
        out = await post(client, delete)
        assert out["allowed"] is True, out
        assert any(w.startswith("cannot read Secret shop/x: forbidden (HTTP 403") for w in out["warnings"]), out


async def test_a_kind_forbidden_at_startup_refuses_reviews_naming_the_error(kube: FakeKube, webhook: Served) -> None:
    client, state = webhook
    kube.forbid("endpointslices")
    async with running(state):
        await eventually(lambda: state.status()["kinds"]["EndpointSlice"]["errors"] >= 1, within=10)
        out = await post(client, review(route("shop")))
        assert out.get("undecided"), out
        assert "cannot list EndpointSlice: forbidden (HTTP 403" in out["message"], out
        ready = await client.get("/readyz")
        assert ready.status == 503 and "cannot list EndpointSlice" in (await ready.json())["state"]["reason"]


async def test_a_new_reference_to_an_unwatched_secret_is_read_during_the_review(kube: FakeKube,
                                                                                 webhook: Served) -> None:
    from tests.cluster.clusterkit import gateway, secret

    client, state = webhook
    kube.create(secret("edge2-tls", "shop"))  # exists, but nothing stored references it: not watched
    async with running(state):
        await eventually(lambda: state.ready, within=10)
        assert state.snapshot().get("Secret", "shop", "edge2-tls") is None
        out = await post(client, review(gateway("edge2", "shop", secrets=("edge2-tls",))))
        assert out["allowed"] is True, out
        warnings = out.get("warnings", [])
        assert not any("does not exist" in w for w in warnings), warnings
        # Read during the review (it holds no usable PEM pair, which is now what the review says), and watched.
        assert any("Secret shop/edge2-tls holds no usable PEM pair" in w for w in warnings), warnings
        assert state.snapshot().get("Secret", "shop", "edge2-tls") is not None


async def test_a_new_policy_s_unwatched_ca_configmap_is_read_during_the_review(kube: FakeKube,
                                                                               webhook: Served) -> None:
    """A BackendTLSPolicy naming an existing but unwatched ConfigMap: no false "does not exist" (RG0515,
    "backends are blocked"); the ConfigMap is read during the review and watched from then on."""
    from tests.cluster.clusterkit import service

    client, state = webhook
    kube.create(service("web", "shop"))
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-ca", "namespace": "shop"},
                 "data": {"ca.crt": "not a certificate"}})
    policy = {"apiVersion": f"{GW}/v1", "kind": "BackendTLSPolicy", "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                       "validation": {"hostname": "web.shop.example",
                                      "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "web-ca"}]}}}
    async with running(state):
        await eventually(lambda: state.ready, within=10)
        assert state.snapshot().get("ConfigMap", "shop", "web-ca") is None
        out = await post(client, review(policy))
        assert out["allowed"] is True, out
        warnings = out.get("warnings", [])
        assert not any("does not exist" in w for w in warnings), warnings
        assert any("ConfigMap shop/web-ca key ca.crt holds no PEM certificate" in w for w in warnings), warnings
        assert state.snapshot().get("ConfigMap", "shop", "web-ca") is not None
