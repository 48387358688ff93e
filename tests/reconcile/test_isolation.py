"""One tenant's broken stored object never stops the others (issue 25, §1), driven through the fake API
server: the cluster is listed and watched (``ClusterState``), reconciled by the loop (``follow``), and
Warning Events are written back to it.

A broken new route plus another tenant's valid change -> the change is promoted, the broken route left
out with an Event; a broken update of a live route -> its last promoted version keeps serving, with an
Event naming the version held back; both fixed -> promoted as stored. Each promoted version is started
in a real HAProxy (the checker's binary) on loopback, with real backend servers, and probed: what it
serves is what the outcome says.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.runtime.promotion import Promoter
from tests.cluster.clusterkit import install_gateway_api
from tests.fakekube import FakeKube
from tests.haproxy_check import dataplanes as dp
from tests.reconcile.conftest import DATA
from validators.objects import Obj, Ref
from webhook.cluster import ClusterState
from webhook.gate.gates import Gate
from webhook.loading import inputs
from webhook.reconcile import statusshapes
from webhook.reconcile.events import EventRecorder
from webhook.reconcile.following import follow
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Outcome, Reconciler, Result

pytestmark = pytest.mark.haproxy

GW = "gateway.networking.k8s.io"


def _route(name: str, path: str) -> Obj:
    return {"apiVersion": f"{GW}/v1", "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "capture"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"{name}.example.com"],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]}}


def _with_bad_regex(route: Obj) -> Obj:
    out = copy.deepcopy(route)
    out["spec"]["rules"].append({"matches": [{"path": {"type": "RegularExpression", "value": "/a{2,1}"}}],
                                 "backendRefs": [{"name": "web", "port": 8080}]})
    return out


class Loop:
    """The cluster watch and the reconcile loop of one routegate process, over one output directory."""

    def __init__(self, kube: FakeKube, api: Any, gate: Gate, out: Path, port: int) -> None:
        self.kube, self.api, self.gate, self.out = kube, api, gate, out
        self.port = port  # the Gateway's listener, on loopback
        self.tasks: list[asyncio.Future[None]] = []
        self.start()

    def start(self) -> None:
        self.cluster = ClusterState(self.api, resync_backoff_cap=0.05)
        self.reconciler = Reconciler(self.gate, Promoter(self.out, keep=3), recorder=EventRecorder(self.api))
        self.tasks = [asyncio.ensure_future(self.cluster.run()),
                      asyncio.ensure_future(follow(self.cluster, self.reconciler, debounce=0.1, poll=0.05))]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def restart(self) -> None:
        """A new process: nothing kept in memory, only what is on disk and in the cluster."""
        await self.stop()
        self.start()

    def stored(self, name: str) -> Obj:
        got = self.kube.get(GW, "httproutes", "capture", name)
        assert got is not None
        return copy.deepcopy(got)

    async def settled(self) -> Outcome:
        """The outcome of a reconcile of the cluster's current version."""
        async with asyncio.timeout(60):
            while True:
                await asyncio.sleep(0.05)
                last = self.reconciler.last
                if self.cluster.ready and last is not None and last.state_version == self.cluster.snapshot().version:
                    return last

    def served(self) -> str:
        """Everything the data plane reads: haproxy.cfg and its maps."""
        live = (self.out / "..data").resolve()
        return "".join(p.read_text() for p in sorted(live.rglob("*")) if p.is_file() and p.suffix in (".cfg", ".map"))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The live version in a real HAProxy (loopback binds, a stats socket), for probes."""
        run = Path(tempfile.mkdtemp(prefix="rgiso"))
        shutil.copytree((self.out / "..data").resolve(), run, dirs_exist_ok=True)
        cfg = (run / "haproxy.cfg").read_text()
        (run / "haproxy.cfg").write_text(dp.dataplane_config(cfg, str(run / "s.sock")))
        binary = self.reconciler.gate.binary.path
        proc = subprocess.Popen([binary, "-W", "-db", "-f", "haproxy.cfg"], cwd=run, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            dp._wait_connectable("127.0.0.1", self.port, proc, "haproxy")  # blocks the loop briefly: nothing
            yield  # changes meanwhile
        finally:
            dp._stop(proc)
            shutil.rmtree(run, ignore_errors=True)

    def status(self, host: str, path: str) -> int:
        return dp.get(self.port, host, path)[0]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.kube.objects[("", "events")].values() if e["involvedObject"]["name"] == name]


@pytest.fixture
def backend_port() -> Iterator[int]:
    port = dp.free_port()
    with dp.backend_servers(["127.0.0.1"], port):
        yield port


@pytest.fixture
async def loop(tmp_path: Path, gate: Gate, kube: FakeKube, api: Any, backend_port: int) -> AsyncIterator[Loop]:
    install_gateway_api(kube)
    port = dp.free_port()
    for item in inputs.load([str(DATA / "state")]):
        obj = copy.deepcopy(dict(item.obj))
        if obj["kind"] == "Gateway":
            obj["spec"]["listeners"][0]["port"] = port
        if obj["kind"] == "EndpointSlice":  # the Service's endpoint: the backend server on loopback
            obj["ports"][0]["port"] = backend_port
            obj["endpoints"] = [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]
        kube.create(obj)
    kube.create(_route("a", "/a-v1"))
    kube.create(_route("b", "/b-v1"))
    running = Loop(kube, api, gate, tmp_path / "out", port)
    try:
        yield running
    finally:
        await running.stop()


async def test_a_broken_tenant_never_stops_the_others(loop: Loop) -> None:
    first = await loop.settled()
    assert first.result is Result.PROMOTED and not first.left_out
    assert "/a-v1" in loop.served() and "/b-v1" in loop.served()
    with loop.running():
        assert loop.status("a.example.com", "/a-v1") == 200 and loop.status("b.example.com", "/b-v1") == 200
        assert loop.status("a.example.com", "/a-v2") == 404

    # a broken new route, and another tenant's valid change: the change goes live, the route stays out
    loop.kube.create(_with_bad_regex(_route("broken", "/broken")))
    b = loop.stored("b")
    b["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/b-v2"
    loop.kube.update(b)
    outcome = await loop.settled()
    assert outcome.result is Result.PROMOTED, outcome.rejection
    served = loop.served()
    assert "/b-v2" in served and "/b-v1" not in served and "broken.example.com" not in served
    [left] = outcome.left_out
    assert (left.ref, left.treatment) == (Ref("HTTPRoute", "capture", "broken"), Treatment.LEFT_OUT)
    assert [f.field for f in left.findings] == ["spec.rules[1].matches[0].path.value"]
    assert "haproxy" in left.findings[0].message and "a{2,1}" in left.findings[0].message
    [event] = loop.events("broken")
    assert event["reason"] == "HAProxyRejected" and "spec.rules[1].matches[0].path.value" in event["message"]
    assert event["message"].endswith("in the HAProxy configuration: left out (not in the configuration)")
    with loop.running():
        assert loop.status("b.example.com", "/b-v2") == 200 and loop.status("b.example.com", "/b-v1") == 404
        assert loop.status("broken.example.com", "/broken") == 404
        assert loop.status("a.example.com", "/a-v1") == 200

    # a broken update of a live route: its last promoted version keeps serving; b's next change goes live
    a = loop.stored("a")
    assert a["metadata"]["generation"] == 1
    a = _with_bad_regex(a)
    a["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/a-v2"
    loop.kube.update(a)
    b = loop.stored("b")
    b["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/b-v3"
    loop.kube.update(b)
    outcome = await loop.settled()
    assert outcome.result is Result.PROMOTED, outcome.rejection
    served = loop.served()
    assert "/a-v1" in served and "/a-v2" not in served and "/b-v3" in served
    held = {x.ref.name: x for x in outcome.left_out}
    assert sorted(held) == ["a", "broken"]
    # the version held back is named by its generation (what the cluster keeps of it, webhook.cluster.slimming)
    assert held["a"].treatment is Treatment.HELD_BACK and held["a"].kept_generation == 1
    [event] = loop.events("a")
    assert event["reason"] == "HAProxyRejected"
    assert event["message"].endswith("held back at its last promoted version (generation 1)")
    assert {str(r) for r in outcome.at_fault} == {"HTTPRoute capture/a", "HTTPRoute capture/broken"}
    with loop.running():  # a's last promoted version serves; its broken edit does not take it down
        assert loop.status("a.example.com", "/a-v1") == 200 and loop.status("a.example.com", "/a-v2") == 404
        assert loop.status("b.example.com", "/b-v3") == 200

    # both fixed: promoted as stored, nothing set aside
    for name in ("a", "broken"):
        fixed = loop.stored(name)
        fixed["spec"]["rules"][1]["matches"][0]["path"]["value"] = "/z{1,2}"
        loop.kube.update(fixed)
    outcome = await loop.settled()
    assert outcome.result is Result.PROMOTED and not outcome.left_out and not outcome.faults
    served = loop.served()
    assert "/a-v2" in served and "/a-v1" not in served and "broken.example.com" in served
    with loop.running():
        assert loop.status("a.example.com", "/a-v2") == 200 and loop.status("a.example.com", "/a-v1") == 404
        assert loop.status("broken.example.com", "/broken") == 200


async def test_a_restart_still_holds_a_broken_update_back(loop: Loop) -> None:
    """The last promoted versions are on disk (webhook.reconcile.promotedversions): a new process that meets a broken
    update of a live route holds it back at the version the previous process promoted, it does not take
    the route out of traffic."""
    first = await loop.settled()
    assert first.result is Result.PROMOTED
    await loop.restart()
    again = await loop.settled()
    assert again.result is Result.UNCHANGED and not again.left_out

    a = _with_bad_regex(loop.stored("a"))
    a["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/a-v2"
    loop.kube.update(a)
    b = loop.stored("b")
    b["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/b-v2"
    loop.kube.update(b)
    await loop.restart()  # the broken update is first seen by a process that never promoted anything
    outcome = await loop.settled()
    assert outcome.result is Result.PROMOTED, outcome.rejection
    [held] = outcome.left_out
    assert (held.ref, held.treatment) == (Ref("HTTPRoute", "capture", "a"), Treatment.HELD_BACK)
    assert held.kept_generation == 1
    served = loop.served()
    assert "/a-v1" in served and "/a-v2" not in served and "/b-v2" in served
    with loop.running():
        assert loop.status("a.example.com", "/a-v1") == 200 and loop.status("a.example.com", "/a-v2") == 404
        assert loop.status("b.example.com", "/b-v2") == 200

    # and again after one more restart: the record names the version held back, not the broken one
    await loop.restart()
    b = loop.stored("b")
    b["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/b-v3"
    loop.kube.update(b)
    outcome = await loop.settled()
    assert outcome.result is Result.PROMOTED, outcome.rejection
    assert [(x.ref.name, x.treatment) for x in outcome.left_out] == [("a", Treatment.HELD_BACK)]
    assert "/a-v1" in loop.served() and "/b-v3" in loop.served()


async def test_a_record_of_another_object_under_the_same_name_is_not_trusted(loop: Loop) -> None:
    """A route deleted and created again while routegate was down is another object (another uid): the
    recorded version of the old one is not held back at; the new broken one is left out."""
    assert (await loop.settled()).result is Result.PROMOTED
    await loop.stop()
    old = loop.stored("a")
    loop.kube.delete(f"{GW}/v1", "HTTPRoute", "a", "capture")
    again = _with_bad_regex(_route("a", "/a-v2"))
    loop.kube.create(again)
    assert loop.stored("a")["metadata"]["uid"] != old["metadata"]["uid"]
    loop.start()
    outcome = await loop.settled()
    assert outcome.result is Result.PROMOTED, outcome.rejection
    [left] = outcome.left_out
    assert (left.ref.name, left.treatment) == ("a", Treatment.LEFT_OUT)
    served = loop.served()
    assert "a.example.com" not in served and "b.example.com" in served


def _gateway(loop: Loop, name: str) -> dict[str, Any]:
    got = loop.kube.get(GW, "gateways", "capture", name)
    assert got is not None
    return copy.deepcopy(dict(got))


async def test_a_refused_gateway_edit_keeps_the_running_version_and_a_new_one_is_not_served(loop: Loop) -> None:
    """A Gateway the Gateway API says to reject (here an infrastructure.parametersRef routegate cannot honour)
    is not served; one the data plane runs is held back at its last promoted version, with a Warning Event
    and Accepted=False (InvalidParameters) on the status, so one edit does not take every tenant down."""
    assert (await loop.settled()).result is Result.PROMOTED
    edge = _gateway(loop, "edge")
    edge["spec"]["infrastructure"] = {"parametersRef": {"group": "", "kind": "ConfigMap", "name": "params"}}
    loop.kube.update(edge)
    fresh = _gateway(loop, "edge")
    fresh["metadata"] = {"name": "fresh", "namespace": "capture"}
    fresh["spec"]["listeners"][0]["port"] = dp.free_port()
    loop.kube.create(fresh)
    route = _route("to-fresh", "/fresh")
    route["spec"]["parentRefs"] = [{"name": "fresh"}]
    loop.kube.create(route)
    outcome = await loop.settled()
    assert outcome.result in (Result.PROMOTED, Result.UNCHANGED), outcome.rejection
    treated = {x.ref.name: (x.treatment, x.kept_generation) for x in outcome.left_out}
    assert treated == {"edge": (Treatment.HELD_BACK, 1), "fresh": (Treatment.LEFT_OUT, None)}
    served = loop.served()
    assert "a.example.com" in served and "to-fresh.example.com" not in served
    assert f":{fresh['spec']['listeners'][0]['port']}" not in served
    with loop.running():
        assert loop.status("a.example.com", "/a-v1") == 200
    [event] = [e for e in loop.events("edge") if e["involvedObject"]["kind"] == "Gateway"]
    assert event["reason"] == "GatewayRefused" and "spec.infrastructure.parametersRef" in event["message"]
    assert event["message"].endswith("held back at its last promoted version (generation 1)")

    state = loop.cluster.snapshot()
    facts = statusshapes.facts_from([(f.ref, f.findings) for f in outcome.faults],
                                    [(x.ref, x.what, x.findings) for x in outcome.left_out],
                                    dataplane=True, version="v")
    targets = {t.ref.name: t for t in statusshapes.targets(state, {}, facts, loop.gate.scope)}
    for name, kept in (("edge", True), ("fresh", False)):
        accepted, programmed = targets[name].status["conditions"][:2]
        assert (accepted["status"], accepted["reason"], programmed["status"]) == ("False", "InvalidParameters",
                                                                                  "False")
        assert ("the data plane keeps its last promoted version (generation 1)" in accepted["message"]) is kept

    # the parametersRef removed: the Gateway is served as stored again
    edge = _gateway(loop, "edge")
    del edge["spec"]["infrastructure"]
    loop.kube.update(edge)
    outcome = await loop.settled()
    assert [x.ref.name for x in outcome.left_out] == ["fresh"]
