"""The reconcile gate end to end: real files, real haproxy -c, the fake API server for Events.

valid state -> promoted; a new stored object haproxy -c rejects -> left out (webhook.reconcile.isolating), so the
rest is what is live already: nothing written, an Event on the object; fixed -> promoted with it; a
stored route with an invalid session name -> promoted without its session persistence (seed 004), with
its Event; the same state again -> unchanged, no Event repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from haproxy_check.runtime.promotion import Promoted, Promoter
from tests.fakekube import FakeKube
from tests.reconcile.conftest import DATA
from webhook.gate.gates import Gate
from webhook.reconcile.events import EventRecorder
from webhook.reconcile.filesources import FileSource
from webhook.reconcile.following import follow
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Reconciler, Result

FIXED_REGEX = (DATA / "inputs" / "bad-regex.yaml").read_text().replace("/a{2,1}", "/a{1,2}")


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _events(kube: FakeKube) -> list[dict[str, Any]]:
    return list(kube.objects[("", "events")].values())


Running = tuple[Path, FileSource, Reconciler, list[Any]]


@pytest.fixture
async def running(tmp_path: Path, gate: Gate, api: Any) -> AsyncIterator[Running]:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(DATA / "state" / "cluster.yaml", state / "cluster.yaml")
    source = FileSource(str(state), poll=0.05)
    hooks: list[tuple[Promoted | None, Promoted]] = []

    async def after(previous: Promoted | None, new: Promoted) -> None:
        hooks.append((previous, new))

    reconciler = Reconciler(gate, Promoter(tmp_path / "out", keep=3), recorder=EventRecorder(api),
                            on_promoted=[after])
    tasks = [asyncio.ensure_future(source.run()),
             asyncio.ensure_future(follow(source, reconciler, debounce=0.1, poll=0.05))]
    try:
        yield state, source, reconciler, hooks
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _settled(source: FileSource, reconciler: Reconciler, after: str | None) -> Result:
    """Wait until the loop has reconciled a state newer than ``after`` and the files stopped changing."""
    async with asyncio.timeout(60):
        while True:
            await asyncio.sleep(0.05)
            last = reconciler.last
            if (source.ready and last is not None and last.state_version != after
                    and last.state_version == source.snapshot().version):
                return last.result


async def test_valid_broken_fixed_and_left_out(running: Running, tmp_path: Path, kube: FakeKube) -> None:
    state, source, reconciler, hooks = running
    out = tmp_path / "out"
    rejected = _metric("routegate_promotions_rejected_total")

    # valid -> promoted
    assert await _settled(source, reconciler, None) is Result.PROMOTED
    first = reconciler.promoter.last_known_good()
    assert first is not None and first.state_version == source.snapshot().version
    live_cfg = (out / "haproxy.cfg").read_bytes()
    assert hooks == [(None, first)]
    # the Gateway API status of what was promoted, beside it (validators.crossobject.statuses)
    promoted_status = json.loads((out / "..data" / "statuses.json").read_text())
    (http,) = promoted_status["Gateway capture/edge"]["listeners"]
    assert http["name"] == "http" and http["attachedRoutes"] == 0, http
    assert {c["type"]: c["status"] for c in http["conditions"]}["Programmed"] == "True", http

    # a new stored route haproxy -c rejects -> left out; the rest is what is live: nothing written, Event
    version = source.snapshot().version
    shutil.copy(DATA / "inputs" / "bad-regex.yaml", state / "broken.yaml")
    assert await _settled(source, reconciler, version) is Result.UNCHANGED
    assert reconciler.promoter.last_known_good() == first
    assert (out / "haproxy.cfg").read_bytes() == live_cfg
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("..v")) == [first.version]
    assert _metric("routegate_promotions_rejected_total") == rejected
    assert _metric("routegate_objects_at_fault", kind="HTTPRoute") == 1
    assert _metric("routegate_isolated_objects", treatment="left-out") == 1
    outcome = reconciler.last
    assert outcome is not None and [str(r) for r in outcome.at_fault] == ["HTTPRoute capture/broken"]
    [(left, finding)] = [(x, f) for x in outcome.left_out for f in x.findings]
    assert left.treatment is Treatment.LEFT_OUT and finding.code == "RG0800"
    assert finding.field == "spec.rules[1].matches[0].path.value" and "a{2,1}" in finding.message
    [event] = _events(kube)
    assert event["type"] == "Warning" and event["reason"] == "HAProxyRejected"
    assert event["involvedObject"] == {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                                       "name": "broken", "namespace": "capture"}
    assert event["metadata"]["namespace"] == "capture" and "a{2,1}" in event["message"]
    assert event["message"].endswith("in the HAProxy configuration: left out (not in the configuration)")

    # fixed -> promoted again
    version = source.snapshot().version
    (state / "broken.yaml").write_text(FIXED_REGEX)
    assert await _settled(source, reconciler, version) is Result.PROMOTED
    second = reconciler.promoter.last_known_good()
    assert second is not None and second.version != first.version
    assert b"broken" in (out / "haproxy.cfg").read_bytes()
    assert hooks[-1] == (first, second)
    assert _metric("routegate_objects_at_fault", kind="HTTPRoute") == 0

    # an invalid session name -> promoted without session persistence, Event with the seed's reason
    version = source.snapshot().version
    shutil.copy(DATA / "inputs" / "bad-session.yaml", state / "sticky.yaml")
    assert await _settled(source, reconciler, version) is Result.PROMOTED
    cfg = (out / "haproxy.cfg").read_text()
    # the route is served (the renderer alone would leave the whole route out), without a cookie
    assert "backend gw_h_capture_sticky_web_8080" in cfg and "# HTTPRoute capture/sticky rule 0" in cfg
    assert "dynamic-cookie-key" not in cfg and "\n    cookie " not in cfg
    outcome = reconciler.last
    assert outcome is not None and [(str(x.ref), x.what) for x in outcome.left_out] == [
        ("HTTPRoute capture/sticky", "no session persistence on spec.rules[0]")]
    session = [e for e in _events(kube) if e["reason"] == "InvalidSessionPersistence"]
    assert len(session) == 1 and session[0]["involvedObject"]["name"] == "sticky"
    assert "spec.rules[0].sessionPersistence.sessionName" in session[0]["message"]
    assert _metric("routegate_violations", code="RG0101", severity="deny") == 1

    # the same state again: nothing to write, no Event repeated
    written = len(_events(kube))
    again = await reconciler.reconcile(source.snapshot())
    assert again.result is Result.UNCHANGED
    assert len(_events(kube)) == written
    assert [e["count"] for e in _events(kube)] == [1] * written
