"""One leader-election module (certs/leaderelection.py) for certificates and statuses: against the fake
apiserver's Leases, one candidate leads, a leader that cannot renew stops acting before another may take
over, a released Lease is taken at once, and the status writer writes only while its process leads."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from certs.leaderelection import Elector
from tests.cluster.clusterkit import eventually
from tests.fakekube import FakeKube
from validators.objects import Ref
from validators.views.scopes import Scope
from webhook.reconcile import statusshapes
from webhook.reconcile.statuswriter import OutcomeStatuses, StatusWriter

NS = "routegate-system"


class Clocks:
    def __init__(self) -> None:
        self.wall = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds


def _elector(api: Any, identity: str, clocks: Clocks) -> Elector:
    return Elector(api, NS, "routegate-statuses", identity, duration=15, now=lambda: clocks.wall,
                   clock=lambda: clocks.mono)


def _lease(kube: FakeKube) -> dict[str, Any]:
    lease = kube.get("coordination.k8s.io", "leases", NS, "routegate-statuses")
    assert lease is not None
    return lease


async def test_one_leads_a_silent_leader_stops_acting_before_the_lease_can_be_taken(kube: FakeKube, api: Any) -> None:
    clocks = Clocks()
    a, b = _elector(api, "a", clocks), _elector(api, "b", clocks)
    assert await a.try_acquire() and a.leading
    assert not await b.try_acquire() and not b.leading
    clocks.advance(5)
    assert await a.try_acquire() and not await b.try_acquire()
    assert _lease(kube)["spec"]["holderIdentity"] == "a"
    clocks.advance(10.5)  # a could not renew for 10.5 s: past its renew deadline (10 s), not yet expired (15 s)
    assert not a.leading
    assert not await b.try_acquire()
    clocks.advance(5)  # now expired: b takes it over
    assert await b.try_acquire() and b.leading
    assert _lease(kube)["spec"]["holderIdentity"] == "b" and _lease(kube)["spec"]["leaseTransitions"] == 1
    assert not await a.try_acquire() and not a.leading


async def test_a_released_lease_is_taken_at_once(kube: FakeKube, api: Any) -> None:
    clocks = Clocks()
    a, b = _elector(api, "a", clocks), _elector(api, "b", clocks)
    assert await a.try_acquire()
    await a.release()
    assert not a.leading and _lease(kube)["spec"]["holderIdentity"] == ""
    assert await b.try_acquire()


async def test_two_candidates_racing_for_the_same_lease_version_cannot_both_win(kube: FakeKube, api: Any) -> None:
    clocks = Clocks()
    a, b = _elector(api, "a", clocks), _elector(api, "b", clocks)
    assert await b.try_acquire()
    await b.release()
    seen_by_a = await a._read()  # a reads the free Lease ...
    assert await b.try_acquire()  # ... b takes it first ...

    async def stale() -> dict[str, Any] | None:
        return seen_by_a

    a._read = stale  # type: ignore[method-assign]
    assert not await a.try_acquire()  # ... and a's write, with the resourceVersion it read, gets 409
    assert not a.leading and _lease(kube)["spec"]["holderIdentity"] == "b"


async def test_the_status_writer_writes_only_while_its_process_leads(kube: FakeKube, api: Any, tmp_path: Path) -> None:
    from tests.cluster.clusterkit import GW, install_gateway_api

    install_gateway_api(kube)
    kube.create({"apiVersion": f"{GW}/v1", "kind": "GatewayClass", "metadata": {"name": "haproxy"},
                 "spec": {"controllerName": "example.net/routegate"}})
    clocks = Clocks()
    other = _elector(api, "other-replica", clocks)
    assert await other.try_acquire()
    ours = _elector(api, socket.gethostname(), clocks)
    writer = StatusWriter(api)
    statuses = OutcomeStatuses(writer, Scope.of(["haproxy"]), tmp_path, elector=ours)
    target = statusshapes.Target(Ref("GatewayClass", "", "haproxy"), f"{GW}/v1", "gatewayclasses", 1,
                                 {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                                                  "message": "Accepted", "observedGeneration": 1}]})
    writer.submit([target])
    assert "another process leads" in await statuses.flush_once()
    assert writer.pending == 1 and "status" not in (kube.get(GW, "gatewayclasses", "", "haproxy") or {})
    await other.release()
    assert await statuses.flush_once() == ""
    written = kube.get(GW, "gatewayclasses", "", "haproxy")
    assert written is not None and written["status"]["conditions"][0]["reason"] == "Accepted"
    assert _lease(kube)["spec"]["holderIdentity"] == ""  # --once gives the lead back



async def test_a_stopped_writer_gives_its_lease_back(kube: FakeKube, api: Any, tmp_path: Path) -> None:
    """Cancelling the writer's task waits for the election to give the Lease up (a cancelled
    asyncio.gather would return first, and the client would be closed under the release)."""
    import asyncio

    elector = Elector(api, NS, "routegate-statuses", "me")
    task = asyncio.ensure_future(OutcomeStatuses(StatusWriter(api), Scope(), tmp_path, elector=elector).run())
    await eventually(lambda: elector.leading, within=10, what="the lead")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _lease(kube)["spec"]["holderIdentity"] == ""


async def test_a_process_that_takes_the_lead_checks_every_status_again(kube: FakeKube, api: Any) -> None:
    """What this process wrote as leader may have been overwritten under another leader: on taking the
    lead again, every wanted status is read again and written where it differs (no new reconcile needed)."""
    from tests.cluster.clusterkit import GW, install_gateway_api

    install_gateway_api(kube)
    kube.create({"apiVersion": f"{GW}/v1", "kind": "GatewayClass", "metadata": {"name": "haproxy"},
                 "spec": {"controllerName": "example.net/routegate"}})
    leading = [True]
    writer = StatusWriter(api, leader=lambda: leading[0])
    target = statusshapes.Target(Ref("GatewayClass", "", "haproxy"), f"{GW}/v1", "gatewayclasses", 1,
                                 {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                                                  "message": "Accepted", "observedGeneration": 1}]})
    writer.submit([target], complete=True)
    assert await writer.flush() == 0
    leading[0] = False
    assert await writer.flush() == 0  # a follower: nothing to do
    kube.write_status(GW, "gatewayclasses", "", "haproxy", {"conditions": []})  # the other leader's view
    writer.submit([target], complete=True)  # unchanged: remembered as written, no request
    assert writer.pending == 0
    leading[0] = True
    assert await writer.flush() == 0
    stored = kube.get(GW, "gatewayclasses", "", "haproxy")
    assert stored is not None and stored["status"]["conditions"][0]["reason"] == "Accepted"
