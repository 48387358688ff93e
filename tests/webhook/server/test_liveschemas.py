"""Live CRD schemas: the served CRDs drive schema checks, and an upgrade applies without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

import yaml

from tests.cluster.clusterkit import eventually, running
from tests.cluster.conftest import api, kube  # noqa: F401 - fixtures shared with the cluster tests
from tests.conftest import need_shared
from tests.fakekube import FakeKube
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.states import MemoryState
from webhook.cluster import ClusterState
from webhook.server import liveschemas


def httproute_crd() -> dict[str, Any]:
    path = need_shared("gateway-api", "v1.6.1", "standard", "gateway.networking.k8s.io_httproutes.yaml")
    return next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition")


def route(method: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {"rules": [{"matches": [{"method": method}], "backendRefs": [{"name": "s", "port": 80}]}]}}


def method_enum(crd: dict[str, Any]) -> list[str]:
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    match = (version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["rules"]["items"]
             ["properties"]["matches"]["items"]["properties"]["method"])
    enum: list[str] = match["enum"]
    return enum


def schema_denies(checks: Checks, obj: dict[str, Any]) -> list[str]:
    return [f.field for f in checks.check(Change(Operation.CREATE, obj), MemoryState())
            if f.severity == "deny" and f.field.endswith("method")]


async def test_served_crds_replace_files_and_an_upgrade_applies_without_restart(
    kube: FakeKube, api: Any  # noqa: F811 - the fixtures
) -> None:
    crd = httproute_crd()
    kube.create(crd)
    state = ClusterState(api, resync_backoff_cap=0.05)
    checks = Checks(schemas=None)
    async with running(state):
        follower = asyncio.create_task(liveschemas.follow(state, checks, interval=0.01))
        try:
            await eventually(lambda: checks.schemas is not None, what="schemas from the served CRD")
            assert schema_denies(checks, route("BREW")) == ["spec.rules[0].matches[0].method"]
            assert schema_denies(checks, route("GET")) == []
            upgraded = copy.deepcopy(kube.get("apiextensions.k8s.io", "customresourcedefinitions", "",
                                              crd["metadata"]["name"]))
            assert upgraded is not None
            method_enum(upgraded).append("BREW")
            kube.update(upgraded)
            await eventually(lambda: not schema_denies(checks, route("BREW")), what="the upgraded schema")
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower


def test_served_crds_win_over_files_of_the_same_name() -> None:
    live = [{"kind": "CustomResourceDefinition", "metadata": {"name": "a"}, "spec": {"live": True}}]
    files = [{"kind": "CustomResourceDefinition", "metadata": {"name": "a"}, "spec": {"live": False}},
             {"kind": "CustomResourceDefinition", "metadata": {"name": "b"}}]
    assert [d["metadata"]["name"] for d in liveschemas.merged(live, files)] == ["a", "b"]
    assert liveschemas.merged(live, files)[0]["spec"]["live"] is True
