"""``--gateway-class`` scopes reconcile as it scopes the webhook (issue 25, §6): another controller's
route (every parentRef names a Gateway of a foreign class) and a BackendTLSPolicy only such routes use
are not audited, get no finding, no Event and no status, even when they break every rule; our own
objects still do.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from haproxy_check.results import HAProxyBinary
from haproxy_check.runtime.promotion import Promoter
from tests.fakekube import FakeKube
from tests.reconcile.conftest import DATA
from validators.objects import Obj, Ref
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.loading import inputs
from webhook.reconcile.events import EventRecorder
from webhook.reconcile.reconciler import Reconciler, Result

GW = "gateway.networking.k8s.io"


def _class(name: str, controller: str) -> Obj:
    return {"apiVersion": f"{GW}/v1", "kind": "GatewayClass", "metadata": {"name": name},
            "spec": {"controllerName": controller}}


def _route(name: str, parent: str, *, session: str) -> Obj:
    """A route that breaks the rules: a session name with a space (RG0101, a denial) on a Service
    whose BackendTLSPolicy cannot be verified."""
    return {"apiVersion": f"{GW}/v1", "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "capture"},
            "spec": {"parentRefs": [{"name": parent}], "hostnames": [f"{name}.example.com"],
                     "rules": [{"backendRefs": [{"name": f"svc-{name}", "port": 8080}],
                                "sessionPersistence": {"sessionName": "a b", "type": "Cookie"}}]}}


def _service(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "capture"},
            "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}}


def _policy(name: str, service: str) -> Obj:
    # two subjectAltNames: HAProxy verifies one name only (RG0107, a denial)
    return {"apiVersion": f"{GW}/v1", "kind": "BackendTLSPolicy", "metadata": {"name": name, "namespace": "capture"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": service}],
                     "validation": {"hostname": "web.example.com", "wellKnownCACertificates": "System",
                                    "subjectAltNames": [{"type": "Hostname", "hostname": "web.example.com"},
                                                        {"type": "Hostname", "hostname": "b.example.com"}]}}}


def _state() -> MemoryState:
    objects: list[Obj] = [copy.deepcopy(dict(i.obj)) for i in inputs.load([str(DATA / "state")])]
    edge = next(o for o in objects if o["kind"] == "Gateway")
    foreign = copy.deepcopy(edge)
    foreign["metadata"]["name"] = "theirs-gw"
    foreign["spec"]["gatewayClassName"] = "other"
    foreign["spec"]["listeners"][0]["port"] = 8081
    objects += [_class("haproxy", "routegate.io/gateway"), _class("other", "example.com/other"), foreign,
                _route("mine", "edge", session="a b"), _service("svc-mine"), _policy("tls-mine", "svc-mine"),
                _route("theirs", "theirs-gw", session="a b"), _service("svc-theirs"),
                _policy("tls-theirs", "svc-theirs")]
    return MemoryState(objects, version="scoped")


async def test_other_controllers_objects_get_no_finding_event_or_status(binary: HAProxyBinary, tmp_path: Path,
                                                                        kube: FakeKube, api: Any) -> None:
    gate = assembly.build_gate(binary, assembly.GateSettings(gateway_classes=("haproxy",)))
    reconciler = Reconciler(gate, Promoter(tmp_path / "out"), recorder=EventRecorder(api))
    outcome = await reconciler.reconcile(_state())
    assert outcome.result is Result.PROMOTED, outcome.rejection

    theirs = {Ref("HTTPRoute", "capture", "theirs"), Ref("BackendTLSPolicy", "capture", "tls-theirs"),
              Ref("Gateway", "capture", "theirs-gw")}
    mine = {Ref("HTTPRoute", "capture", "mine"), Ref("BackendTLSPolicy", "capture", "tls-mine")}
    faults = {f.ref for f in outcome.faults}
    assert faults == mine, faults  # ours are still judged: the test would pass vacuously otherwise
    assert not theirs & {x.ref for x in outcome.left_out}
    involved = {(e["involvedObject"]["kind"], e["involvedObject"]["name"])
                for e in kube.objects[("", "events")].values()}
    assert involved == {("HTTPRoute", "mine"), ("BackendTLSPolicy", "tls-mine")}, involved
    promoted = json.loads((tmp_path / "out" / "..data" / "statuses.json").read_text())
    assert not {str(r) for r in theirs} & set(promoted), sorted(promoted)
    assert "HTTPRoute capture/mine" in promoted

    # what ``routegate check --kubeconfig --all`` reports is scoped the same way
    judged = await reconciler.judge(_state())
    assert {f.ref for f in judged.faults} == mine
