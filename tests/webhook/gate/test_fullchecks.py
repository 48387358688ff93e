"""The background full check: it checks the whole state once it settles, and counts a disagreement
when it blames an object whose delta review passed haproxy -c (forced here with a Gate whose
closure leaves the culprit's broken line out)."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from haproxy_check.check import sandboxes
from haproxy_check.check.checker import Checker
from haproxy_check.check.sandboxes import Runner
from haproxy_check.render.rendering import Renderer
from haproxy_check.results import CheckResult, HAProxyBinary, RenderResult
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects
from validators.changes import Change, Operation
from validators.objects import KINDS, Ref
from validators.states import MemoryState, Overlay, State
from webhook.gate import fullchecks
from webhook.gate.fullchecks import FullChecker
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision
from webhook.sources import StaticSource

pytestmark = pytest.mark.haproxy


def named(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == name))  # type: ignore[index]


def disagreements(kind: str) -> float:
    return REGISTRY.get_sample_value("routegate_delta_disagreements_total", {"kind": kind}) or 0.0


class HidingRenderer:
    """The real renderer, except that a review's render (subject set) keeps only the subject's first
    rule: a delta check that wrongly passes a broken route, which the full check must catch."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def render(self, state: State, *, subject: Ref | None = None) -> RenderResult:
        obj = state.get(subject.kind, subject.namespace, subject.name) if subject is not None else None
        if obj is not None:
            trimmed = copy.deepcopy(dict(obj))
            trimmed["spec"]["rules"] = trimmed["spec"]["rules"][:1]
            state = Overlay(state, Change(Operation.UPDATE, trimmed, obj))
        result: RenderResult = self.inner.render(state, subject=subject)
        return result


async def test_a_full_check_that_blames_a_delta_allow_counts_a_disagreement(gate: Gate) -> None:
    blind = Gate(rules=gate.rules, renderer=HidingRenderer(gate.renderer), checker=gate.checker)
    broken = named("broken")
    checker = FullChecker(blind, StaticSource(MemoryState([*load_objects(STATE_DIR), broken], version="v2")))
    checker.attach()
    verdict = await blind.review(Change(Operation.CREATE, broken), state=MemoryState(load_objects(STATE_DIR)),
                                 reload_note=False)
    assert verdict.decision is Decision.ALLOW, verdict.message
    before = disagreements("HTTPRoute")
    found = await checker.check_once()
    assert [str(d.ref) for d in found] == ["HTTPRoute capture/broken"]
    assert disagreements("HTTPRoute") == before + 1
    assert REGISTRY.get_sample_value("routegate_full_check_failing") == 1.0
    assert await checker.check_once() == [], "one delta verdict is counted once"


async def test_a_dry_run_or_an_object_changed_since_is_no_disagreement(gate: Gate) -> None:
    broken = named("broken")
    checker = FullChecker(gate, StaticSource(MemoryState([*load_objects(STATE_DIR), broken], version="v3")))
    passed = await gate.review(Change(Operation.CREATE, named("shop")), state=MemoryState(load_objects(STATE_DIR)))
    checker.record(Change(Operation.CREATE, broken, dry_run=True), passed)  # a dry run is never stored
    changed = copy.deepcopy(broken)
    changed["spec"]["hostnames"] = ["elsewhere.example.com"]
    checker.record(Change(Operation.CREATE, changed), passed)  # the stored spec is not the one judged
    try:
        assert await checker.check_once() == []
        assert checker.last is not None and not checker.last.ok
    finally:
        checker.close()


def test_a_remembered_delta_verdict_keeps_no_state_alive_through_its_status(gate: Gate) -> None:
    """A verdict's status is worked out when first read, from the state its render saw: remembered as it
    came (up to a thousand, across state versions), each would keep that state alive."""
    import functools
    import gc
    import weakref

    from haproxy_check.render.laterstatuses import Statuses
    from webhook.gate.verdicts import Verdict

    class Seen:
        """Stands for the state a render saw."""

    def remembered() -> weakref.ref[Seen]:
        seen = Seen()
        statuses = Statuses(functools.partial(lambda state: {"HTTPRoute capture/shop": {"seen": id(state)}}, seen))
        verdict = Verdict(Decision.ALLOW, Ref("HTTPRoute", "capture", "shop"),
                          status=statuses.get("HTTPRoute capture/shop", {}))
        checker.record(Change(Operation.CREATE, named("shop")), verdict)
        return weakref.ref(seen)

    checker = FullChecker(gate, StaticSource(MemoryState(load_objects(STATE_DIR), version="held")))
    alive = remembered()
    gc.collect()
    assert alive() is None


