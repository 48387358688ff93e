"""ClusterState against the fake API server, through the real kubernetes-asyncio client."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import yaml
from aiohttp import web

from tests.cluster.clusterkit import (
    GW,
    eventually,
    gateway,
    httproute,
    install_gateway_api,
    running,
    secret,
    service,
)
from tests.conftest import need_shared
from tests.fakekube import FakeKube, crd
from validators.schema.crds import SchemaSet
from webhook.cluster import ClusterState

FAST = {"resync_backoff_cap": 0.05}


async def test_initial_sync_then_events_follow_the_cluster(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.create(httproute("r1"))
    kube.create(service("web"))
    state = ClusterState(api, **FAST)
    assert not state.ready
    async with running(state):
        await eventually(lambda: state.ready, what="ready after the first lists")
        snap = state.snapshot()
        assert [o["metadata"]["name"] for o in snap.list("HTTPRoute")] == ["r1"]
        assert snap.get("Service", "default", "web") is not None
        assert snap.get("HTTPRoute", "default", "r1")["kind"] == "HTTPRoute"  # type: ignore[index]
        assert snap.get("Service", "default", "web")["apiVersion"] == "v1"  # type: ignore[index]

        kube.create(httproute("r2", host="b.example.com"))
        changed = httproute("r1", host="c.example.com")
        kube.update(changed)
        kube.delete("v1", "Service", "web", "default")
        await eventually(
            lambda: (
                len(state.snapshot().list("HTTPRoute")) == 2
                and state.snapshot().get("Service", "default", "web") is None
            )
        )
        await eventually(
            lambda: (
                state.snapshot().get("HTTPRoute", "default", "r1")["spec"]["hostnames"]  # type: ignore[index]
                == ["c.example.com"]
            )
        )
        # the old snapshot did not change under its reader
        assert [o["metadata"]["name"] for o in snap.list("HTTPRoute")] == ["r1"]
        assert snap.get("Service", "default", "web") is not None
        assert snap.version != state.snapshot().version


async def test_stored_objects_are_slimmed(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    route = httproute("r1")
    route["status"] = {"parents": [{"controllerName": "x"}]}
    kube.create(route)
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        stored = state.snapshot().get("HTTPRoute", "default", "r1")
        assert stored is not None
        assert "managedFields" not in stored["metadata"]
        assert "annotations" not in stored["metadata"]  # only last-applied was there
        assert "resourceVersion" not in stored["metadata"]
        assert "status" not in stored
        assert stored["metadata"]["labels"] == {"app": "api"}
        assert stored["spec"] == route["spec"]


async def test_version_is_stable_without_changes_and_ignores_status_writes(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.create(httproute("r1"))
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        first = state.snapshot()
        assert state.snapshot() is first  # cached: no work per request while nothing changes
        status_only = dict(kube.get(GW, "httproutes", "default", "r1") or {})
        status_only["status"] = {"parents": []}
        kube.update(status_only)
        kube.bookmark()
        await eventually(lambda: kube.watch_count("httproutes") == 1)
        kube.create(httproute("r2"))
        await eventually(lambda: state.snapshot().get("HTTPRoute", "default", "r2") is not None)
        assert int(state.snapshot().version) == int(first.version) + 1  # r2 only, not the status write


async def test_410_on_watch_relists_without_losing_or_duplicating(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    for i in range(5):
        kube.create(httproute(f"r{i}"))
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready and kube.watch_count("httproutes") == 1)
        lists_before = state.status()["kinds"]["HTTPRoute"]["relists"]
        # while the watch is down, objects change and the history is compacted away
        kube.drop_watches()
        kube.delete(f"{GW}/v1", "HTTPRoute", "r0", "default")
        kube.create(httproute("r9"))
        kube.update(httproute("r1", host="new.example.com"))
        kube.compact()
        await eventually(lambda: state.status()["kinds"]["HTTPRoute"]["relists"] > lists_before, what="re-list")
        names = [o["metadata"]["name"] for o in state.snapshot().list("HTTPRoute")]
        assert names == ["r1", "r2", "r3", "r4", "r9"]
        assert state.snapshot().get("HTTPRoute", "default", "r1")["spec"]["hostnames"] == [  # type: ignore[index]
            "new.example.com"
        ]
        await eventually(lambda: kube.watch_count("httproutes") == 1, what="watching again")
        kube.create(httproute("r10"))
        await eventually(lambda: len(state.snapshot().list("HTTPRoute")) == 6)


async def test_410_as_http_status_and_as_error_event_both_relist(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.create(httproute("r1"))
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready and kube.watch_count("httproutes") == 1)
        kube.expire_watches()  # ERROR event with code 410 on the open stream
        await eventually(lambda: state.status()["kinds"]["HTTPRoute"]["relists"] == 2)
        await eventually(lambda: kube.watch_count("httproutes") == 1)
        kube.gone_as_http = True
        kube.drop_watches()
        kube.create(httproute("r2"))
        kube.compact()
        await eventually(lambda: state.status()["kinds"]["HTTPRoute"]["relists"] == 3)
        assert [o["metadata"]["name"] for o in state.snapshot().list("HTTPRoute")] == ["r1", "r2"]


async def test_a_dropped_stream_resumes_from_the_last_version_without_relisting(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.create(httproute("r1"))
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready and kube.watch_count("httproutes") == 1)
        kube.drop_watches()
        kube.fail_next("watch", 503, times=2, plural="httproutes")  # and the server is briefly unavailable
        kube.create(httproute("r2"))
        kube.delete(f"{GW}/v1", "HTTPRoute", "r1", "default")
        await eventually(lambda: [o["metadata"]["name"] for o in state.snapshot().list("HTTPRoute")] == ["r2"])
        status = state.status()["kinds"]["HTTPRoute"]
        assert status["relists"] == 1  # resumed from the last resourceVersion: history replayed, no re-list
        assert status["errors"] >= 3
        watches = [r for r in kube.requests if "httproutes?" in r and "watch=true" in r]
        assert "resourceVersion=" in watches[-1] and "resourceVersion=&" not in watches[-1]


async def test_bookmarks_move_the_resume_point_past_other_kinds_changes(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready and kube.watch_count("httproutes") == 1)
        kube.create(service("unrelated"))  # moves the cluster's resourceVersion, not our kind
        kube.bookmark()
        bookmarked = kube.rv
        await eventually(lambda: state.status()["kinds"]["HTTPRoute"]["resourceVersion"] == str(bookmarked))
        kube.compact()  # history before the bookmark is gone: only the bookmark avoids a re-list
        await asyncio.sleep(0.05)
        kube.drop_watches()
        await eventually(lambda: sum("httproutes?" in r and "watch=true" in r for r in kube.requests) == 2)
        await eventually(lambda: kube.watch_count("httproutes") == 1)
        assert f"resourceVersion={bookmarked}" in [r for r in kube.requests if "watch=true" in r][-1]
        assert state.status()["kinds"]["HTTPRoute"]["relists"] == 1


async def test_a_clean_end_of_stream_rewatches(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready and kube.watch_count("httproutes") == 1)
        kube.end_watches()
        kube.create(httproute("r1"))
        await eventually(lambda: state.snapshot().get("HTTPRoute", "default", "r1") is not None)
        assert state.status()["kinds"]["HTTPRoute"]["errors"] == 0


async def test_a_crd_installed_after_start_is_picked_up(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube, tls=False)
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        assert state.status()["kinds"]["TLSRoute"] == {**state.status()["kinds"]["TLSRoute"], "served": False}
        assert "tlsroutes.gateway.networking.k8s.io" not in [c["metadata"]["name"] for c in state.crd_documents()]
        crd_version = state.crd_version
        kube.create(crd(GW, "TLSRoute", "tlsroutes", ("v1alpha2", "v1alpha3")))
        tls = {
            "apiVersion": f"{GW}/v1alpha3",
            "kind": "TLSRoute",
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {
                "hostnames": ["t.example.com"],
                "rules": [{"backendRefs": [{"name": "s", "port": 443}]}],
            },
        }
        kube.create(tls)
        await eventually(lambda: state.snapshot().get("TLSRoute", "default", "t") is not None, what="TLSRoute")
        status = state.status()["kinds"]["TLSRoute"]
        assert status["served"] and status["version"] == "v1alpha3"  # first candidate that is served
        assert state.snapshot().get("TLSRoute", "default", "t")["apiVersion"] == f"{GW}/v1alpha3"  # type: ignore[index]
        assert "tlsroutes.gateway.networking.k8s.io" in [c["metadata"]["name"] for c in state.crd_documents()]
        assert state.crd_version > crd_version
        assert state.ready


async def test_a_crd_upgrade_moves_the_watch_to_the_preferred_version(kube: FakeKube, api: Any) -> None:
    kube.create(crd(GW, "TLSRoute", "tlsroutes", ("v1alpha2",)))
    kube.create(
        {
            "apiVersion": f"{GW}/v1alpha2",
            "kind": "TLSRoute",
            "metadata": {"name": "t", "namespace": "n"},
            "spec": {},
        }
    )
    state = ClusterState(api, kinds=["TLSRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        assert state.status()["kinds"]["TLSRoute"]["version"] == "v1alpha2"
        upgraded = crd(GW, "TLSRoute", "tlsroutes", ("v1", "v1alpha2"))
        kube.update(
            {
                **upgraded,
                "metadata": kube.get(
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    "",
                    "tlsroutes.gateway.networking.k8s.io",
                )["metadata"],
            }
        )  # type: ignore[index]
        # readiness stays (the first sync is done); the kind's own "synced" says the v1 list completed
        kinds = lambda: state.status()["kinds"]["TLSRoute"]  # noqa: E731
        await eventually(lambda: kinds()["version"] == "v1" and kinds()["synced"])
        assert state.ready
        assert state.snapshot().get("TLSRoute", "n", "t")["apiVersion"] == f"{GW}/v1"  # type: ignore[index]
        kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", "tlsroutes.gateway.networking.k8s.io")
        await eventually(lambda: not state.status()["kinds"]["TLSRoute"]["served"])
        assert state.snapshot().list("TLSRoute") == ()


async def test_readiness_waits_for_every_first_list(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.fail_next("list", 500, times=3, plural="httproutes")
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.status()["kinds"]["HTTPRoute"]["watches"] == 1)
        seen_unready = not state.ready
        await eventually(lambda: state.ready)
        assert seen_unready
        body = state.status()
        assert body["ready"] is True
        assert body["kinds"]["HTTPRoute"]["synced"] and body["kinds"]["HTTPRoute"]["lastSync"]
        assert not body["kinds"]["TCPRoute"]["served"]  # not installed: not watched, does not block
        # after the first sync, a gateway naming a new secret never makes the whole state unready:
        # until the secret is listed, the gateway alone carries the problem
        kube.fail_next("list", 500, times=2, plural="secrets")
        gw = kube.create(gateway("gw", secrets=("late",)))
        await eventually(lambda: state.status()["kinds"]["Secret"]["errors"] >= 1, what="a failed secret list")
        assert state.ready
        assert "Secret default/late" in " ".join(state.reference_problems(gw))
        await eventually(lambda: state.reference_problems(gw) == [], what="the secret listed")
        assert state.ready
    assert not state.ready or state.ready  # cancellation is clean (no exception escaped above)


async def test_only_referenced_secrets_and_configmaps_are_watched(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.create(secret("used"))
    kube.create(secret("unused"))
    kube.create(secret("other-ns", "team"))
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ca", "namespace": "default"},
            "data": {"ca.crt": "x"},
        }
    )
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "noise", "namespace": "default"},
            "data": {"x": "y"},
        }
    )
    kube.create(gateway("gw", secrets=("used",)))
    kube.create(
        {
            "apiVersion": f"{GW}/v1",
            "kind": "BackendTLSPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                "validation": {
                    "hostname": "web",
                    "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                },
            },
        }
    )
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        # Readiness does not wait for a referenced object's own watch (an unreadable one only warns its
        # referrers), so wait for both reads before asserting that nothing else was read.
        await eventually(lambda: bool(state.snapshot().list("Secret")) and bool(state.snapshot().list("ConfigMap")),
                         what="the referenced Secret and ConfigMap")
        snap = state.snapshot()
        assert [o["metadata"]["name"] for o in snap.list("Secret")] == ["used"]
        assert [o["metadata"]["name"] for o in snap.list("ConfigMap")] == ["ca"]
        assert all("fieldSelector=metadata.name" in r for r in kube.requests if "/secrets" in r)
        # rotation is followed live
        kube.update(secret("used", value="bmV3"))
        await eventually(
            lambda: (
                state.snapshot().get("Secret", "default", "used")["data"]["tls.crt"]  # type: ignore[index]
                == "bmV3"
            )
        )
        # a gateway starts referencing a secret in another namespace; the old reference goes away
        kube.update(
            {
                **gateway("gw"),
                "spec": {
                    **gateway("gw")["spec"],
                    "listeners": [
                        {
                            "name": "https",
                            "port": 443,
                            "protocol": "HTTPS",
                            "tls": {"certificateRefs": [{"name": "other-ns", "namespace": "team"}]},
                        }
                    ],
                },
            }
        )
        await eventually(lambda: [o["metadata"]["name"] for o in state.snapshot().list("Secret")] == ["other-ns"])
        assert state.status()["kinds"]["Secret"]["watches"] == 1
        await eventually(lambda: kube.watch_count("secrets") == 1, what="the old secret's watch was stopped")


async def test_changed_fires_on_the_next_change_and_the_version_counts_it(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        before = state.version
        changed = state.changed
        assert not changed.is_set()
        kube.create(httproute("r1"))
        async with asyncio.timeout(5):
            await changed.wait()
        assert state.version == before + 1
        assert state.snapshot().version == str(state.version)
        assert not state.changed.is_set()  # a fresh event for the next waiter


async def test_live_crd_schemas_follow_the_served_crds(kube: FakeKube, api: Any) -> None:
    path = need_shared("gateway-api", "v1.6.1", "experimental-install.yaml")
    installed = [
        d
        for d in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if d and d["kind"] == "CustomResourceDefinition"
    ]
    for doc in installed:
        kube.create(doc)
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        kinds = state.status()["kinds"]
        assert {k: kinds[k]["version"] for k in ("HTTPRoute", "ReferenceGrant", "TLSRoute", "ListenerSet")} == {
            "HTTPRoute": "v1",
            "ReferenceGrant": "v1",
            "TLSRoute": "v1",
            "ListenerSet": "v1",
        }
        live = SchemaSet.from_documents(state.crd_documents())
        from_files = SchemaSet.from_documents(installed)
        assert sorted(live) == sorted(k for k in from_files if k[0] == GW) and len(live) > 10
        assert all(live.get(*k) == from_files.get(*k) for k in live)

        # a CRD upgrade (here: a tighter hostname limit) is served without a restart
        before = state.crd_version
        stored = kube.get("apiextensions.k8s.io", "customresourcedefinitions", "", f"httproutes.{GW}")
        assert stored is not None
        upgraded = copy.deepcopy(stored)
        schema = upgraded["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema["properties"]["spec"]["properties"]["hostnames"]["maxItems"] = 3
        kube.update(upgraded)
        await eventually(lambda: state.crd_version > before)
        spec = SchemaSet.from_documents(state.crd_documents()).get(GW, "v1", "HTTPRoute")
        assert spec is not None and spec["properties"]["spec"]["properties"]["hostnames"]["maxItems"] == 3


async def test_a_kind_that_cannot_be_listed_keeps_the_state_unready_and_says_why(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.fail_next("list", 403, times=10_000, plural="endpointslices")  # e.g. RBAC forgot EndpointSlices
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.status()["kinds"]["EndpointSlice"]["errors"] >= 2)
        status = state.status()
        assert not state.ready and status["ready"] is False
        assert "403" in status["kinds"]["EndpointSlice"]["lastError"]
        assert status["kinds"]["HTTPRoute"]["synced"] and not status["kinds"]["EndpointSlice"]["synced"]
        kube.failures.clear()  # the role is fixed
        await eventually(lambda: state.ready)
        assert state.status()["kinds"]["EndpointSlice"]["lastError"] is None


async def test_a_stream_that_ends_at_once_does_not_spin(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, kinds=["HTTPRoute"], resync_backoff_cap=0.2)
    async with running(state):
        await eventually(lambda: state.ready and kube.watch_count("httproutes") == 1)
        original = kube._watch

        async def ends_at_once(request: Any, res: Any, namespace: Any) -> Any:
            return web.Response(status=200, text="")  # an empty 200 stream

        kube._watch = ends_at_once  # type: ignore[method-assign]
        kube.end_watches()
        await asyncio.sleep(1.0)
        watches = sum("httproutes?" in r and "watch=true" in r for r in kube.requests)
        assert watches < 20, watches  # backed off (cap 0.2 s), not hundreds of reconnects a second
        kube._watch = original  # type: ignore[method-assign]
