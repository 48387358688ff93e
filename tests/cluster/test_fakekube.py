"""The fake speaks the protocol kubernetes-asyncio's own typed APIs and Watch expect, not just ours."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch

from tests.cluster.clusterkit import GW, crd, eventually, httproute, install_gateway_api, running
from tests.fakekube import FakeKube
from webhook.cluster import ClusterConfigError, ClusterState, load_api_client
from webhook.cluster.reflectors import PAGE_SIZE


async def test_typed_api_and_library_watch_work_against_the_fake(kube: FakeKube, api: Any) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "y"}}})
    core = client.CoreV1Api(api)
    listed = await core.list_namespace()
    assert [n.metadata.name for n in listed.items] == ["a"]
    assert int(listed.metadata.resource_version) > 0
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}})
    kube.delete("v1", "Namespace", "a")
    seen: list[tuple[str, str]] = []
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespace,
            resource_version=listed.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=2,
        )
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                break
    assert seen == [("ADDED", "b"), ("DELETED", "a")]


async def test_discovery_shows_a_crd_once_installed(kube: FakeKube, api: Any) -> None:
    apis = client.ApisApi(api)
    groups = await apis.get_api_versions()
    assert GW not in [g.name for g in groups.groups]
    kube.create(crd(GW, "HTTPRoute", "httproutes", ("v1",)))
    groups = await apis.get_api_versions()
    assert GW in [g.name for g in groups.groups]
    custom = client.CustomObjectsApi(api)
    kube.create(httproute("r"))
    listed = await custom.list_cluster_custom_object(GW, "v1", "httproutes")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["r"]


async def test_a_wrong_token_is_refused(kube: FakeKube, tmp_path: Path) -> None:
    kube.token = "other"
    api = await load_api_client(kube.write_kubeconfig(tmp_path / "k"))
    kube.token = "expected"
    assert api is not None
    try:
        with pytest.raises(client.ApiException) as e:
            await client.CoreV1Api(api).list_namespace()
        assert e.value.status == 401
    finally:
        await api.close()


async def test_lists_larger_than_a_page_are_followed_and_an_expired_continue_restarts(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    for i in range(PAGE_SIZE * 2 + 5):
        kube.create(
            {
                "apiVersion": f"{GW}/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": f"r{i:04d}", "namespace": "n"},
                "spec": {},
            }
        )
    original = kube._list

    def forget_continues(*args: Any) -> Any:
        if "continue" in args[0].query and not forgotten:
            forgotten.append(True)
            kube._continues.clear()
        return original(*args)

    forgotten: list[bool] = []
    kube._list = forget_continues  # type: ignore[method-assign]
    state = ClusterState(api, kinds=["HTTPRoute"], resync_backoff_cap=0.05)
    async with running(state):
        await eventually(lambda: state.ready)
        assert len(state.snapshot().list("HTTPRoute")) == PAGE_SIZE * 2 + 5
    pages = [r for r in kube.requests if "httproutes?" in r and "watch" not in r]
    assert sum("continue=" in r for r in pages) >= 3  # one expired, then two more pages
    assert forgotten


async def test_without_crd_access_discovery_is_followed(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube, tls=False)
    kube.fail_next("list", 403, plural="customresourcedefinitions")
    state = ClusterState(api, kinds=["HTTPRoute", "TLSRoute"], resync_backoff_cap=0.05, rediscovery_interval=0.1)
    async with running(state):
        await eventually(lambda: state.ready)
        assert state.status()["crds"] == "discovery"
        assert state.crd_documents() == []
        kube.create(crd(GW, "TLSRoute", "tlsroutes", ("v1alpha2",)))
        await eventually(lambda: state.status()["kinds"]["TLSRoute"]["version"] == "v1alpha2")


async def test_cancellation_stops_every_task(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, resync_backoff_cap=0.05)
    before = asyncio.all_tasks()
    task = asyncio.create_task(state.run())
    await eventually(lambda: state.ready)

    def reflectors() -> set[asyncio.Task[Any]]:  # the fake's own handler tasks share this loop
        return {t for t in asyncio.all_tasks() - before if t.get_name().startswith("reflect ")}

    assert len(reflectors()) > 5
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert reflectors() == set()
    await eventually(lambda: kube.watch_count() == 0, what="the server saw every watch close")


async def test_load_api_client_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert await load_api_client(None) is None
    with pytest.raises(ClusterConfigError, match="does not exist"):
        await load_api_client(str(tmp_path / "missing"))
    (tmp_path / "bad").write_text("{not: [valid")
    with pytest.raises(ClusterConfigError, match="cannot load"):
        await load_api_client(str(tmp_path / "bad"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ClusterConfigError, match="cannot load"):  # no service account token in this sandbox
        await load_api_client(None)


async def test_the_client_verifies_the_servers_certificate_over_https(tmp_path: Path) -> None:
    async with FakeKube(tls=True) as kube:
        assert kube.url.startswith("https://")
        install_gateway_api(kube)
        kube.create(httproute("r"))
        api = await load_api_client(kube.write_kubeconfig(tmp_path / "kubeconfig"))
        assert api is not None
        try:
            state = ClusterState(api, kinds=["HTTPRoute"], resync_backoff_cap=0.05)
            async with running(state):
                await eventually(lambda: state.ready)
                assert state.snapshot().get("HTTPRoute", "default", "r") is not None
        finally:
            await api.close()
        config = json.loads((tmp_path / "kubeconfig").read_text())
        del config["clusters"][0]["cluster"]["certificate-authority-data"]
        (tmp_path / "untrusted").write_text(json.dumps(config))
        untrusted = await load_api_client(str(tmp_path / "untrusted"))
        assert untrusted is not None
        try:
            with pytest.raises(aiohttp.ClientSSLError):
                await client.CoreV1Api(untrusted).list_namespace()
        finally:
            await untrusted.close()


async def test_apply_creates_then_updates(kube: FakeKube) -> None:
    created = kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    updated = kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "y"}}})
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert (kube.get("", "namespaces", "", "a") or {})["metadata"]["labels"] == {"x": "y"}


MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}  # the client's default is JSON patch


async def test_the_status_subresource_behaves_as_the_apiservers(kube: FakeKube, api: Any) -> None:
    """GET/PUT/merge-PATCH on .../status through the client's own calls: a status write changes only the
    status and never the generation; a stale resourceVersion is a 409; a spec write keeps the status and
    bumps the generation; a metadata-only write does not; 403 without the subresource's verbs."""
    install_gateway_api(kube)
    kube.create(httproute("r"))
    custom = client.CustomObjectsApi(api)
    read = await custom.get_namespaced_custom_object_status(GW, "v1", "default", "httproutes", "r")
    assert read["metadata"]["generation"] == 1 and "status" not in read
    one = {"parents": [{"controllerName": "a/b", "parentRef": {"name": "gw"}, "conditions": []}]}
    written = await custom.replace_namespaced_custom_object_status(
        GW, "v1", "default", "httproutes", "r", {**read, "spec": {"hostnames": ["ignored"]}, "status": one})
    assert written["status"] == one and written["metadata"]["generation"] == 1
    assert written["spec"] == read["spec"]  # the status subresource changes nothing else
    assert int(written["metadata"]["resourceVersion"]) > int(read["metadata"]["resourceVersion"])
    with pytest.raises(client.ApiException) as stale:
        await custom.replace_namespaced_custom_object_status(GW, "v1", "default", "httproutes", "r",
                                                             {**read, "status": {"parents": []}})
    assert stale.value.status == 409
    patched = await custom.patch_namespaced_custom_object_status(
        GW, "v1", "default", "httproutes", "r", {"status": {"extra": 1}}, **MERGE)
    assert patched["status"] == {**one, "extra": 1} and patched["metadata"]["generation"] == 1
    with pytest.raises(client.ApiException) as stale_patch:
        await custom.patch_namespaced_custom_object_status(
            GW, "v1", "default", "httproutes", "r",
            {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"]}, "status": {}}, **MERGE)
    assert stale_patch.value.status == 409
    labelled = kube.get(GW, "httproutes", "default", "r")
    assert labelled is not None
    labelled = {**labelled, "metadata": {**labelled["metadata"], "labels": {"x": "y"}}}
    labelled.pop("status")
    after_label = kube.update(labelled)
    assert after_label["metadata"]["generation"] == 1 and after_label["status"] == {**one, "extra": 1}
    after_spec = kube.update({**after_label, "spec": {**after_label["spec"], "hostnames": ["b.example.com"]}})
    assert after_spec["metadata"]["generation"] == 2 and after_spec["status"] == {**one, "extra": 1}
    kube.forbid("httproutes/status")
    with pytest.raises(client.ApiException) as forbidden:
        await custom.replace_namespaced_custom_object_status(GW, "v1", "default", "httproutes", "r", after_spec)
    assert forbidden.value.status == 403
    kube.allow("httproutes/status")
    with pytest.raises(client.ApiException) as missing:
        await custom.get_namespaced_custom_object_status(GW, "v1", "default", "httproutes", "nope")
    assert missing.value.status == 404