async def test_the_loop_checks_the_state_once_it_settles(gate: Gate) -> None:
    source = StaticSource(MemoryState(load_objects(STATE_DIR), version="settled"))
    checker = FullChecker(gate, source, debounce=0.05, poll=0.02)
    task = asyncio.ensure_future(checker.run())
    try:
        async with asyncio.timeout(20):
            while checker.checked_version != "settled":  # noqa: ASYNC110 - polling the monitor's own state
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert checker.last is not None and checker.last.ok
    assert REGISTRY.get_sample_value("routegate_full_check_failing") == 0.0


class CountingRenders:
    """The real renderer, counting renders of the whole state."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.whole = 0

    def render(self, state: State, *, subject: Ref | None = None, previous: Any = None) -> RenderResult:
        if subject is None:
            self.whole += 1
        result: RenderResult = self.inner.render(state, subject=subject, previous=previous)
        return result


async def test_the_full_check_waits_while_reviews_wait_or_run(gate: Gate) -> None:
    renders = CountingRenders(gate.renderer)
    counting = Gate(rules=gate.rules, renderer=renders, checker=gate.checker)
    reviews = {"busy": True}
    checker = FullChecker(counting, StaticSource(MemoryState(load_objects(STATE_DIR), version="busy")),
                          busy=lambda: reviews["busy"], yield_poll=0.01)
    try:
        run = asyncio.ensure_future(checker.check_once())
        await asyncio.sleep(0.2)
        assert renders.whole == 0 and not run.done(), "no render while reviews are pending"
        reviews["busy"] = False
        assert await run == []
        assert renders.whole == 1 and checker.yielded == 1
        assert checker.last is not None and checker.last.ok
    finally:
        checker.close()


def test_the_full_checks_haproxy_runs_at_the_lowest_priority(gate: Gate, tmp_path: Path) -> None:
    checker = FullChecker(gate, StaticSource(MemoryState(load_objects(STATE_DIR))))
    checker.close()
    assert isinstance(checker.checker, Checker) and checker.checker is not gate.checker
    assert checker.checker.runner.niceness == fullchecks.LOWEST
    assert checker.checker.binary == gate.checker.binary
    # What the niced runner's child really gets: a stand-in binary that prints its own nice value.
    script = tmp_path / "print-nice"
    script.write_text("#!/bin/sh\ncut -d' ' -f19 /proc/self/stat\n")
    script.chmod(0o755)
    before = os.getpriority(os.PRIO_PROCESS, 0)
    for niceness, want in ((fullchecks.LOWEST, fullchecks.LOWEST), (0, before)):
        runner = Runner(str(script), niceness=niceness, isolation=sandboxes.NO_INIT_ADDR)
        out = asyncio.run(runner.run(tmp_path))
        assert out.exit_code == 0 and int(out.output.split()[-1]) == want, out.output


def test_closing_stops_a_worker_process_in_the_middle_of_a_render(gate: Gate) -> None:
    """A stopped server leaves no render behind (an orphan rendering at the lowest priority for minutes)."""
    checker = FullChecker(gate, StaticSource(MemoryState(load_objects(STATE_DIR))))
    busy = checker._pool.submit(time.sleep, 60)  # a render that takes long
    workers = getattr(checker._pool, "_processes", {})
    for _ in range(200):  # the worker is up and has the job
        if workers and busy.running():
            break
        time.sleep(0.05)
    assert workers and busy.running()
    pids = [worker.pid for worker in workers.values()]
    checker.close()
    for pid in pids:
        assert sandbox_gone(pid), f"the full check's worker {pid} still runs after close()"


def sandbox_gone(pid: int) -> bool:
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except (FileNotFoundError, ProcessLookupError):  # reaped, or reaped while being read
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _settled(result: CheckResult) -> CheckResult:
    return dataclasses.replace(result, duration=0.0)


@pytest.mark.parametrize("with_broken", [False, True], ids=["passing", "failing"])
async def test_the_worker_checks_its_render_itself_as_the_server_would(gate: Gate, with_broken: bool) -> None:
    """The worker process sends back the check's result, not the render: the same result (alerts traced
    to the same objects) as a check of the whole render in the server."""
    objects = [*load_objects(STATE_DIR), *([named("broken")] if with_broken else [])]
    state = MemoryState(objects, version="worker")
    checker = FullChecker(gate, StaticSource(state))
    try:
        assert [job() for job in checker._jobs(state)][-1] is None, "the render stays in the worker"
        assert fullchecks._kept, "kept for the check"  # the jobs ran here: they kept the render in this process
        fullchecks._kept.clear()
        await checker.check_once()
    finally:
        checker.close()
    render = gate.renderer.render(gate.scope.view(state), subject=None)
    here = await checker.checker.check(render)
    assert checker.last is not None and here.ok is not with_broken
    assert _settled(checker.last) == _settled(here)
    if with_broken:
        assert "HTTPRoute capture/broken" in {str(a.origin.ref) for a in here.alerts if a.origin is not None}
    # what the state loads is not what the data plane has loaded: predictions read that from reconcile
    assert gate.loaded.current() is None


def test_a_worker_without_a_kept_render_says_so() -> None:
    spec = fullchecks.CheckSpec(HAProxyBinary("/nonexistent/haproxy", "3.2.0"), 1.0, None, sandboxes.NO_INIT_ADDR, 0)
    fullchecks._kept.clear()
    with pytest.raises(RuntimeError, match="holds no render"):
        fullchecks._check_kept(spec)


async def test_a_check_that_times_out_in_the_worker_could_not_decide(gate: Gate) -> None:
    assert isinstance(gate.checker, Checker)
    hurried = Gate(rules=gate.rules, renderer=gate.renderer,
                   checker=Checker(gate.checker.binary, timeout=0.0001, isolation=gate.checker.isolation))
    checker = FullChecker(hurried, StaticSource(MemoryState(load_objects(STATE_DIR), version="hurried")))
    before = REGISTRY.get_sample_value("routegate_full_checks_total", {"result": "undecided"}) or 0.0
    try:
        assert await checker.check_once() == []
    finally:
        checker.close()
    assert checker.last is None and checker.checked_version is None
    assert REGISTRY.get_sample_value("routegate_full_checks_total", {"result": "undecided"}) == before + 1


@pytest.mark.parametrize("chunk", [1, 3, 10_000])
def test_the_worker_renders_the_objects_handed_over_in_chunks_as_one_list(gate: Gate, chunk: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks (each pickled on its own: the executor keeps the last one sent) make the same render as
    the whole list at once, in the same order; a render after an earlier, unfinished hand-over starts
    afresh."""
    monkeypatch.setattr(fullchecks, "CHUNK", chunk)
    state = MemoryState([*load_objects(STATE_DIR), named("broken")], version="chunks")
    checker = FullChecker(gate, StaticSource(state))
    checker.close()
    assert isinstance(gate.renderer, Renderer)
    fullchecks._received[:] = [named("shop")]  # left over by a hand-over that never rendered
    jobs = checker._jobs(state)
    objects = [o for kind in KINDS for o in gate.scope.view(state).list(kind)]
    assert len(jobs) == -(-len(objects) // chunk) + 1  # the chunks, then the render
    for job in jobs[:-1]:
        job()
    assert fullchecks._received == objects
    fullchecks._received.clear()
    for job in jobs[:-1]:
        job()
    whole = fullchecks._render_whole(gate.renderer.settings, (), objects, state.version)
    chunked = fullchecks._render_received(gate.renderer.settings, (), state.version, keep=False)
    assert chunked is not None and not fullchecks._received
    assert (chunked.files, chunked.origins, chunked.findings) == (whole.files, whole.origins, whole.findings)
    assert chunked.description == whole.description


def test_an_empty_state_renders_nothing_left_over(gate: Gate) -> None:
    state = MemoryState([], version="empty")
    checker = FullChecker(gate, StaticSource(state))
    checker.close()
    fullchecks._received[:] = [named("shop")]
    jobs = checker._jobs(state)
    for job in jobs[:-1]:
        job()
    assert fullchecks._received == []
