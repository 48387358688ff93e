"""Gateway API statuses written to the API by the process that promotes (webhook/reconcile/statuswriter.py),
against the fake apiserver's status subresource: every kind with our controllerName and observedGeneration,
nothing rewritten when nothing changed, other controllers' entries left alone, 409 retried, 403 counted
without holding promotion back, held-back objects not Accepted."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from haproxy_check.results import HAProxyBinary
from haproxy_check.runtime.promotion import Promoter
from tests.cluster.clusterkit import GW, install_gateway_api
from tests.fakekube import FakeKube, crd
from tests.render_l4.conftest import ca_config_map
from validators.objects import Obj
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.reconcile.reconciler import Reconciler, Result
from webhook.reconcile.statusshapes import BUNDLE_VERSION
from webhook.reconcile.statuswriter import OutcomeStatuses, StatusWriter

pytestmark = pytest.mark.haproxy

OURS = "example.net/routegate"
BUNDLE = "v1.6.1"
THEIRS = "example.com/other"

OBJECTS = f"""
apiVersion: {GW}/v1
kind: GatewayClass
metadata: {{name: haproxy}}
spec: {{controllerName: {OURS}}}
---
apiVersion: {GW}/v1
kind: GatewayClass
metadata: {{name: other}}
spec: {{controllerName: {THEIRS}}}
---
apiVersion: {GW}/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  gatewayClassName: haproxy
  allowedListeners: {{namespaces: {{from: Same}}}}
  listeners:
    - {{name: http, protocol: HTTP, port: 80}}
---
apiVersion: {GW}/v1
kind: Gateway
metadata: {{name: theirs, namespace: default}}
spec:
  gatewayClassName: other
  listeners:
    - {{name: http, protocol: HTTP, port: 80}}
---
apiVersion: {GW}/v1
kind: ListenerSet
metadata: {{name: extra, namespace: default}}
spec:
  parentRef: {{name: edge}}
  listeners:
    - {{name: db, protocol: TCP, port: 9000}}
---
apiVersion: {GW}/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{{name: edge, sectionName: http}}, {{name: theirs}}]
  hostnames: [shop.example.com]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /web}}}}]
      backendRefs: [{{name: web, port: 8080}}]
    - matches: [{{path: {{type: PathPrefix, value: /cm}}}}]
      backendRefs: [{{name: secure-cm, port: 443}}]
---
apiVersion: {GW}/v1
kind: TCPRoute
metadata: {{name: db, namespace: default}}
spec:
  parentRefs: [{{kind: ListenerSet, name: extra}}]
  rules: [{{backendRefs: [{{name: web, port: 8080}}]}}]
