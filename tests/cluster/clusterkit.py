"""Builders and helpers for the cluster tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from tests.conftest import need_shared
from tests.fakekube import FakeKube, crd
from webhook.cluster import ClusterState

GW = "gateway.networking.k8s.io"


def install_gateway_api(kube: FakeKube, *, tls: bool = True) -> None:
    """The standard-channel CRDs (plus TLSRoute when ``tls``) and the routegate Route CRD."""
    kube.create(crd(GW, "GatewayClass", "gatewayclasses", ("v1", "v1beta1"), scope="Cluster"))
    kube.create(crd(GW, "Gateway", "gateways", ("v1", "v1beta1")))
    kube.create(crd(GW, "HTTPRoute", "httproutes", ("v1", "v1beta1")))
    kube.create(crd(GW, "GRPCRoute", "grpcroutes", ("v1",)))
    kube.create(crd(GW, "ReferenceGrant", "referencegrants", ("v1beta1",)))
    kube.create(crd(GW, "BackendTLSPolicy", "backendtlspolicies", ("v1",)))
    if tls:
        kube.create(crd(GW, "TLSRoute", "tlsroutes", ("v1alpha2",)))
    kube.create(crd("routegate.io", "Route", "routes", ("v1alpha1",)))


def httproute(
    name: str, namespace: str = "default", *, host: str = "a.example.com", version: str = "v1"
) -> dict[str, Any]:
    """A realistic HTTPRoute as the apiserver returns it (the captured one, renamed)."""
    review = json.loads(need_shared("fixtures", "admission-reviews", "03-httproute-create.json").read_text())
    obj = copy.deepcopy(review["request"]["object"])
    obj["apiVersion"] = f"{GW}/{version}"
    obj["metadata"].update(name=name, namespace=namespace)
    obj["metadata"].pop("uid", None)
    obj["spec"]["hostnames"] = [host]
    return dict(obj)


def service(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"port": 8080, "protocol": "TCP"}], "selector": {"app": name}},
    }


def gateway(name: str, namespace: str = "default", *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    listeners: list[dict[str, Any]] = [{"name": "http", "port": 80, "protocol": "HTTP"}]
    for i, secret in enumerate(secrets):
        listeners.append(
            {
                "name": f"https-{i}",
                "port": 443,
                "protocol": "HTTPS",
                "hostname": f"h{i}.example.com",
                "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": secret}]},
            }
        )
    return {
        "apiVersion": f"{GW}/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"gatewayClassName": "haproxy", "listeners": listeners},
    }


def secret(name: str, namespace: str = "default", value: str = "Y2VydA==") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"tls.crt": value, "tls.key": value},
    }


async def eventually(predicate: Callable[[], bool], *, within: float = 5.0, what: str = "condition") -> None:
    """Poll until ``predicate()`` holds; fail naming ``what`` after ``within`` seconds.

    Polling (not an Event) on purpose: the predicates read state from several independent sources.
    """
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(state: ClusterState) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(state.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
