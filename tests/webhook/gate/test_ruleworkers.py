"""Per-object rules of a big batch in forked workers: the verdicts are the in-process ones."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.webhook.clirun import in_process
from tests.webhook.conftest import STATE_DIR, load_objects
from tests.webhook.gate.test_gates import batch, many_shops, named, state_with
from validators import checks
from validators.changes import Change, Operation
from validators.states import State
from webhook.gate import batching, ruleworkers
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision, Verdict

pytestmark = pytest.mark.haproxy


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ruleworkers, "MIN_ITEMS", 2)


class CountingRules:
    """The gate's rules, counting the calls made in this process (a forked worker counts its own copy)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.enforcement = inner.enforcement
        self.calls = 0

    def run(self, change: Change, state: State) -> checks.Result:
        self.calls += 1
        result: checks.Result = self.inner.run(change, state)
        return result


class InWorkers(CountingRules):
    """The gate's rules, doing ``in_worker`` first in a forked worker process (the parent's runs are as usual)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.parent = os.getpid()

    def in_worker(self) -> None:
        raise NotImplementedError

    def run(self, change: Change, state: State) -> checks.Result:
        if os.getpid() != self.parent:
            self.in_worker()
        return super().run(change, state)


class DyingInWorkers(InWorkers):
    """Rules whose worker processes die on their first input."""

    def in_worker(self) -> None:
        os._exit(3)


def without_timings(verdicts: list[Verdict]) -> list[Verdict]:
    return [replace(v, timings={}) for v in verdicts]


def gateway() -> dict[str, Any]:
    return next(o for o in load_objects(STATE_DIR) if o["kind"] == "Gateway")


async def test_forked_workers_give_the_in_process_verdicts(gate: Gate, small_batches: None) -> None:
    counting = CountingRules(gate.rules)
    forked_gate = Gate(rules=counting, renderer=gate.renderer, checker=gate.checker)
    lonely = named("shop")  # attached nowhere: judged one by one, as the workers tell
    lonely["metadata"]["name"] = "lonely"
    lonely["spec"]["parentRefs"] = [{"name": "nowhere"}]
    items, combined = batch(gateway(), *many_shops(9), lonely, named("sticky"))
    alone = await gate.review_all(items, combined=combined)
    forked = await forked_gate.review_all(items, combined=combined, workers=2)
    assert without_timings(forked) == without_timings(alone)
    assert forked[-1].decision is Decision.DENY and forked[0].status, "a denial and a Gateway status came back"
    # Here: the warm-up and the chunks no worker had started when the render was done; the chunks
    # queued to the workers at once cannot be taken back, so at least one input was judged elsewhere.
    assert counting.calls < 1 + len(items), "the workers judged part of the batch"


async def test_a_failing_batch_with_workers_bisects_to_the_in_process_verdicts(gate: Gate,
                                                                               small_batches: None) -> None:
    items, combined = batch(*many_shops(7), named("broken"))
    alone = await gate.review_all(items, combined=combined)
    forked = await gate.review_all(items, combined=combined, workers=2)
    assert without_timings(forked) == without_timings(alone)
    assert [v.decision for v in forked].count(Decision.DENY) == 1


async def test_dead_workers_leave_their_inputs_to_this_process(gate: Gate, small_batches: None) -> None:
    dying = DyingInWorkers(gate.rules)
    dying_gate = Gate(rules=dying, renderer=gate.renderer, checker=gate.checker)
    items, combined = batch(*many_shops(6), named("sticky"))
    alone = await gate.review_all(items, combined=combined)
    forked = await dying_gate.review_all(items, combined=combined, workers=2)
    assert without_timings(forked) == without_timings(alone)
    assert dying.calls == len(items), "the warm-up (not judged again), then every other input here"


class DyingLateInWorkers(InWorkers):
    """Rules whose worker processes die a while after their first input: by then this process has taken
    back the chunks no worker started."""

    def in_worker(self) -> None:
        time.sleep(1.0)
        os._exit(3)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
async def test_workers_dying_after_chunks_were_taken_back_break_no_thread_of_the_pool(
        gate: Gate, small_batches: None) -> None:
    """A worker dying after this process took chunks back: every input is still judged here, and the
    pool's own thread fails the futures and ends the workers cleanly (a cancelled future made it raise
    InvalidStateError and end half-way on Python 3.11)."""
    import asyncio
    import threading

    raised: list[BaseException | None] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        dying = DyingLateInWorkers(gate.rules)
        dying_gate = Gate(rules=dying, renderer=gate.renderer, checker=gate.checker)
        items, combined = batch(*many_shops(12), named("sticky"))
        alone = await gate.review_all(items, combined=combined)
        forked = await dying_gate.review_all(items, combined=combined, workers=2)
        await asyncio.sleep(0.5)  # the pool's thread has seen the workers die
    finally:
        threading.excepthook = hook
    assert without_timings(forked) == without_timings(alone)
    assert raised == []


async def test_a_batch_without_statuses_gives_the_same_verdicts_without_them(gate: Gate,
                                                                            small_batches: None) -> None:
    """A caller that reports no statuses (a text report) is spared computing them, in workers or not."""
    items, combined = batch(gateway(), *many_shops(5), named("sticky"))
    full = await gate.review_all(items, combined=combined)
    assert any(v.status for v in full), "the Gateway and the routes have statuses"
    for workers in (0, 2):
        bare = await gate.review_all(items, combined=combined, workers=workers, with_status=False)
        assert [v.status for v in bare] == [{}] * len(items)
        assert without_timings(bare) == [replace(v, status={}) for v in without_timings(full)]


def test_too_few_inputs_or_one_worker_are_judged_in_process() -> None:
    assert not ruleworkers.RuleWorkers.usable(ruleworkers.MIN_ITEMS - 1, 2)
    assert not ruleworkers.RuleWorkers.usable(ruleworkers.MIN_ITEMS, 0)
    assert ruleworkers.RuleWorkers.usable(ruleworkers.MIN_ITEMS, 1)


def routes_with_one_denied(directory: Path) -> Path:
    """``directory`` with a routes.json of enough routes for forked rule workers, one of them denied."""
    shop = named("shop")
    routes = []
    for i in range(ruleworkers.MIN_ITEMS + 10):
        route = json.loads(json.dumps(shop))
        route["metadata"]["name"] = f"shop-{i}"
        route["spec"]["hostnames"] = [f"shop-{i}.example.com"]
        routes.append(route)
    routes.append(named("sticky"))
    (directory / "routes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": routes}))
    return directory


def test_check_reports_the_same_with_and_without_jobs(tmp_path: Path) -> None:
    """The CLI's ``main`` end to end (in process: the workers fork from this one as from the console's):
    enough inputs for the workers, one of them denied. The console's own exit with forked workers is
    test_cli_exit's."""
    routes_with_one_denied(tmp_path)
    runs = [in_process("check", "--state", str(STATE_DIR), "-f", str(tmp_path), "-o", "json", "--jobs", jobs)
            for jobs in ("0", "2")]
    assert [r.returncode for r in runs] == [1, 1], [r.stderr for r in runs]
    reports = [json.loads(r.stdout) for r in runs]
    for report in reports:
        for result in report["results"]:
            result.pop("timings", None)  # how long the shared render took differs, nothing else
    assert reports[0] == reports[1]
    assert sum(1 for r in reports[1]["results"] if r["decision"] == "deny") == 1


