"""The shrink guard (webhook.reconcile.shrinkguard) in the reconcile loop, against the fake API server: a drop the
source cannot vouch for (a re-list that came back short, a lost CRD) is held and last-known-good stays
live; the same drop seen as watch DELETED events is promoted; ``allow`` promotes a deliberate mass delete."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from haproxy_check.descriptions import BackendDesc, Description, MapDesc
from haproxy_check.runtime.promotion import Promoter
from tests.cluster.clusterkit import install_gateway_api
from tests.fakekube import FakeKube
from tests.reconcile.conftest import DATA
from validators.states import MemoryState
from webhook.cluster import ClusterState
from webhook.gate.gates import Gate
from webhook.loading import inputs
from webhook.reconcile import shrinkguard
from webhook.reconcile.reconciler import Reconciler, Result

pytestmark = pytest.mark.haproxy

ROUTES = 24
GW = "gateway.networking.k8s.io"


def route(i: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GW}/v1", "kind": "HTTPRoute",
        "metadata": {"name": f"r{i}", "namespace": "capture"},
        "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"h{i}.example.com"],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/p{i}"}}],
                            "backendRefs": [{"name": "web", "port": 8080}]}]},
    }


def populate(kube: FakeKube) -> None:
    install_gateway_api(kube)
    for obj in [i.obj for i in inputs.load([str(DATA / "state")])]:
        kube.create(obj)
    for i in range(ROUTES):
        kube.create(route(i))


def drop_silently(kube: FakeKube, names: list[str]) -> None:
    """The objects vanish from what a list returns, with no watch event: a short list."""
    bucket = kube.objects[(GW, "httproutes")]
    for name in names:
        del bucket[("capture", name)]


async def until(check: Any, within: float = 20) -> None:
    async with asyncio.timeout(within):
        while True:
            if check():
                return
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def following(api: Any) -> AsyncIterator[ClusterState]:
    cluster = ClusterState(api, resync_backoff_cap=0.05)
    task = asyncio.create_task(cluster.run())
    try:
        assert await cluster.first_sync(20) == ""
        yield cluster
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def held_gauge() -> float:
    return REGISTRY.get_sample_value("routegate_reconcile_shrink_held") or 0.0


def routes_in(cluster: ClusterState) -> int:
    return len(cluster.snapshot().list("HTTPRoute"))


async def test_a_short_relist_is_held_and_last_known_good_stays(kube: FakeKube, api: Any, gate: Gate,
                                                                  tmp_path: Path) -> None:
    populate(kube)
    promoter = Promoter(tmp_path / "out")
    reconciler = Reconciler(gate, promoter)
    async with following(api) as cluster:
        first = await reconciler.reconcile(cluster.snapshot())
        assert first.result is Result.PROMOTED
        drop_silently(kube, [f"r{i}" for i in range(20)])
        kube.compact()
        kube.expire_watches()  # the reflector re-lists and gets the short list
        await until(lambda: routes_in(cluster) == ROUTES - 20)
        held = await reconciler.reconcile(cluster.snapshot())
        assert held.result is Result.HELD
        assert promoter.last_known_good() == first.promoted
        [why] = held.rejection
        assert "mass drop not promoted" in why and "20 objects left the state without a watch DELETED event" in why
        assert "HTTPRoute capture/r0" in why and "--allow-mass-delete" in why
        assert held_gauge() == 1
        # the objects come back (the next list is whole): promoted, and the guard lets go
        for i in range(20):
            kube.create(route(i))
        await until(lambda: routes_in(cluster) == ROUTES)
        again = await reconciler.reconcile(cluster.snapshot())
        assert again.result in (Result.UNCHANGED, Result.PROMOTED) and held_gauge() == 0


async def test_deletions_seen_as_watch_events_are_promoted(kube: FakeKube, api: Any, gate: Gate,
                                                           tmp_path: Path) -> None:
    populate(kube)
    promoter = Promoter(tmp_path / "out")
    reconciler = Reconciler(gate, promoter)
    async with following(api) as cluster:
        assert (await reconciler.reconcile(cluster.snapshot())).result is Result.PROMOTED
        for i in range(20):
            kube.delete(f"{GW}/v1", "HTTPRoute", f"r{i}", "capture")
        await until(lambda: routes_in(cluster) == ROUTES - 20)
        outcome = await reconciler.reconcile(cluster.snapshot())
        assert outcome.result is Result.PROMOTED, outcome.rejection
        text = (promoter.output / "haproxy.cfg").read_text() + "".join(
            p.read_text() for p in (promoter.output / "maps").iterdir())
        assert "h3.example.com" not in text and "h23.example.com" in text


async def test_the_override_promotes_a_short_list(kube: FakeKube, api: Any, gate: Gate, tmp_path: Path) -> None:
    populate(kube)
    promoter = Promoter(tmp_path / "out")
    reconciler = Reconciler(gate, promoter, shrink=shrinkguard.Limits(allow=True))
    async with following(api) as cluster:
        assert (await reconciler.reconcile(cluster.snapshot())).result is Result.PROMOTED
        drop_silently(kube, [f"r{i}" for i in range(20)])
        kube.compact()
        kube.expire_watches()
        await until(lambda: routes_in(cluster) == ROUTES - 20)
        assert (await reconciler.reconcile(cluster.snapshot())).result is Result.PROMOTED


async def test_a_lost_crd_is_held_even_when_its_objects_were_reported_deleted(
        kube: FakeKube, api: Any, gate: Gate, tmp_path: Path) -> None:
    populate(kube)
    promoter = Promoter(tmp_path / "out")
    reconciler = Reconciler(gate, promoter)
    async with following(api) as cluster:
        first = await reconciler.reconcile(cluster.snapshot())
        assert first.result is Result.PROMOTED
        kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"httproutes.{GW}")
        await until(lambda: routes_in(cluster) == 0)
        held = await reconciler.reconcile(cluster.snapshot())
        assert held.result is Result.HELD and promoter.last_known_good() == first.promoted
        assert "HTTPRoute: no longer served" in held.rejection[0]


def description(routes: int, backends: int) -> Description:
    return Description(backends=tuple(BackendDesc(f"b{i}") for i in range(backends)),
                       maps=(MapDesc("maps/rule-backend.map", False, tuple(f"r{i} b" for i in range(routes))),
                             MapDesc("maps/host.map", False, tuple(f"h{i} h{i}" for i in range(500)))))


def test_the_limits_share_and_minimum() -> None:
    limits = shrinkguard.Limits(share=0.5, minimum=10)
    live = shrinkguard.Counts(100, 4)
    assert shrinkguard.mass_drop(live, shrinkguard.Counts(50, 4), limits) == []  # half is not more than half
    assert shrinkguard.mass_drop(live, shrinkguard.Counts(49, 4), limits) == ["routing entries 100 -> 49"]
    assert shrinkguard.mass_drop(shrinkguard.Counts(12, 4), shrinkguard.Counts(3, 0), limits) == []  # < 10 each
    assert shrinkguard.mass_drop(shrinkguard.Counts(0, 40), shrinkguard.Counts(0, 10), limits) == [
        "backends 40 -> 10"]


def test_a_fresh_process_cannot_vouch_for_a_drop_from_an_earlier_promotion() -> None:
    guard = shrinkguard.ShrinkGuard()
    held = guard.judge(description(40, 20), description(0, 0), MemoryState(), None)
    assert held is not None and "before this process started" in held.message
    assert "live has 40 routing entries, 20 backends, the candidate 0 routing entries, 0 backends" in held.message
    assert shrinkguard.ShrinkGuard(shrinkguard.Limits(allow=True)).judge(
        description(40, 20), description(0, 0), MemoryState(), None) is None
    assert guard.judge(None, description(0, 0), MemoryState(), None) is None  # nothing live to protect


def test_objects_removed_from_a_source_without_watches_are_not_vouched_for() -> None:
    guard = shrinkguard.ShrinkGuard()
    objects = [copy.deepcopy(route(i)) for i in range(3)]
    guard.live_is(MemoryState(objects))
    held = guard.judge(description(40, 20), description(10, 5), MemoryState(objects[:1]), None)
    assert held is not None and "2 objects left the state of a source without watches" in held.message


def test_only_routing_maps_count_as_routes() -> None:
    """Host, filter and weight maps change size with how routes are written (weights to one backend drop 100
    entries): only served rules, Route CRD matches and SNI names count."""
    live = Description(maps=(MapDesc("maps/rule-backend.map", False, ("a x", "b y")),
                             MapDesc("maps/weighted-multi-backend.map", False, tuple(f"a{i} x" for i in range(100))),
                             MapDesc("maps/tls-sni-443.map", False, ("s.example.com be",)),
                             MapDesc("maps/route-crd-exact.map", False, ("/a be",))))
    assert shrinkguard.Counts.of(live) == shrinkguard.Counts(4, 0)
