"""Admission control: bounded concurrency in FIFO order, waiting reviews judged together, deadlines
known up front, a bounded queue, and the verdict cache that answers identical requests once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from validators.changes import Change, Operation
from validators.objects import Ref
from validators.states import MemoryState, State
from webhook.gate.verdictcache import VerdictCache, content_hash
from webhook.gate.verdicts import Decision, Verdict
from webhook.server import admission
from webhook.server.admission import Batcher, Refused


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def change(i: int) -> Change:
    return Change(Operation.CREATE, {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                                     "metadata": {"name": f"r{i}", "namespace": "a"}})


STATE = MemoryState(version="s1")


class TimedGate:
    """A gate whose runs take ``lone`` seconds plus ``per_item`` per further review (on ``clock``), each
    held until ``release`` is set; it records every run's reviews."""

    def __init__(self, clock: FakeClock | None = None, *, lone: float = 1.0, per_item: float = 0.1) -> None:
        self.clock, self.lone, self.per_item = clock, lone, per_item
        self.release = asyncio.Event()
        self.release.set()
        self.runs: list[list[str]] = []
        self.running = self.peak = 0

    async def _run(self, changes: Sequence[Change]) -> list[Verdict]:
        self.runs.append([c.ref.name for c in changes])
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await self.release.wait()
            await asyncio.sleep(0.01)
            if self.clock is not None:
                self.clock.now += self.lone + self.per_item * (len(changes) - 1)
        finally:
            self.running -= 1
        return [Verdict(Decision.ALLOW, c.ref, notes=(c.ref.name,)) for c in changes]

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict:
        return (await self._run([change]))[0]

    async def review_together(self, changes: Sequence[Change], *, state: State,
                              notes_for: float | None = None) -> list[Verdict]:
        return await self._run(changes)


async def seed(queue: Batcher, times: int = 3) -> None:
    """Give the batcher a history of lone runs."""
    for i in range(times):
        await queue.review(change(1000 + i), STATE, deadline=queue._clock() + 1000)


async def test_reviews_arriving_while_the_gate_is_busy_are_judged_together_in_order() -> None:
    gate = TimedGate()
    gate.release.clear()
    queue = Batcher(gate, concurrency=2)
    loop = asyncio.get_running_loop()
    tasks = [asyncio.ensure_future(queue.review(change(i), STATE, deadline=loop.time() + 30)) for i in range(8)]
    await asyncio.sleep(0.1)
    assert queue.running == 2 and queue.waiting == 0
    gate.release.set()
    verdicts = await asyncio.gather(*tasks)
    assert [v.notes for v in verdicts] == [(f"r{i}",) for i in range(8)], "each review gets its own verdict"
    # r0 found the gate idle and ran alone; the others arrived while it ran and went in together in the
    # free slot (not r1 alone there, the rest behind both runs)
    assert gate.runs == [["r0"], [f"r{i}" for i in range(1, 8)]]
    assert gate.peak <= 2 and queue.batches == 1
    assert queue.running == 0 and queue.waiting == 0


async def test_reviews_of_different_state_versions_are_not_judged_together() -> None:
    gate = TimedGate()
    gate.release.clear()
    queue = Batcher(gate, concurrency=1)
    loop = asyncio.get_running_loop()
    other = MemoryState(version="s2")
    tasks = [asyncio.ensure_future(queue.review(change(i), STATE if i % 2 else other, deadline=loop.time() + 30))
             for i in range(5)]
    await asyncio.sleep(0.05)
    gate.release.set()
    await asyncio.gather(*tasks)
    assert gate.runs == [["r0"], ["r1", "r3"], ["r2", "r4"]]