def test_jobs_must_be_a_count() -> None:
    run = in_process("check", "-f", str(STATE_DIR), "--jobs", "-1")
    assert run.returncode == 2 and "must be 0 or more, got -1" in run.stderr


def test_check_and_render_pause_collection_in_their_renders_and_serve_does_not(gate: Gate) -> None:
    from haproxy_check.render.rendering import Renderer
    from webhook.cli import checking

    assert isinstance(gate.renderer, Renderer) and not gate.renderer.pause_collection
    assert checking._one_shot(gate).renderer.pause_collection  # type: ignore[attr-defined]


def test_a_worker_sends_back_findings_status_and_attachment_as_plain_values() -> None:
    """The defaulted object stays in the worker (a batch verdict reads only the findings)."""
    import pickle

    from validators.findings import Finding, Severity

    finding = Finding("RG0101", "a message", ("spec", "rules", 0), Severity.WARN, subject=True, about="HTTPRoute a/b")
    outcome = ruleworkers.Prejudged(checks.Result([finding], {"kind": "HTTPRoute", "spec": {}}),
                                    {"parents": [{"conditions": []}]}, True)
    shipped = ruleworkers._shipped(outcome)
    assert all(type(part) in (list, dict, bool) for part in shipped)
    received = ruleworkers._received(pickle.loads(pickle.dumps(shipped)))
    assert received == replace(outcome, validated=checks.Result([finding], None))