---
apiVersion: {GW}/v1
kind: BackendTLSPolicy
metadata: {{name: cm, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: secure-cm}}]
  validation:
    hostname: backend.example.com
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec: {{ports: [{{name: http, port: 8080}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: secure-cm, namespace: default}}
spec: {{ports: [{{name: https, port: 443}}]}}
"""

FOREIGN_ENTRY = {"parentRef": {"group": GW, "kind": "Gateway", "namespace": "default", "name": "theirs"},
                 "controllerName": THEIRS,
                 "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}


@pytest.fixture(scope="module")
def scoped_gate(binary: HAProxyBinary) -> Gate:
    return assembly.build_gate(binary, assembly.GateSettings(gateway_classes=("haproxy",)))


def _populate(kube: FakeKube) -> None:
    install_gateway_api(kube)
    classes = copy.deepcopy(kube.get("apiextensions.k8s.io", "customresourcedefinitions", "",
                                     f"gatewayclasses.{GW}"))
    assert classes is not None
    classes["metadata"]["annotations"] = {BUNDLE_VERSION: BUNDLE}  # as the release's install.yaml sets it
    kube.update(classes)
    kube.create(crd(GW, "ListenerSet", "listenersets", ("v1",)))
    kube.create(crd(GW, "TCPRoute", "tcproutes", ("v1",)))
    for obj in [*yaml.safe_load_all(OBJECTS), ca_config_map("backend-ca")]:
        kube.create(obj)
    kube.write_status(GW, "httproutes", "default", "web", {"parents": [FOREIGN_ENTRY]})


def _state(kube: FakeKube, version: str = "1") -> MemoryState:
    """What the cluster watch gives reconcile: the stored objects without their status."""
    objects: list[Obj] = []
    for bucket in kube.objects.values():
        for obj in bucket.values():
            if obj.get("kind") in ("CustomResourceDefinition", "Event"):
                continue
            out = {k: v for k, v in copy.deepcopy(obj).items() if k != "status"}
            objects.append(out)
    return MemoryState(objects, version=version)


def _times() -> Any:
    counter = itertools.count()
    return lambda: f"2026-12-03T10:{next(counter) // 60:02d}:{next(counter) % 60:02d}Z"


def _status(kube: FakeKube, plural: str, name: str, namespace: str = "default") -> Any:
    obj = kube.get(GW, plural, namespace, name)
    assert obj is not None
    return obj.get("status")


def _conditions(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


def _writes(kube: FakeKube) -> list[str]:
    return [r for r in kube.requests if r.startswith(("PUT", "PATCH")) and "/status" in r]


def _count(outcome: str) -> float:
    return REGISTRY.get_sample_value("routegate_status_writes_total", {"outcome": outcome}) or 0.0


def _reconciler(gate: Gate, tmp_path: Path, api: Any, **hook: Any) -> tuple[Reconciler, StatusWriter]:
    writer = StatusWriter(api, now=_times(), backoff=0.01)
    output = tmp_path / "out"
    hook.setdefault("bundle_version", lambda: BUNDLE)
    statuses = OutcomeStatuses(writer, gate.scope, output, **hook)
    return Reconciler(gate, Promoter(output), on_outcome=[statuses]), writer


async def test_every_kind_gets_our_status_once(scoped_gate: Gate, kube: FakeKube, api: Any, tmp_path: Path) -> None:
    _populate(kube)
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api, addresses=("192.0.2.10",))
    outcome = await reconciler.reconcile(_state(kube))
    assert outcome.result is Result.PROMOTED
    assert await writer.flush() == 0

    gateway_class = _status(kube, "gatewayclasses", "haproxy", "")
    assert _conditions(gateway_class["conditions"]) == {"Accepted": ("True", "Accepted"),
                                                        "SupportedVersion": ("True", "SupportedVersion")}
    assert {c["observedGeneration"] for c in gateway_class["conditions"]} == {1}
    assert _status(kube, "gatewayclasses", "other", "") is None  # another controller's class

    edge = _status(kube, "gateways", "edge")
    assert _conditions(edge["conditions"]) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
                                               "AttachedListenerSets": ("True", "ListenerSetsAttached")}
    assert edge["addresses"] == [{"type": "IPAddress", "value": "192.0.2.10"}]
    assert edge["attachedListenerSets"] == 1
    [http] = edge["listeners"]
    assert http["name"] == "http" and http["attachedRoutes"] == 1
    assert http["supportedKinds"] == [{"group": GW, "kind": "HTTPRoute"}, {"group": GW, "kind": "GRPCRoute"}]
    assert _conditions(http["conditions"]) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
                                               "ResolvedRefs": ("True", "ResolvedRefs"),
                                               "Conflicted": ("False", "NoConflicts")}
    assert all(c["observedGeneration"] == 1 and c["lastTransitionTime"] for c in http["conditions"])
    assert _status(kube, "gateways", "theirs") is None

    extra = _status(kube, "listenersets", "extra")
    assert _conditions(extra["conditions"])["Accepted"] == ("True", "Accepted")
    assert [(x["name"], x["attachedRoutes"]) for x in extra["listeners"]] == [("db", 1)]

    web = _status(kube, "httproutes", "web")
    assert web["parents"][0] == FOREIGN_ENTRY  # untouched, first as it was
    [ours] = web["parents"][1:]
    assert ours["controllerName"] == OURS
    assert ours["parentRef"] == {"group": GW, "kind": "Gateway", "namespace": "default", "name": "edge",
                                 "sectionName": "http"}
    assert _conditions(ours["conditions"]) == {"Accepted": ("True", "Accepted"),
                                               "ResolvedRefs": ("True", "ResolvedRefs")}
    db = _status(kube, "tcproutes", "db")
    [entry] = db["parents"]
    assert entry["parentRef"] == {"group": GW, "kind": "ListenerSet", "namespace": "default", "name": "extra"}
    assert entry["controllerName"] == OURS and _conditions(entry["conditions"])["Accepted"] == ("True", "Accepted")

    policy = _status(kube, "backendtlspolicies", "cm")
    [ancestor] = policy["ancestors"]
    assert ancestor["ancestorRef"] == {"group": GW, "kind": "Gateway", "namespace": "default", "name": "edge"}
    assert ancestor["controllerName"] == OURS
    assert _conditions(ancestor["conditions"]) == {"Accepted": ("True", "Accepted"),
                                                   "ResolvedRefs": ("True", "ResolvedRefs")}

    # nothing changed: no request at all; a writer that starts afresh reads, and writes nothing
    written = len(_writes(kube))
    before = len(kube.requests)
    again = await reconciler.reconcile(_state(kube, "2"))
    assert again.result in (Result.UNCHANGED, Result.PROMOTED)
    assert writer.pending == 0 and await writer.flush() == 0
    assert len(kube.requests) == before
    fresh, fresh_writer = _reconciler(scoped_gate, tmp_path, api)
    fresh_writer.submit([])  # nothing remembered
    await fresh.reconcile(_state(kube, "3"))
    assert await fresh_writer.flush() == 0
    assert len(_writes(kube)) == written, _writes(kube)[written:]


async def test_a_spec_change_moves_observed_generation_but_not_unchanged_transition_times(
        scoped_gate: Gate, kube: FakeKube, api: Any, tmp_path: Path) -> None:
    _populate(kube)
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api)
    await reconciler.reconcile(_state(kube))
    await writer.flush()
    [first] = _status(kube, "httproutes", "web")["parents"][1:]
    route = copy.deepcopy(kube.get(GW, "httproutes", "default", "web"))
    assert route is not None
    route["spec"]["hostnames"] = ["shop2.example.com"]
    stored = kube.update(route)
    assert stored["metadata"]["generation"] == 2 and stored["status"]["parents"][0] == FOREIGN_ENTRY
    assert (await reconciler.reconcile(_state(kube, "2"))).result is Result.PROMOTED
    assert await writer.flush() == 0
    parents = _status(kube, "httproutes", "web")["parents"]
    assert parents[0] == FOREIGN_ENTRY
    [second] = parents[1:]
    assert [c["observedGeneration"] for c in second["conditions"]] == [2, 2]
    assert ([c["lastTransitionTime"] for c in second["conditions"]]
            == [c["lastTransitionTime"] for c in first["conditions"]])
    # the status writes never bumped the route's generation
    after = kube.get(GW, "httproutes", "default", "web")
    assert after is not None and after["metadata"]["generation"] == 2


async def test_gateway_class_status_as_the_conformance_suite_asserts(scoped_gate: Gate, kube: FakeKube, api: Any,
                                                                     tmp_path: Path) -> None:
    """GatewayClassSupportedVersionCondition: SupportedVersion False without the CRD's bundle-version
    annotation or with an unsupported one ("v0.0.0"), True with the release's; Accepted True throughout.
    GatewayClassObservedGenerationBump: a spec change moves every condition's observedGeneration."""
    _populate(kube)
    bundle: list[str | None] = [None]
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api, bundle_version=lambda: bundle[0])

    async def conditions(version: str) -> dict[str, tuple[str, str]]:
        await reconciler.reconcile(_state(kube, version))
        assert await writer.flush() == 0
        return _conditions(_status(kube, "gatewayclasses", "haproxy", "")["conditions"])

    assert await conditions("1") == {"Accepted": ("True", "Accepted"),
                                     "SupportedVersion": ("False", "UnsupportedVersion")}
    bundle[0] = BUNDLE
    assert (await conditions("2"))["SupportedVersion"] == ("True", "SupportedVersion")
    bundle[0] = "v0.0.0"
    assert await conditions("3") == {"Accepted": ("True", "Accepted"),
                                     "SupportedVersion": ("False", "UnsupportedVersion")}
    bundle[0] = BUNDLE
    assert (await conditions("4"))["SupportedVersion"] == ("True", "SupportedVersion")
    before = _status(kube, "gatewayclasses", "haproxy", "")["conditions"]
    assert {c["observedGeneration"] for c in before} == {1}
    gateway_class = copy.deepcopy(kube.get(GW, "gatewayclasses", "", "haproxy"))
    assert gateway_class is not None
    gateway_class["spec"]["description"] = "new"
    assert kube.update(gateway_class)["metadata"]["generation"] == 2
    await conditions("5")
    after = _status(kube, "gatewayclasses", "haproxy", "")["conditions"]
    assert {c["observedGeneration"] for c in after} == {2}
    assert [c["lastTransitionTime"] for c in after] == [c["lastTransitionTime"] for c in before]


async def test_a_conflict_is_read_again_and_retried(scoped_gate: Gate, kube: FakeKube, api: Any,
                                                    tmp_path: Path) -> None:
    _populate(kube)
    kube.fail_next("update", 409, times=2, plural="httproutes/status")
    conflicts = _count("conflict")
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api)
    await reconciler.reconcile(_state(kube))
    assert await writer.flush() == 0
    assert _count("conflict") - conflicts == 2
    parents = _status(kube, "httproutes", "web")["parents"]
    assert [p["controllerName"] for p in parents] == [THEIRS, OURS]