async def test_a_review_that_cannot_finish_before_its_deadline_is_refused_without_starting() -> None:
    clock = FakeClock()
    gate = TimedGate(clock)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)
    gate.release.clear()
    holder = asyncio.ensure_future(queue.review(change(0), STATE, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    with pytest.raises(Refused) as refused:  # a lone run takes 1 s and one is running: finish in ~2 s
        await queue.review(change(1), STATE, deadline=clock.now + 1.5)
    assert refused.value.reason == "late" and "deadline" in str(refused.value)
    assert queue.waiting == 0
    admitted = asyncio.ensure_future(queue.review(change(2), STATE, deadline=clock.now + 2.5))
    await asyncio.sleep(0)
    assert queue.waiting == 1
    gate.release.set()
    assert (await admitted).notes == ("r2",)
    await holder
    assert ["r1"] not in gate.runs and queue.running == 0


async def test_a_late_arrival_is_refused_at_once_on_a_batchs_guessed_cost_before_any_batch_was_measured() -> None:
    """Before any batch was measured (a burst's start) a review waits for its turn rather than be refused on
    the guessed cost of the batch it would join; one that arrives late (its connection waited long for its
    TLS handshake turn, webhook.server.connections) is refused at once on that guess, so that a server far behind
    answers it now instead of at the end of its wait."""
    clock = FakeClock()
    gate = TimedGate(clock)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)  # lone runs of 1 s measured; no batch yet: a further review is guessed at 0.5 s
    gate.release.clear()
    holder = asyncio.ensure_future(queue.review(change(0), STATE, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    ahead = [asyncio.ensure_future(queue.review(change(i), STATE, deadline=clock.now + 1000)) for i in range(1, 11)]
    await asyncio.sleep(0)
    # about 1 s until the slot is free, then a run of 11 reviews of about 1 + 10 * 0.5 s: past 5 s
    with pytest.raises(Refused) as refused:  # at once: the run ahead is held until the end of the test
        await asyncio.wait_for(queue.review(change(11), STATE, deadline=clock.now + 5.0, late=True), 5)
    assert refused.value.reason == "late" and "after its deadline" in str(refused.value)
    waiting = asyncio.ensure_future(queue.review(change(12), STATE, deadline=clock.now + 5.0))
    await asyncio.sleep(0)
    assert queue.waiting == 11, "without late it waits for its turn"
    gate.release.set()
    await asyncio.gather(holder, *ahead, waiting, return_exceptions=True)
    assert all("r11" not in run for run in gate.runs)


async def behind_a_lone_run(queue: Batcher, gate: TimedGate, clock: FakeClock, name: int, *,
                            left: float) -> asyncio.Future[Verdict]:
    """Review ``r{name + 1}``, arrived with ``left`` seconds while the lone run of ``r{name}`` held the
    gate, once that run ended."""
    gate.release.clear()
    holder = asyncio.ensure_future(queue.review(change(name), STATE, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(queue.review(change(name + 1), STATE, deadline=clock.now + left))
    await asyncio.sleep(0)
    gate.release.set()
    await holder
    return waiting


async def test_a_review_whose_turn_comes_too_late_is_refused_then() -> None:
    clock = FakeClock()
    gate = TimedGate(clock)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)
    gate.lone = 5.0  # the run ahead takes far longer than the estimate
    late = await behind_a_lone_run(queue, gate, clock, 0, left=3.0)
    with pytest.raises(Refused, match="less than a review takes"):
        await late
    assert ["r1"] not in gate.runs and queue.running == 0


async def test_a_batch_holds_only_the_reviews_that_can_finish_before_its_earliest_deadline() -> None:
    clock = FakeClock()
    gate = TimedGate(clock, lone=1.0, per_item=1.0)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)
    await asyncio.gather(*(queue.review(change(i), STATE, deadline=clock.now + 1000) for i in range(3)))  # a batch
    gate.release.clear()
    holder = asyncio.ensure_future(queue.review(change(10), STATE, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    # 1 s for the run ahead; then a run of n takes n seconds: three fit a 4.5 s deadline, not four.
    tasks = [asyncio.ensure_future(queue.review(change(20 + i), STATE, deadline=clock.now + (4.5 if i == 0 else 50)))
             for i in range(6)]
    await asyncio.sleep(0)
    gate.release.set()
    await holder
    await asyncio.gather(*tasks)
    assert gate.runs[-3:] == [["r10"], ["r20", "r21", "r22"], ["r23", "r24", "r25"]], gate.runs


async def test_under_a_burst_the_batch_is_the_most_reviews_that_fit_not_the_head_alone() -> None:
    """The oldest review has the least time left: a batch limited by its deadline would hold six, and
    the fourteen behind it would expire while it runs. The batch is the twenty with more time (a run
    costs 1 s plus 0.01 s per further review), and only the one about to expire is refused."""
    clock = FakeClock()
    gate = TimedGate(clock, lone=1.0, per_item=0.01)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)
    await asyncio.gather(*(queue.review(change(i), STATE, deadline=clock.now + 1000) for i in range(3)))  # a batch
    gate.release.clear()
    holder = asyncio.ensure_future(queue.review(change(10), STATE, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    # after the 1 s run ahead: r20 has 1.05 s left, r21..r40 1.5 s each
    tasks = [asyncio.ensure_future(queue.review(change(20 + i), STATE, deadline=clock.now + (2.05 if i == 0 else 2.5)))
             for i in range(21)]
    await asyncio.sleep(0)
    gate.release.set()
    await holder
    answers = await asyncio.gather(*tasks, return_exceptions=True)
    assert gate.runs[-2:] == [["r10"], [f"r{20 + i}" for i in range(1, 21)]], gate.runs
    assert isinstance(answers[0], Refused) and all(isinstance(a, Verdict) and a.allowed for a in answers[1:])


async def batch_of(queue: Batcher, gate: TimedGate, clock: FakeClock, size: int, first: int) -> None:
    """One run of ``size`` reviews together (they wait behind a lone run that holds the gate)."""
    gate.release.clear()
    holder = asyncio.ensure_future(queue.review(change(first), STATE, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    tasks = [asyncio.ensure_future(queue.review(change(first + 1 + i), STATE, deadline=clock.now + 1000))
             for i in range(size)]
    await asyncio.sleep(0)
    gate.release.set()
    await holder
    await asyncio.gather(*tasks)
    assert gate.runs[-1] == [f"r{first + 1 + i}" for i in range(size)], gate.runs


async def test_the_cost_of_a_further_review_is_learned_from_every_review_batched_not_from_the_median_batch() -> None:
    """On a loaded machine a small batch pays mostly for what a batch shares (its render and check): a
    median of per-batch averages let one batch of 4 say a review costs 0.3 s where a burst's batches of
    64 cost 0.01 s each, and the burst was refused as if each batch would take 20 s. The cost per further
    review is the batches' extra seconds over their extra reviews."""
    clock = FakeClock()
    gate = TimedGate(clock, lone=1.0, per_item=0.3)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)
    await batch_of(queue, gate, clock, 4, first=0)
    gate.per_item = 0.01
    await batch_of(queue, gate, clock, 64, first=100)
    # extra seconds 3 * 0.3 + 63 * 0.01 over 66 extra reviews: 0.023 s each
    assert queue.estimate(64) == pytest.approx(1.0 + 63 * (0.9 + 0.63) / 66, rel=0.05)
    assert queue.estimate(64) < 2.5


async def test_once_a_burst_speeds_up_its_turns_are_judged_on_its_recent_batches_not_its_first_runs() -> None:
    """A burst's first runs share the CPU with its TLS handshakes (a lone run of 1 s, batches of 64 in
    2.3 s); the batches after take 0.5 s. A review whose turn comes with 0.8 s left then fits a batch,
    though it has less time than the stale lone run took: it is judged, not refused."""
    clock = FakeClock()
    gate = TimedGate(clock, lone=1.0, per_item=0.02)
    queue = Batcher(gate, concurrency=1, clock=clock)
    await seed(queue)
    await batch_of(queue, gate, clock, 64, first=0)
    gate.lone, gate.per_item = 0.3, 0.003
    for k in range(4):
        await batch_of(queue, gate, clock, 64, first=100 * (k + 1))
    assert queue.estimate(64) == pytest.approx(0.3 + 63 * 0.003, abs=0.02)
    tail = await behind_a_lone_run(queue, gate, clock, 900, left=1.1)  # 0.8 s left after the run ahead
    assert (await tail).allowed


async def test_a_full_queue_refuses_at_once() -> None:
    gate = TimedGate()
    gate.release.clear()
    queue = Batcher(gate, concurrency=1, max_waiting=2)
    loop = asyncio.get_running_loop()
    tasks = [asyncio.ensure_future(queue.review(change(i), STATE, deadline=loop.time() + 30)) for i in range(3)]
    await asyncio.sleep(0)
    assert queue.running == 1 and queue.waiting == 2
    with pytest.raises(Refused) as refused:
        await queue.review(change(9), STATE, deadline=loop.time() + 30)
    assert refused.value.reason == "full"
    gate.release.set()
    await asyncio.gather(*tasks)


async def test_a_cancelled_waiter_gives_up_its_place_and_no_slot_leaks() -> None:
    gate = TimedGate()
    gate.release.clear()
    queue = Batcher(gate, concurrency=1)
    loop = asyncio.get_running_loop()
    holder = asyncio.ensure_future(queue.review(change(0), STATE, deadline=loop.time() + 30))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(queue.review(change(1), STATE, deadline=loop.time() + 30))
    after = asyncio.ensure_future(queue.review(change(2), STATE, deadline=loop.time() + 30))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    gate.release.set()
    await holder
    await after
    assert waiter.cancelled() and gate.runs == [["r0"], ["r2"]]
    assert queue.running == 0 and queue.waiting == 0


async def test_a_started_run_is_cut_off_at_its_deadline() -> None:
    gate = TimedGate()
    gate.release.clear()
    queue = Batcher(gate, concurrency=1)
    loop = asyncio.get_running_loop()
    with pytest.raises(Refused, match="ran past its deadline"):
        await queue.review(change(0), STATE, deadline=loop.time() + 0.05)
    assert queue.running == 0 and queue.estimate(1) > 0


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("2.5s", 2.5),
                                               ("", None), ("10", None), ("ten", None), ("5x", None)])
def test_the_apiserver_timeout_is_read_as_a_go_duration(text: str, seconds: float | None) -> None:
    assert admission.parse_go_duration(text) == seconds


def test_the_review_budget_is_the_shorter_of_the_setting_and_the_apiserver_timeout() -> None:
    assert admission.review_budget(9.0, None) == 9.0
    assert admission.review_budget(9.0, "30s") == 9.0
    assert admission.review_budget(9.0, "5s") == 5.0 - admission.RESPONSE_MARGIN
    assert admission.review_budget(9.0, "bogus") == 9.0


# ------------------------------------------------------------------------------------ verdict cache


def route(value: str = "a", *, uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "default", "uid": uid, "resourceVersion": "7"},
            "spec": {"hostnames": [f"{value}.example.com"]}}


class Judge:
    def __init__(self, decision: Decision = Decision.ALLOW, *, fail: bool = False) -> None:
        self.calls = 0
        self.decision = decision
        self.fail = fail

    async def __call__(self) -> Verdict:
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("boom")
        return Verdict(self.decision, Ref("HTTPRoute", "default", "r"), timings={"render": 1.0})


async def test_a_dry_run_and_the_real_apply_of_one_object_are_judged_once() -> None:
    cache, judge = VerdictCache(), Judge()
    dry = Change(Operation.CREATE, route(uid="uid-dry-run"), dry_run=True)
    real = Change(Operation.CREATE, route(uid="uid-real"))
    first, reused_first = await cache.verdict(dry, "v1", judge)
    second, reused_second = await cache.verdict(real, "v1", judge)
    assert judge.calls == 1 and (reused_first, reused_second) == (False, True)
    assert second.decision is first.decision and second.ref == first.ref
    assert second.timings == {}, "a reused verdict does not report the first request's render time"


async def test_concurrent_identical_requests_share_one_judgement() -> None:
    cache, judge = VerdictCache(), Judge()
    change = Change(Operation.CREATE, route())
    got = await asyncio.gather(*(cache.verdict(change, "v1", judge) for _ in range(5)))
    assert judge.calls == 1
    assert sorted(reused for _, reused in got) == [False, True, True, True, True]


@pytest.mark.parametrize("other", [
    (Change(Operation.CREATE, route("b")), "v1"),  # other content
    (Change(Operation.CREATE, route()), "v2"),  # the state changed
    (Change(Operation.UPDATE, route(), route("old")), "v1"),  # another operation and old object
])
async def test_a_different_object_operation_or_state_is_judged_again(other: tuple[Change, str]) -> None:
    cache, judge = VerdictCache(), Judge()
    await cache.verdict(Change(Operation.CREATE, route()), "v1", judge)
    await cache.verdict(*other, judge)
    assert judge.calls == 2


async def test_could_not_decide_and_failures_are_not_kept() -> None:
    cache = VerdictCache()
    change = Change(Operation.CREATE, route())
    undecided = Judge(Decision.ERROR)
    await cache.verdict(change, "v1", undecided)
    await cache.verdict(change, "v1", undecided)
    assert undecided.calls == 2
    failing = Judge(fail=True)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await cache.verdict(change, "v1", failing)
    assert failing.calls == 2 and len(cache) == 0


async def test_a_new_state_version_lets_the_verdicts_of_the_old_one_go() -> None:
    """A request is judged against the state as it is now: the old version's verdicts are never asked
    for again, and what they hold (a status worked out when read holds its render's state) must go."""
    cache, judge = VerdictCache(), Judge()
    for name in ("a", "b"):
        await cache.verdict(Change(Operation.CREATE, route(name)), "v1", judge)
    assert len(cache) == 2
    await cache.verdict(Change(Operation.CREATE, route("a")), "v2", judge)
    assert len(cache) == 1 and judge.calls == 3
    await cache.verdict(Change(Operation.CREATE, route("a")), "v2", judge)
    assert judge.calls == 3, "the new version's verdicts are kept"


async def test_the_cache_is_bounded() -> None:
    cache, judge = VerdictCache(size=3), Judge()
    for i in range(5):
        await cache.verdict(Change(Operation.CREATE, route(str(i))), "v1", judge)
    assert len(cache) == 3
    await cache.verdict(Change(Operation.CREATE, route("0")), "v1", judge)  # evicted: judged again
    assert judge.calls == 6


def test_the_content_hash_ignores_bookkeeping_metadata_only() -> None:
    base = route()
    assert content_hash(base) == content_hash(route(uid="other"))
    assert content_hash(base) == content_hash({**base, "metadata": {**base["metadata"], "managedFields": [{}]}})
    assert content_hash(base) != content_hash({**base, "metadata": {**base["metadata"], "labels": {"a": "b"}}})
    assert content_hash(base) != content_hash(route("b"))
    assert content_hash(None) == ""


class SlowGate(TimedGate):
    """A TimedGate whose batched runs take ``seconds`` of real time."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def review_together(self, changes: Sequence[Change], *, state: State,
                              notes_for: float | None = None) -> list[Verdict]:
        await asyncio.sleep(self.seconds)
        return await self._run(changes)


async def test_a_review_whose_deadline_passes_during_its_run_is_refused_alone_and_the_run_goes_on() -> None:
    """A run that outlasts one review's deadline (a machine slower than the estimate) answers that review
    "could not decide" at its deadline and still decides the others, which had time left."""
    gate = SlowGate(0.5)
    gate.release.clear()
    queue = Batcher(gate, concurrency=1)
    loop = asyncio.get_running_loop()
    holder = asyncio.ensure_future(queue.review(change(0), STATE, deadline=loop.time() + 30))
    await asyncio.sleep(0)
    tasks = [asyncio.ensure_future(queue.review(change(i), STATE, deadline=loop.time() + (0.2 if i == 1 else 30)))
             for i in (1, 2, 3)]
    await asyncio.sleep(0)
    gate.release.set()
    await holder
    started = loop.time()
    answers = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(answers[0], Refused) and "ran past its deadline" in str(answers[0])
    assert [a.notes for a in answers[1:] if isinstance(a, Verdict)] == [("r2",), ("r3",)], answers
    assert gate.runs[-1] == ["r1", "r2", "r3"] and loop.time() - started >= 0.45
    assert queue.running == 0 and queue.waiting == 0