async def test_concurrent_reviews_judged_together_run_their_rules_in_a_forked_worker(
        gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """The webhook's batches (``Gate.review_together``) send their rules, and the batching claims of the
    changes that pass them, to one forked worker: the verdicts are the in-process ones (a denial and
    defaulted objects included), and this process ran none of the rules and worked out no claim."""
    state = state_with(version="together")
    changes = [Change(Operation.CREATE, obj) for obj in (*many_shops(ruleworkers.MIN_REVIEWS), named("sticky"))]
    alone = await gate.review_together(changes, state=state, notes_for=0.0)
    counting = CountingRules(gate.rules)
    claimed: list[str] = []
    claim_of = batching.claim_of

    def counted_claim(change: Change, view: State) -> batching.Claim:
        claimed.append(str(change.ref))  # in this process only: a forked worker appends to its own copy
        return claim_of(change, view)

    monkeypatch.setattr(batching, "claim_of", counted_claim)
    forked_gate = Gate(rules=counting, renderer=gate.renderer, checker=gate.checker)
    forked_gate.review_workers = 1
    forked = await forked_gate.review_together(changes, state=state, notes_for=0.0)
    assert without_timings(forked) == without_timings(alone)
    assert forked[-1].decision is Decision.DENY and all(v.allowed for v in forked[:-1])
    assert counting.calls == 0, "every change's rules ran in the worker"
    assert claimed == [], "the worker worked out the claims beside the rules"


async def test_a_dead_review_worker_leaves_the_rules_to_this_process(gate: Gate) -> None:
    state = state_with(version="together")
    changes = [Change(Operation.CREATE, obj) for obj in (*many_shops(ruleworkers.MIN_REVIEWS), named("sticky"))]
    alone = await gate.review_together(changes, state=state, notes_for=0.0)
    dying = DyingInWorkers(gate.rules)
    dying_gate = Gate(rules=dying, renderer=gate.renderer, checker=gate.checker)
    dying_gate.review_workers = 1
    forked = await dying_gate.review_together(changes, state=state, notes_for=0.0)
    assert without_timings(forked) == without_timings(alone)
    assert dying.calls == len(changes)


async def test_few_concurrent_reviews_or_no_workers_keep_their_rules_here(gate: Gate) -> None:
    state = state_with(version="together")
    counting = CountingRules(gate.rules)
    few = Gate(rules=counting, renderer=gate.renderer, checker=gate.checker)
    few.review_workers = 1
    changes = [Change(Operation.CREATE, obj) for obj in many_shops(ruleworkers.MIN_REVIEWS - 1)]
    await few.review_together(changes, state=state, notes_for=0.0)
    assert counting.calls == len(changes)
    few.review_workers = 0
    counting.calls = 0
    await few.review_together([*changes, Change(Operation.CREATE, named("sticky"))], state=state, notes_for=0.0)
    assert counting.calls == len(changes) + 1


@pytest.mark.parametrize("held", ["gcpause", "index build"])
async def test_a_review_worker_forked_while_another_thread_holds_a_lock_of_the_rules_does_not_wait_for_it(
        gate: Gate, held: str) -> None:
    """The webhook forks while its other run renders in a thread: a lock that thread held at the fork
    (a collection pause, an index build) must not stay held in the worker, where no thread releases it."""
    import asyncio
    import threading

    from haproxy_check.render import gcpause
    from validators.views import indexes

    state = state_with(version=f"held-{held}")
    changes = [Change(Operation.CREATE, obj) for obj in many_shops(ruleworkers.MIN_REVIEWS)]
    # on an equal state of its own: ``state`` gets its indexes built in the worker, under the index lock
    twin = state_with(version=f"held-{held}")
    expected = [gate.rules.run(c, gate.scope.view(twin)) for c in changes]
    lock = gcpause._lock if held == "gcpause" else indexes._GUARD
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    counting = CountingRules(gate.rules)
    try:
        got = await asyncio.wait_for(ruleworkers.rules_of(counting, changes, gate.scope.view(state), workers=1), 30)
    finally:
        release.set()
        holder.join()
        ruleworkers.end_all(grace=0.5)
    assert counting.calls == 0, "the worker judged them"
    assert [r.findings for r, _ in got] == [r.findings for r in expected]
    assert [r.defaulted for r, _ in got] == [r.defaulted for r in expected]


def worker_pid(change: Change, result: checks.Result, view: State) -> int:
    """``rules_of``'s ``then``: which process ran the rules (pickled by name, so a module function)."""
    return os.getpid()


class SchemaRules:
    """The gate's rules under a schema set that can be swapped, as webhook.server.liveschemas swaps it."""

    def __init__(self, inner: Any) -> None:
        self.checks = inner
        self.enforcement = inner.enforcement
        self.schemas: object = object()

    def run(self, change: Change, state: State) -> checks.Result:
        result: checks.Result = self.checks.run(change, state)
        return result


async def test_batches_of_one_state_version_share_a_kept_review_worker_and_a_new_version_or_schema_set_forks_another(
        gate: Gate) -> None:
    """A burst's batches all meet one state version: one worker forked for it judges them all (no fork
    per batch), with the results a worker of its own would give; a new state version, or new CRD schemas,
    is judged by a new fork (a kept worker holds the state and schemas it was forked with)."""
    rules = SchemaRules(gate.rules)
    first, second = (state_with(version="kept-1"), state_with(version="kept-2"))

    async def pids(state: State, start: int) -> set[int]:
        changes = [Change(Operation.CREATE, obj) for obj in many_shops(start + ruleworkers.MIN_REVIEWS)[start:]]
        view = gate.scope.view(state)
        got = await ruleworkers.rules_of(rules, changes, view, workers=1, then=worker_pid)
        assert [r.findings for r, _ in got] == [gate.rules.run(c, view).findings for c in changes]
        return {pid for _, pid in got}

    try:
        once = await pids(first, 0)
        assert len(once) == 1 and os.getpid() not in once, "one forked worker judged the batch"
        assert await pids(first, 20) == once, "the next batch of the version went to the same worker"
        other = await pids(second, 40)
        assert other != once, "a new state version is judged by a new fork"
        rules.schemas = object()
        assert await pids(second, 60) != other, "new schemas are judged by a new fork"
    finally:
        ruleworkers.end_all(grace=0.5)


class SlowInWorkers(InWorkers):
    """The gate's rules, slowed down in a forked worker only, so that batches queue behind each other."""

    def in_worker(self) -> None:
        time.sleep(0.05)


async def test_batches_queued_for_an_old_state_version_still_get_their_rules_when_a_new_version_arrives(
        gate: Gate) -> None:
    """A state change during a burst forks a worker for the new version and lets the old one go: the
    batches still queued for the old one are its reviews' rules, and must be judged, not cancelled (a
    cancelled one ended its review with CancelledError instead of a verdict)."""
    import asyncio

    rules = SlowInWorkers(gate.rules)
    old, new = state_with(version="queued-1"), state_with(version="queued-2")
    size = ruleworkers.MIN_REVIEWS
    shops = many_shops(7 * size)
    batches = [[Change(Operation.CREATE, obj) for obj in shops[k * size:(k + 1) * size]] for k in range(7)]
    try:
        queued = [asyncio.ensure_future(ruleworkers.rules_of(rules, changes, gate.scope.view(old), workers=1))
                  for changes in batches[:6]]
        # the first batch is being judged, the next one or two are handed to the worker, the rest wait
        await asyncio.sleep(0.2)
        assert not any(task.done() for task in queued)
        # Held as anything else may hold it (a traceback, a cycle not collected yet): the executor's own
        # thread cancels what its shutdown asked to cancel only while the executor object still exists.
        old_worker = ruleworkers._kept
        later = await ruleworkers.rules_of(rules, batches[6], gate.scope.view(new), workers=1)
        done = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True), 60)
    finally:
        ruleworkers.end_all(grace=0.5)
    del old_worker
    for changes, got in zip(batches, [*done, later], strict=True):
        assert not isinstance(got, BaseException), repr(got)
        view = gate.scope.view(old if changes is not batches[6] else new)
        assert [r.findings for r, _ in got] == [gate.rules.run(c, view).findings for c in changes]
