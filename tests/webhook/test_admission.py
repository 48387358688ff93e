"""Admission control: bounded concurrency in FIFO order, deadlines known up front, a bounded queue,
and the verdict cache that answers identical requests once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from validators.changes import Change, Operation
from validators.objects import Ref
from webhook import admission
from webhook.admission import Admission, Refused
from webhook.verdictcache import VerdictCache, content_hash
from webhook.verdicts import Decision, Verdict


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def seed(queue: Admission, clock: FakeClock, seconds: float, times: int = 3) -> None:
    """Give the queue a history: ``times`` reviews that each took ``seconds``."""
    for _ in range(times):
        async def work() -> None:
            clock.now += seconds
        await queue.run(work, deadline=clock.now + 1000)


async def test_at_most_concurrency_reviews_run_and_the_rest_wait_their_turn_in_order() -> None:
    queue = Admission(concurrency=2)
    running, peak, order = 0, 0, []

    async def work(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        order.append(i)
        return i

    loop = asyncio.get_running_loop()
    results = await asyncio.gather(*(queue.run(lambda i=i: work(i), deadline=loop.time() + 30) for i in range(8)))
    assert results == list(range(8))
    assert peak == 2
    assert order[:2] == [0, 1] and sorted(order) == list(range(8))
    assert queue.running == 0 and queue.waiting == 0


async def test_a_review_that_cannot_finish_before_its_deadline_is_refused_without_starting() -> None:
    clock = FakeClock()
    queue = Admission(concurrency=1, clock=clock)
    await seed(queue, clock, 1.0)
    release = asyncio.Event()

    async def hold() -> None:
        await release.wait()

    holder = asyncio.ensure_future(queue.run(hold, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    started = []

    async def work() -> str:
        started.append(True)
        return "done"

    # Busy, nobody waiting: expected finish = half the running review + one review = 1.5 s.
    with pytest.raises(Refused) as refused:
        await queue.run(work, deadline=clock.now + 1.2)
    assert refused.value.reason == "late" and "deadline" in str(refused.value)
    assert not started and queue.waiting == 0
    admitted = asyncio.ensure_future(queue.run(work, deadline=clock.now + 2.0))
    await asyncio.sleep(0)
    assert queue.waiting == 1
    release.set()
    assert await admitted == "done"
    await holder
    assert queue.running == 0


async def test_a_review_whose_turn_comes_too_late_is_refused_then() -> None:
    clock = FakeClock()
    queue = Admission(concurrency=1, clock=clock)
    await seed(queue, clock, 1.0)
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()
        clock.now += 5.0  # the review ahead took far longer than the estimate

    holder = asyncio.ensure_future(queue.run(slow, deadline=clock.now + 1000))
    await asyncio.sleep(0)
    called = []

    async def work() -> None:
        called.append(True)

    late = asyncio.ensure_future(queue.run(work, deadline=clock.now + 3.0))
    await asyncio.sleep(0)
    release.set()
    await holder
    with pytest.raises(Refused, match="after its deadline"):
        await late
    assert not called and queue.running == 0


async def test_a_waiting_review_gives_up_as_soon_as_the_review_ahead_shows_it_cannot_be_in_time() -> None:
    queue = Admission(concurrency=1, recheck=0.01)  # no history: the running review is all there is to go by
    release = asyncio.Event()
    loop = asyncio.get_running_loop()
    holder = asyncio.ensure_future(queue.run(release.wait, deadline=loop.time() + 30))
    await asyncio.sleep(0)
    called = []

    async def work() -> None:
        called.append(True)

    with pytest.raises(Refused, match="ahead of it"):
        await queue.run(work, deadline=loop.time() + 0.5)
    assert not holder.done(), "refused while the review ahead still ran, not when its turn came"
    assert not called and queue.waiting == 0
    release.set()
    await holder
    assert queue.running == 0


async def test_a_full_queue_refuses_at_once() -> None:
    queue = Admission(concurrency=1, max_waiting=2)
    release = asyncio.Event()
    loop = asyncio.get_running_loop()
    tasks = [asyncio.ensure_future(queue.run(release.wait, deadline=loop.time() + 30)) for _ in range(3)]
    await asyncio.sleep(0)
    assert queue.running == 1 and queue.waiting == 2
    with pytest.raises(Refused) as refused:
        await queue.run(release.wait, deadline=loop.time() + 30)
    assert refused.value.reason == "full"
    release.set()
    await asyncio.gather(*tasks)


async def test_a_cancelled_waiter_gives_up_its_place_and_no_slot_leaks() -> None:
    queue = Admission(concurrency=1)
    release = asyncio.Event()
    loop = asyncio.get_running_loop()
    holder = asyncio.ensure_future(queue.run(release.wait, deadline=loop.time() + 30))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(queue.run(release.wait, deadline=loop.time() + 30))
    after = asyncio.ensure_future(queue.run(release.wait, deadline=loop.time() + 30))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    release.set()
    await holder
    await after
    assert waiter.cancelled()
    assert queue.running == 0 and queue.waiting == 0


async def test_a_started_review_runs_under_its_deadline() -> None:
    queue = Admission(concurrency=1)
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        await queue.run(lambda: asyncio.sleep(5), deadline=loop.time() + 0.05)
    assert queue.running == 0 and queue.typical() is not None


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
