"""Watches that are forbidden or failing: a problem of the objects that need them, or of the whole
state only when the cluster is lost (every watch failing past the staleness bound)."""

from __future__ import annotations

from typing import Any

from tests.cluster.clusterkit import eventually, gateway, install_gateway_api, running, secret
from tests.fakekube import FakeKube
from webhook.cluster import ClusterState
from webhook.cluster.reflectors import DEFAULT_BACKOFF_CAP, PERMANENT_BACKOFF_FACTOR, Collection, Reflector
from webhook.cluster.stores import Store

FAST = {"resync_backoff_cap": 0.05}


async def test_a_forbidden_referenced_secret_is_a_problem_of_its_referrers_only(kube: FakeKube, api: Any) -> None:
    # RBAC grants Secrets by resourceNames: "ok" is granted, shop/x is not
    install_gateway_api(kube)
    kube.create(secret("ok"))
    kube.create(secret("x", "shop"))
    kube.forbid("secrets", "shop", "x")
    denied = kube.create(gateway("gw", "shop", secrets=("x",)))
    fine = kube.create(gateway("gw2", secrets=("ok",)))
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.ready, what="ready although one referenced Secret is forbidden")
        assert state.why_not_ready() == ""
        problems = state.reference_problems(denied)
        assert len(problems) == 1 and problems[0].startswith("cannot read Secret shop/x: forbidden (HTTP 403: ")
        assert 'cannot list resource "secrets"' in problems[0]
        assert state.reference_problems(fine) == []
        status = state.status()
        assert status["reason"] is None and status["staleSeconds"] == 0
        assert [u.split(":")[0] for u in status["kinds"]["Secret"]["unreadable"]] == ["shop/x"]
        assert state.snapshot().get("Secret", "default", "ok") is not None
        # the forbidden watch keeps being retried (backed off), and heals once the role is fixed
        kube.allow("secrets", "shop", "x")
        await eventually(lambda: state.reference_problems(denied) == [], what="the granted secret read")
        assert state.snapshot().get("Secret", "shop", "x") is not None
        assert state.status()["kinds"]["Secret"]["unreadable"] == []


async def test_a_kind_forbidden_at_startup_says_so_instead_of_still_syncing(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    kube.forbid("endpointslices")
    state = ClusterState(api, **FAST)
    async with running(state):
        await eventually(lambda: state.status()["kinds"]["EndpointSlice"]["errors"] >= 1)
        assert not state.ready
        reason = state.why_not_ready()
        assert reason.startswith("cannot list EndpointSlice: forbidden (HTTP 403: endpointslices is forbidden"), reason
        assert "still syncing" not in reason
        assert state.status()["reason"] == reason
        kube.allow("endpointslices")
        await eventually(lambda: state.ready)


async def test_still_syncing_is_said_only_before_the_first_sync(kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, kinds=["HTTPRoute"], **FAST)
    assert state.why_not_ready().startswith("still syncing cluster state")
    async with running(state):
        await eventually(lambda: state.ready)
        # later failures of one kind keep the state ready: its last known objects still serve
        kube.fail_next("watch", 500, times=10**6, plural="httproutes")
        kube.fail_next("list", 500, times=10**6, plural="httproutes")
        kube.drop_watches()
        await eventually(lambda: state.status()["kinds"]["HTTPRoute"]["staleSeconds"] > 0)
        assert state.ready and state.why_not_ready() == ""


async def test_losing_every_watch_reports_staleness_and_stops_claiming_ready_past_the_bound(
        kube: FakeKube, api: Any) -> None:
    install_gateway_api(kube)
    state = ClusterState(api, kinds=["HTTPRoute", "Service"], stale_after=0.5, **FAST)
    async with running(state):
        await eventually(lambda: state.ready)
        assert state.staleness() == 0
        # the apiserver restarts: every stream is cut and every request fails for a while
        kube.fail_next("watch", 503, times=10**6)
        kube.fail_next("list", 503, times=10**6)
        kube.drop_watches()
        await eventually(lambda: state.staleness() > 0, what="staleness counted")
        await eventually(lambda: not state.ready, what="unready past the bound")
        reason = state.why_not_ready()
        assert "stale (every watch failing; bound 0.5s)" in reason and "HTTP 503" in reason, reason
        assert state.staleness() > 0.5 and state.status()["staleSeconds"] >= 0.5
        kube.failures.clear()  # the apiserver is back
        await eventually(lambda: state.ready, what="ready again once a watch works")
        assert state.staleness() == 0


def test_reconnect_backoff_is_capped_at_a_few_seconds() -> None:
    # an apiserver restart used to be followed up to ~27 s late (a 30 s cap)
    reflector = Reflector(None, Collection("HTTPRoute", "v1", "/x"), Store("HTTPRoute"),  # type: ignore[arg-type]
                          slimmer=lambda raw, c: None)
    delays = [reflector._failed(ConnectionResetError(), "reset") for _ in range(40)]
    assert max(delays) <= DEFAULT_BACKOFF_CAP <= 5.0
    from webhook.cluster.clients import ApiError

    forbidden = [reflector._failed(ApiError(403, "forbidden"), "forbidden") for _ in range(40)]
    assert DEFAULT_BACKOFF_CAP < max(forbidden) <= DEFAULT_BACKOFF_CAP * PERMANENT_BACKOFF_FACTOR