async def test_a_forbidden_write_is_counted_retried_and_never_blocks_promotion(
        scoped_gate: Gate, kube: FakeKube, api: Any, tmp_path: Path) -> None:
    _populate(kube)
    kube.forbid("httproutes/status")
    failed = _count("failed")
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api)
    outcome = await reconciler.reconcile(_state(kube))
    assert outcome.result is Result.PROMOTED and outcome.promoted is not None
    assert await writer.flush() == 1  # the HTTPRoute waits for a retry
    assert _count("failed") - failed == 1
    assert _status(kube, "gateways", "edge") is not None and _status(kube, "tcproutes", "db") is not None
    assert _status(kube, "httproutes", "web")["parents"] == [FOREIGN_ENTRY]
    kube.allow("httproutes/status")
    assert await writer.flush() == 0
    assert [p["controllerName"] for p in _status(kube, "httproutes", "web")["parents"]] == [THEIRS, OURS]


async def test_programmed_waits_for_the_data_plane(scoped_gate: Gate, kube: FakeKube, api: Any,
                                                   tmp_path: Path) -> None:
    _populate(kube)
    loaded: set[str] = set()
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api, dataplane=lambda version: version in loaded)
    outcome = await reconciler.reconcile(_state(kube))
    await writer.flush()
    edge = _status(kube, "gateways", "edge")
    assert _conditions(edge["conditions"])["Programmed"] == ("False", "Pending")
    assert _conditions(edge["listeners"][0]["conditions"])["Programmed"] == ("False", "Pending")
    assert _conditions(edge["conditions"])["Accepted"] == ("True", "Accepted")
    assert outcome.promoted is not None
    loaded.add(outcome.promoted.version)
    await reconciler.reconcile(_state(kube, "2"))
    await writer.flush()
    edge = _status(kube, "gateways", "edge")
    assert _conditions(edge["conditions"])["Programmed"] == ("True", "Programmed")


