"""The proposed state: one change overlaid on a live ClusterState snapshot, without touching the stores."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.clusterkit import eventually, httproute, install_gateway_api, running, service
from tests.fakekube import FakeKube
from validators.changes import Change, Operation
from validators.states import Overlay
from webhook.cluster import ClusterState


def names(objs: Any) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


@pytest.fixture
async def state(kube: FakeKube, api: Any) -> Any:
    install_gateway_api(kube)
    for name in ("a", "c"):
        kube.create(httproute(name))
    kube.create(service("web"))
    cluster = ClusterState(api, kinds=["HTTPRoute", "Service"], resync_backoff_cap=0.05)
    async with running(cluster):
        await eventually(lambda: cluster.ready)
        yield cluster


def route(name: str, host: str) -> dict[str, Any]:
    obj = httproute(name, host=host)
    del obj["metadata"]["managedFields"]
    return obj


@pytest.mark.parametrize(
    ("operation", "name", "listed", "host_of_a"),
    [
        pytest.param(Operation.CREATE, "b", ["a", "b", "c"], "a.example.com", id="create adds the subject in order"),
        pytest.param(Operation.UPDATE, "a", ["a", "c"], "new.example.com", id="update replaces the subject"),
        pytest.param(Operation.DELETE, "a", ["c"], None, id="delete removes the subject"),
    ],
)
async def test_overlay_of_one_change_on_the_live_state(
    state: ClusterState, operation: Operation, name: str, listed: list[str], host_of_a: str | None
) -> None:
    base = state.snapshot()
    stored = base.get("HTTPRoute", "default", name)
    new = None if operation is Operation.DELETE else route(name, "new.example.com")
    proposed = Overlay(base, Change(operation, new, old=stored))

    assert names(proposed.list("HTTPRoute")) == listed
    a = proposed.get("HTTPRoute", "default", "a")
    assert (a["spec"]["hostnames"][0] if a else None) == host_of_a
    # other kinds are the stores' own objects: nothing was copied
    assert proposed.list("Service") is base.list("Service")
    assert proposed.get("HTTPRoute", "default", "c") is base.get("HTTPRoute", "default", "c")
    # the stores and the base snapshot are untouched, and the versions tell the two apart
    assert names(state.snapshot().list("HTTPRoute")) == ["a", "c"]
    assert state.snapshot().version == base.version
    assert proposed.version != base.version


async def test_overlay_base_stays_frozen_while_the_cluster_moves(kube: FakeKube, state: ClusterState) -> None:
    base = state.snapshot()
    proposed = Overlay(base, Change(Operation.CREATE, route("b", "b.example.com")))
    kube.create(httproute("z"))
    kube.delete("gateway.networking.k8s.io/v1", "HTTPRoute", "a", "default")
    await eventually(lambda: names(state.snapshot().list("HTTPRoute")) == ["c", "z"])
    assert names(proposed.list("HTTPRoute")) == ["a", "b", "c"]
    assert names(Overlay(state.snapshot(), proposed.change).list("HTTPRoute")) == ["b", "c", "z"]
