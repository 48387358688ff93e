"""Warning-level findings on stored objects become Kubernetes Warning Events too (not only denials), once:
a second reconcile of the same state writes nothing new (webhook.reconcile.events deduplicates)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from haproxy_check.runtime.promotion import Promoter
from tests.fakekube import FakeKube
from tests.reconcile.conftest import DATA
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.loading import inputs
from webhook.reconcile.events import EventRecorder
from webhook.reconcile.reconciler import Reconciler, Result

pytestmark = pytest.mark.haproxy


def route(name: str, rule: dict[str, Any]) -> dict[str, Any]:
    served = {"matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}],
              "backendRefs": [{"name": "web", "port": 8080}]}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "capture", "uid": f"uid-{name}"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"{name}.example.com"],
                     "rules": [served, {**served, **rule}]}}


async def test_warnings_on_stored_objects_are_events_once(kube: FakeKube, api: Any, gate: Gate,
                                                          tmp_path: Path) -> None:
    mirrored = route("mirrored", {"filters": [
        {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "web-canary", "port": 8080}}}]})
    slow = route("slow", {"timeouts": {"request": "10s"}})  # RG0113: a warning no seed names an event for
    state = MemoryState([*(i.obj for i in inputs.load([str(DATA / "state")])), mirrored, slow])
    reconciler = Reconciler(gate, Promoter(tmp_path / "out"), recorder=EventRecorder(api))
    assert (await reconciler.reconcile(state)).result is Result.PROMOTED
    events = sorted(kube.objects[("", "events")].values(), key=lambda e: e["involvedObject"]["name"])
    assert [(e["involvedObject"]["name"], e["involvedObject"]["uid"], e["type"], e["reason"]) for e in events] == [
        ("mirrored", "uid-mirrored", "Warning", "RequestMirrorUnsupported"),
        ("slow", "uid-slow", "Warning", "RoutegateRG0113")]
    assert events[0]["message"].startswith("spec.rules[1].filters[0].type: RequestMirror is not supported")
    assert (await reconciler.reconcile(state)).result is Result.UNCHANGED
    assert len(kube.objects[("", "events")]) == 2 and all(e["count"] == 1 for e in events)