async def test_a_route_haproxy_rejects_is_not_accepted_with_haproxys_message(
        scoped_gate: Gate, kube: FakeKube, api: Any, tmp_path: Path) -> None:
    _populate(kube)
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api)
    await reconciler.reconcile(_state(kube))
    await writer.flush()
    edge_before = _status(kube, "gateways", "edge")
    kube.create({"apiVersion": f"{GW}/v1", "kind": "HTTPRoute", "metadata": {"name": "broken", "namespace": "default"},
                 "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["broken.example.com"],
                          "rules": [{"matches": [{"path": {"type": "RegularExpression", "value": "/a{2,1}"}}],
                                     "backendRefs": [{"name": "web", "port": 8080}]}]}})
    outcome = await reconciler.reconcile(_state(kube, "2"))
    assert outcome.result is Result.REJECTED or any(f.ref.name == "broken" for f in outcome.faults)
    assert await writer.flush() == 0
    [entry] = _status(kube, "httproutes", "broken")["parents"]
    accepted = next(c for c in entry["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "UnsupportedValue")
    assert "spec.rules[0].matches[0].path.value" in accepted["message"], accepted["message"]
    assert entry["controllerName"] == OURS and accepted["observedGeneration"] == 1
    assert _status(kube, "gateways", "edge") == edge_before  # the last-known-good still describes it


async def test_a_route_served_without_its_session_persistence_says_it_is_not_applied(
        scoped_gate: Gate, kube: FakeKube, api: Any, tmp_path: Path) -> None:
    _populate(kube)
    route = copy.deepcopy(kube.get(GW, "httproutes", "default", "web"))
    assert route is not None
    route["spec"]["rules"][0]["sessionPersistence"] = {"sessionName": "a b", "type": "Cookie"}
    kube.update(route)
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api)
    outcome = await reconciler.reconcile(_state(kube))
    assert [x.ref.name for x in outcome.left_out] == ["web"]
    await writer.flush()
    [ours] = _status(kube, "httproutes", "web")["parents"][1:]
    found = _conditions(ours["conditions"])
    assert found["Accepted"] == ("True", "Accepted")
    assert found["routegate.io/NotApplied"] == ("True", "UnsupportedValue") and "PartiallyInvalid" not in found


async def test_the_reconcile_process_writes_statuses_from_the_cluster_watch(kube: FakeKube, tmp_path: Path) -> None:
    """``routegate reconcile --kubeconfig`` end to end: the slimmed watch state keeps metadata.generation,
    the statuses appear, and an unrelated change (a new reconcile) writes none again."""
    import asyncio
    import os
    import signal
    import socket
    import sys

    from tests.conftest import free_port

    _populate(kube)
    out = tmp_path / "out"
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook", "reconcile", "--kubeconfig", kube.write_kubeconfig(tmp_path / "kc"),
        "--output-dir", str(out), "--stats-socket", "", "--debounce", "0.2", "--gateway-class", "haproxy",
        "--metrics-listen", f"127.0.0.1:{port}",
        stdout=asyncio.subprocess.DEVNULL, stderr=(tmp_path / "stderr").open("wb"),
        env={**os.environ, "HOME": str(tmp_path)})

    async def until(check: Any) -> None:
        try:
            async with asyncio.timeout(60):
                while not check():
                    assert proc.returncode is None, "routegate reconcile exited"
                    await asyncio.sleep(0.1)
        except (TimeoutError, AssertionError):
            print((tmp_path / "stderr").read_text()[-5000:])
            raise

    def route_parents() -> list[Any]:
        return list((_status(kube, "httproutes", "web") or {}).get("parents") or [])

    def policy_accepted() -> bool:
        # the referenced ConfigMap has a watch of its own, started once the policy names it: a first run may
        # judge without it ("does not exist"), and the run that has it writes the policy's status again
        status = _status(kube, "backendtlspolicies", "cm") or {}
        return any(_conditions(a["conditions"]).get("Accepted", ("",))[0] == "True"
                   for a in status.get("ancestors") or [])

    try:
        await until(lambda: len(route_parents()) == 2 and policy_accepted())
        assert route_parents()[0] == FOREIGN_ENTRY and route_parents()[1]["controllerName"] == OURS
        edge = _status(kube, "gateways", "edge")
        assert _conditions(edge["conditions"])["Programmed"] == ("True", "Programmed")
        lease = kube.get("coordination.k8s.io", "leases", "routegate-system", "routegate-statuses")
        assert lease is not None and lease["spec"]["holderIdentity"] == socket.gethostname()  # written as leader
        await until(lambda: _status(kube, "gatewayclasses", "haproxy", "") is not None)
        classes = _conditions(_status(kube, "gatewayclasses", "haproxy", "")["conditions"])
        assert classes["SupportedVersion"] == ("True", "SupportedVersion")  # the watched CRD's annotation
        writes = len(_writes(kube))
        runs = await _last_run(port)
        kube.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "unrelated", "namespace": "default"},
                     "spec": {"ports": [{"port": 1}]}})
        for _ in range(600):  # until a run over the new state ended (polled over HTTP: /readyz)
            if await _last_run(port) != runs:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("no reconcile run after the state changed")
        await asyncio.sleep(1)
        assert len(_writes(kube)) == writes, _writes(kube)[writes:]
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    lease = kube.get("coordination.k8s.io", "leases", "routegate-system", "routegate-statuses")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # given back on SIGTERM


