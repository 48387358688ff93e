"""The webhook's, ``routegate check``'s and reconcile's predictions agree with what reconcile applies,
live, in the shipped layout: serve and reconcile apart, the webhook learning what the data plane runs
only from reconcile's published ``dataplane.json`` (``serve --dataplane-state``).

A real ``haproxy -W`` master (2.8, 3.2 and 3.4, each also the checker, as the version warning recommends)
reads the promoted directory. Reconcile runs as a long-lived in-process Reconciler with the runtime
applier (``--runtime-socket``, ``--reload-pidfile``). The rows are seed 000's tables that an admission
review sees (route and Gateway changes; EndpointSlice and Secret changes are not reviewed kinds, their
rows are applied-plan tests in tests/haproxy_check). For each row: the webhook reviews the change against
the state the data plane runs, ``routegate check -o json`` judges it against that state, reconcile
promotes and applies it; all three must say the same action and number of commands, and the action
must be the seed's for that version.

The first step is also issue 25 §6: the data plane starts after the first promotion (the reload could
not be signalled: no pid file yet), so reconcile does not know what it runs; it reads it over the
socket and applies the first runtime-eligible change at runtime.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.check import binaries
from haproxy_check.render.rendering import BUILTIN
from haproxy_check.runtime.promotion import Promoter
from tests.attachments import gwbuilders as gb
from tests.haproxy_check import dataplanes as dp
from validators.changes import Change, Operation
from validators.objects import Obj, ref_of
from validators.states import MemoryState
from webhook.cli import routegate as cli
from webhook.gate import assembly
from webhook.reconcile.reconciler import Reconciler, Result
from webhook.reconcile.reconcileruntime import PidfileReload, RuntimeApplier
from webhook.server.dataplanestates import DataplaneState

pytestmark = pytest.mark.haproxy

ADDRS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


def objects(port: int, extra_port: int, backend_port: int, *, hosts: tuple[str, ...] = ("a.example.com",),
            headers: tuple[tuple[str, str], ...] = (("X-Env", "one"),), second_route: bool = False,
            second_listener: bool = False, label: str = "") -> list[Obj]:
    listeners = [gb.listener("http", port, frm="All")]
    if second_listener:
        listeners.append(gb.listener("extra", extra_port, frm="All"))
    route = gb.route("HTTPRoute", "r", gb.parent("edge", namespace="infra"), hosts=list(hosts), rules=[{
        "backendRefs": [{"name": "web", "port": 80}],
        "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": n, "value": v} for n, v in headers]}}]}])
    if label:
        route["metadata"].setdefault("labels", {})["team"] = label
    objs: list[Obj] = [
        gb.gateway("edge", *listeners, ns="infra"),
        gb.service("web", "default", ("http", 80)),
        gb.endpoint_slice("web-a", "web", "default", [("http", backend_port)], [(a, True) for a in ADDRS[:2]]),
        gb.service("api", "default", ("http", 80)),
        gb.endpoint_slice("api-a", "api", "default", [("http", backend_port)], [("127.0.0.3", True)]),
        route,
    ]
    if second_route:
        objs.append(gb.route("HTTPRoute", "r2", gb.parent("edge", namespace="infra"), hosts=["c.example.com"],
                             rules=[{"backendRefs": [{"name": "api", "port": 80}]}]))
    return objs


RUNTIME, RELOAD, NONE = "runtime", "reload", "none"
# (seed 000 row, the state after it (objects() keywords, cumulative), the action before 3.4, on 3.4)
ROWS: list[tuple[str, dict[str, Any], str, str]] = [
    ("per-object row 1: a value in an existing map", {"headers": (("X-Env", "two"),)}, RUNTIME, RUNTIME),
    ("what-changes row 1: entries in an already loaded map (a new host)",
     {"headers": (("X-Env", "two"),), "hosts": ("a.example.com", "b.example.com")}, RUNTIME, RUNTIME),
    ("what-changes row 4: a new backend using an already loaded profile",
     {"headers": (("X-Env", "two"),), "hosts": ("a.example.com", "b.example.com"), "second_route": True},
     RELOAD, RUNTIME),
    ("per-object row 4: a deleted backend",
     {"headers": (("X-Env", "two"),), "hosts": ("a.example.com", "b.example.com")}, RELOAD, RUNTIME),
    ("per-object row 2: a new literal used by a rule (a header name)",
     {"headers": (("X-Env", "two"), ("X-Team", "blue")), "hosts": ("a.example.com", "b.example.com")},
     RELOAD, RELOAD),
    ("what-changes row 5: a listener",
     {"headers": (("X-Env", "two"), ("X-Team", "blue")), "hosts": ("a.example.com", "b.example.com"),
      "second_listener": True}, RELOAD, RELOAD),
    ("nothing changed (a label no template reads)",
     {"headers": (("X-Env", "two"), ("X-Team", "blue")), "hosts": ("a.example.com", "b.example.com"),
      "second_listener": True, "label": "blue"}, NONE, NONE),
]


def the_change(before: list[Obj], after: list[Obj]) -> Change:
    old = {ref_of(o): o for o in before}
    new = {ref_of(o): o for o in after}
    changed = [r for r in old.keys() | new.keys() if old.get(r) != new.get(r)]
    assert len(changed) == 1, changed
    ref = changed[0]
    if ref not in new:
        return Change(Operation.DELETE, None, old[ref])
    return Change(Operation.UPDATE if ref in old else Operation.CREATE, new[ref], old.get(ref))


class Layout:
    """The data plane, reconcile (in-process, long-lived) and the webhook gate following dataplane.json."""

    def __init__(self, tmp: Path, binary: str, version: str) -> None:
        self.tmp, self.binary, self.version = tmp, binary, version
        self.port, self.extra_port = dp.free_port(), dp.free_port()
        self.socket = str(tmp / "admin.sock")
        self.pidfile = tmp / "haproxy.pid"
        self.out = tmp / "out"
        self.templates = tmp / "templates"
        self.templates.mkdir()
        name = "400-http-frontends.cfg.j2"  # bind loopback only (tests bind nothing else)
        text = (BUILTIN / name).read_text()
        (self.templates / name).write_text(text.replace("bind {{ fe.bind }}", "bind 127.0.0.1{{ fe.bind }}"))
        found = asyncio.run(binaries.detect(binary))
        numbers = tuple(int(x) for x in version.split("."))
        # note_budget: a cold renderer on a busy machine may take over the default second; the skip is a
        # latency guard, not what this test is about
        settings = assembly.GateSettings(templates=(str(self.templates),), dataplane_version=numbers,
                                         note_budget=60.0)
        self.reconcile_gate = assembly.build_gate(found, assembly.GateSettings(
            templates=(str(self.templates),), dataplane_version=numbers, render={"stats_socket": self.socket}))
        self.webhook = assembly.build_gate(found, settings)
        promoter = Promoter(self.out, keep=5)
        self.applier = RuntimeApplier(promoter, self.socket, dataplane_version=numbers,
                                      reload=PidfileReload(self.pidfile))
        self.reconciler = Reconciler(self.reconcile_gate, promoter, on_promoted=[self.applier])
        self.follower = DataplaneState(str(self.out), self.webhook.loaded)
        self.master: subprocess.Popen[bytes] | None = None
        self.states = 0

    def state(self, objs: list[Obj]) -> MemoryState:
        self.states += 1
        return MemoryState(objs, version=f"s{self.states}")

    def start(self) -> None:
        cwd = self.tmp / "elsewhere"
        cwd.mkdir()
        self.master = subprocess.Popen([self.binary, "-W", "-db", "-p", str(self.pidfile), "-f",
                                        str(self.out / "haproxy.cfg")], cwd=cwd, start_new_session=True,
                                       stdout=subprocess.DEVNULL, stderr=(self.tmp / "haproxy.log").open("wb"))
        deadline = time.monotonic() + 15
        while not (os.path.exists(self.socket) and self.pidfile.exists()):
            assert self.master.poll() is None and time.monotonic() < deadline, self.log()
            time.sleep(0.05)
        dp.ask(self.socket, "show info")

    def log(self) -> str:
        return (self.tmp / "haproxy.log").read_text(errors="replace")[-2000:]

    def worker(self) -> int:
        return dp.worker_pid(self.socket)

    def new_worker(self, old: int) -> int:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if (pid := self.worker()) != old:
                    return pid
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"no reload: the worker is still {old}; {self.log()}")

    def check(self, before: list[Obj], change: Change) -> dict[str, Any] | None:
        """``routegate check -o json`` of the changed object against the state before: its prediction."""
        if change.obj is None:
            return None  # check applies manifests; a delete is not one
        state = self.tmp / f"state{self.states}"
        state.mkdir()
        (state / "all.yaml").write_text(yaml.safe_dump_all(before))
        changed = self.tmp / f"change{self.states}.yaml"
        changed.write_text(yaml.safe_dump(change.obj))
        out = io.StringIO()
        with redirect_stdout(out):
            code = cli.main(["check", "--haproxy", self.binary, "--dataplane-version", self.version, "--templates",
                             str(self.templates), "--state", str(state), "-f", str(changed), "-o", "json"])
        assert code == 0, out.getvalue()
        report = json.loads(out.getvalue())
        assert report["results"][0]["prediction"] == report["prediction"]
        prediction: dict[str, Any] = report["prediction"]
        return prediction

    def stop(self) -> None:
        if self.master is not None and self.master.poll() is None:
            os.killpg(self.master.pid, signal.SIGTERM)
            try:
                self.master.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.master.pid, signal.SIGKILL)
                self.master.wait(5)


@pytest.fixture(params=["2.8", "3.2", "3.4"])
def layout(request: pytest.FixtureRequest, tmp_path: Path, haproxy_path: str) -> Iterator[Layout]:
    version = request.param
    binary = haproxy_path if version == "2.8" else dp.binary_of(version)
    backend_port = dp.free_port()
    with dp.backend_servers(ADDRS, backend_port):
        made = Layout(tmp_path, binary, version)
        made.backend_port = backend_port  # type: ignore[attr-defined]
        try:
            yield made
        finally:
            made.stop()


def summary(prediction: Any) -> tuple[str, int]:
    if isinstance(prediction, dict):
        return prediction["action"], int(prediction.get("commands", 0))
    return str(prediction.action), prediction.commands


def test_webhook_check_and_reconcile_predict_what_is_applied(layout: Layout) -> None:
    asyncio.run(_rows(layout))


async def _rows(layout: Layout) -> None:
    bp = layout.backend_port  # type: ignore[attr-defined]
    before = objects(layout.port, layout.extra_port, bp)
    first = await layout.reconciler.reconcile(layout.state(before))
    assert first.result is Result.PROMOTED and first.promoted is not None
    # the first promotion: nothing runs yet and no pid file exists, so the reload cannot be signalled
    assert layout.applier.last is not None and layout.applier.last.error, layout.applier.last
    await asyncio.to_thread(layout.start)
    assert await layout.follower.refresh() is None  # reconcile has not published what runs yet
    worker = await asyncio.to_thread(layout.worker)
    for i, (row, keywords, on_32, on_34) in enumerate(ROWS):
        after = objects(layout.port, layout.extra_port, bp, **keywords)
        change = the_change(before, after)
        published = await layout.follower.refresh()
        assert (published is not None) == (i > 0), published
        review = await layout.webhook.review(change, state=MemoryState(before, version=f"w{i}"))
        assert review.allowed, (row, review.message)
        checked = await asyncio.to_thread(layout.check, before, change)
        outcome = await layout.reconciler.reconcile(layout.state(after))
        applied = layout.applier.last
        want = on_34 if layout.version == "3.4" else on_32
        if want == NONE:
            assert outcome.result is Result.UNCHANGED, (row, outcome)
            assert review.prediction is not None and summary(review.prediction) == (NONE, 0), (row, review.notes)
            assert checked is not None and summary(checked) == (NONE, 0), (row, checked)
            continue
        assert outcome.result is Result.PROMOTED and applied is not None and applied.prediction is not None, row
        got = summary(applied.prediction)
        assert got[0] == want and applied.action == want, (row, applied)
        if i == 0:  # §6: what the data plane runs was read over the socket, so this is planned from it
            assert applied.planned_from == first.promoted.version, applied
        assert review.prediction is not None and summary(review.prediction) == got, (row, review.notes, applied)
        assert review.prediction.note() in review.notes
        if checked is not None:
            assert summary(checked) == got, (row, checked, applied)
        if want == RELOAD:
            worker = await asyncio.to_thread(layout.new_worker, worker)
        else:
            assert await asyncio.to_thread(layout.worker) == worker, f"{row}: the worker changed"
        before = after
    # the last row's traffic: the header value and the second listener reached the data plane
    assert "x-env=two" in (await asyncio.to_thread(dp.get, layout.port, "a.example.com"))[1]
    assert (await asyncio.to_thread(dp.get, layout.extra_port, "b.example.com"))[0] == 200