async def _last_run(port: int) -> Any:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/readyz") as resp:
        return (await resp.json())["last"]


async def test_serve_reconcile_writes_statuses_too_and_serve_alone_writes_none(kube: FakeKube, tmp_path: Path) -> None:
    """``serve --reconcile --kubeconfig`` writes the statuses (the process that promotes); a webhook-only
    ``serve`` against the same cluster writes none."""
    import asyncio
    import os
    import signal
    import sys

    from tests.conftest import free_port

    _populate(kube)
    kubeconfig = kube.write_kubeconfig(tmp_path / "kc")

    async def serve(*extra: str, name: str) -> asyncio.subprocess.Process:
        metrics = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{free_port()}",
            "--metrics-listen", f"127.0.0.1:{metrics}", "--cert-dir", str(tmp_path / f"certs-{name}"),
            "--kubeconfig", kubeconfig, "--gateway-class", "haproxy", *extra,
            stdout=asyncio.subprocess.DEVNULL, stderr=(tmp_path / f"{name}.log").open("wb"),
            env={**os.environ, "HOME": str(tmp_path)})
        for _ in range(1200):  # listening (and so stoppable by SIGTERM) and synced
            assert proc.returncode is None, (tmp_path / f"{name}.log").read_text()[-3000:]
            if await _ready(metrics):
                return proc
            await asyncio.sleep(0.1)
        pytest.fail(f"serve never became ready: {(tmp_path / f'{name}.log').read_text()[-3000:]}")

    async def stop(proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0

    def ours() -> bool:
        parents = (_status(kube, "httproutes", "web") or {}).get("parents") or []
        return any(p.get("controllerName") == OURS for p in parents)

    alone = await serve(name="alone")
    try:
        await asyncio.sleep(3)  # ready (synced) and more: a webhook-only serve has had its chance
        assert not _writes(kube) and not ours()
    finally:
        await stop(alone)
    promoting = await serve("--reconcile", "--output-dir", str(tmp_path / "out"), "--stats-socket", "",
                            "--debounce", "0.2", name="promoting")
    try:
        for _ in range(600):
            if ours() and _status(kube, "gateways", "edge") is not None:
                break
            assert promoting.returncode is None, (tmp_path / "promoting.log").read_text()[-3000:]
            await asyncio.sleep(0.1)
        else:
            pytest.fail("no status written: " + (tmp_path / "promoting.log").read_text()[-3000:])
        assert _status(kube, "httproutes", "web")["parents"][0] == FOREIGN_ENTRY
    finally:
        await stop(promoting)
    lease = kube.get("coordination.k8s.io", "leases", "routegate-system", "routegate-statuses")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""


async def _ready(port: int) -> bool:
    import aiohttp

    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/readyz") as resp:
            return resp.status == 200
    except aiohttp.ClientError:
        return False


def _crd_route(name: str, paths: list[str]) -> dict[str, Any]:
    return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route", "metadata": {"name": name, "namespace": "default"},
            "spec": {"backend": {"address": "10.0.0.1", "port": 8080}, "hostnames": ["crd.example.com"],
                     "paths": paths}}


def _route_status(kube: FakeKube, name: str) -> Any:
    obj = kube.get("routegate.io", "routes", "default", name)
    assert obj is not None
    return obj.get("status")


async def test_custom_routes_get_a_status_through_the_subresource(scoped_gate: Gate, kube: FakeKube, api: Any,
                                                                  tmp_path: Path) -> None:
    """The custom Route CRD (routegate.io, seed 000) is ours wholly: Accepted, Programmed (Pending until the
    data plane has the version) and Conflicted (a host/path another Route claimed first), written once
    through routes/status, and not Accepted when HAProxy rejects it."""
    _populate(kube)
    for obj in (_crd_route("alpha", ["/api"]), _crd_route("beta", ["/other", "/api/"])):
        kube.create(obj)
    loaded: set[str] = set()
    reconciler, writer = _reconciler(scoped_gate, tmp_path, api, dataplane=lambda version: version in loaded)
    outcome = await reconciler.reconcile(_state(kube))
    assert outcome.result is Result.PROMOTED and outcome.promoted is not None
    assert await writer.flush() == 0
    alpha = _route_status(kube, "alpha")["conditions"]
    assert _conditions(alpha) == {"Accepted": ("True", "Accepted"), "Programmed": ("False", "Pending"),
                                  "Conflicted": ("False", "NoConflicts")}
    assert {c["observedGeneration"] for c in alpha} == {1} and all(c["lastTransitionTime"] for c in alpha)
    beta = _route_status(kube, "beta")["conditions"]
    assert _conditions(beta)["Conflicted"] == ("True", "HostPathConflict")
    assert "spec.paths[1]" in next(c["message"] for c in beta if c["type"] == "Conflicted")
    loaded.add(outcome.promoted.version)
    await reconciler.reconcile(_state(kube, "2"))
    assert await writer.flush() == 0
    for name in ("alpha", "beta"):  # beta serves what it did not lose (/other)
        assert _conditions(_route_status(kube, name)["conditions"])["Programmed"] == ("True", "Programmed")
    written = len([w for w in _writes(kube) if "/routes/" in w])
    assert written == 4, _writes(kube)  # each once Pending, once Programmed
    await reconciler.reconcile(_state(kube, "3"))
    assert await writer.flush() == 0
    assert len([w for w in _writes(kube) if "/routes/" in w]) == written  # nothing changed: no write

    # stored despite the CRD's rule (a control character in a header value): not rendered, not Accepted
    broken = _crd_route("gamma", ["/gamma"])
    broken["spec"]["requestHeaders"] = [{"name": "X-Team", "value": "a\x01b"}]
    kube.create(broken)
    outcome = await reconciler.reconcile(_state(kube, "4"))
    assert await writer.flush() == 0
    gamma = _conditions(_route_status(kube, "gamma")["conditions"])
    assert gamma["Accepted"] == ("False", "Invalid") and gamma["Programmed"] == ("False", "Invalid"), gamma
