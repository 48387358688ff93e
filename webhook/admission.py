"""Admission control in front of the Gate: a bounded queue, deadlines, and a strictly bounded executor.

Why: a review is CPU-bound Python (validators, render) plus one ``haproxy -c`` subprocess. Letting
every pending review run at once makes them share the GIL and the cores, so under a burst all of them
miss their deadline together, and the event loop (``/healthz``, ``/metrics``) starves with them. Here:

- at most ``concurrency`` reviews are inside the Gate at a time (2: one can render while the other
  waits for ``haproxy -c``); the others wait in FIFO order, at most ``max_waiting`` of them;
- each review carries its deadline (the AdmissionReview timeout). A review whose expected finish
  (the reviews ahead of it times how long a review takes now) lies past its deadline is refused
  with :class:`Refused` ("could not decide") as soon as that is known, on arrival or while it
  waits, instead of burning CPU on an answer the apiserver would no longer read; a review that got
  its turn runs under that deadline;
- the CPU-bound steps run on a one-thread executor installed as the loop's default executor
  (``asyncio.to_thread`` uses it): Python holds the GIL while rendering, so a second thread would
  add no throughput, only a second competitor for the loop that answers ``/healthz``.

No HTTP here: the request handler passes the deadline in and maps :class:`Refused` to a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

CONCURRENCY = 2
WORKERS = 1
MAX_WAITING = 256
HISTORY = 32  # recent review durations the wait estimate is the median of
RECHECK = 0.25  # seconds between a waiting review's looks at whether it can still finish in time
RESPONSE_MARGIN = 1.0  # seconds kept for answering before the apiserver's own timeout

_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class Refused(Exception):
    """The review was not started: it could not finish before its deadline, or the queue is full."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # "late" or "full": a bounded metric label


def parse_go_duration(text: str) -> float | None:
    """Seconds of a Go duration (``10s``, ``1m30s``, ``500ms``), as the apiserver puts the webhook's
    timeoutSeconds in ``?timeout=``; None when it is not one."""
    text = text.strip()
    if not text or _GO_DURATION.sub("", text):
        return None
    return sum(float(n) * _UNIT[u] for n, u in _GO_DURATION.findall(text))


def review_budget(configured: float, apiserver_timeout: str | None) -> float:
    """Seconds a review may take: the server's setting, shortened to the apiserver's timeout minus the
    time needed to answer (an answer after the apiserver gave up is wasted work)."""
    asked = parse_go_duration(apiserver_timeout) if apiserver_timeout else None
    if asked is None or asked <= 0:
        return configured
    return max(0.1, min(configured, asked - RESPONSE_MARGIN))


def bounded_executor(workers: int = WORKERS) -> ThreadPoolExecutor:
    """The executor for the loop's CPU-bound steps (``loop.set_default_executor``)."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="routegate-cpu")


class Admission:
    """Runs at most ``concurrency`` reviews at once, FIFO, refusing those that cannot meet their deadline."""

    def __init__(self, *, concurrency: int = CONCURRENCY, max_waiting: int = MAX_WAITING,
                 history: int = HISTORY, recheck: float = RECHECK,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.max_waiting = max_waiting
        self.recheck = recheck
        self._clock = clock
        self._running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._durations: deque[float] = deque(maxlen=history)
        self._started: dict[object, float] = {}  # the reviews in the gate now, by when they started

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def typical(self) -> float | None:
        """How long a review takes now: the median of recent ones, or longer when a review in the gate
        has already run longer (the state grew, the machine is busy; before the first review ended it
        is all there is to go by). None when nothing is known yet."""
        now = self._clock()
        running = max((now - t for t in self._started.values()), default=None)
        median = statistics.median(self._durations) if self._durations else None
        known = [x for x in (median, running) if x is not None]
        return max(known) if known else None

    def expected_finish(self, ahead: int) -> float:
        """Seconds from now until a review with ``ahead`` reviews queued before it would be done.

        The running reviews are on average half done; the queue drains ``concurrency`` at a time."""
        typical = self.typical()
        if typical is None:
            return 0.0
        busy = self._running >= self.concurrency
        start = (ahead / self.concurrency + 0.5) * typical if busy else 0.0
        return start + typical

    async def run(self, work: Callable[[], Awaitable[T]], *, deadline: float) -> T:
        """``await work()`` in its turn, under ``deadline`` (a ``clock()`` time).

        Raises :class:`Refused` without starting the work when it cannot finish in time (checked on
        arrival and again every ``recheck`` seconds while it waits), and TimeoutError when the work
        started but ran past the deadline."""
        if self._running >= self.concurrency or self._waiters:
            if len(self._waiters) >= self.max_waiting:
                raise Refused(f"the server is overloaded ({len(self._waiters)} reviews waiting); retry",
                              reason="full")
            self._refuse_if_late(deadline, ahead=len(self._waiters))
            await self._wait_turn(deadline)
        else:
            self._running += 1
        token = object()
        try:
            # Reviews ahead may have taken longer than expected: check again before spending CPU.
            remaining = deadline - self._clock()
            typical = self.typical()
            if remaining <= 0 or (typical is not None and typical > remaining):
                raise Refused(f"its turn came {self._late(remaining, typical)}; retry", reason="late")
            started = self._started[token] = self._clock()
            try:
                async with asyncio.timeout(remaining):
                    return await work()
            finally:  # a review cut off at its deadline still tells how long reviews take now
                del self._started[token]
                self._durations.append(self._clock() - started)
        finally:
            self._release()

    def _refuse_if_late(self, deadline: float, *, ahead: int) -> None:
        remaining = deadline - self._clock()
        expected = self.expected_finish(ahead)
        if expected > remaining:
            raise Refused(f"{ahead + self._running} reviews are ahead of it and it would finish in about "
                          f"{expected:.1f}s, after its deadline ({max(remaining, 0):.1f}s left); retry",
                          reason="late")

    @staticmethod
    def _late(remaining: float, typical: float | None) -> str:
        if remaining <= 0:
            return "after its deadline"
        return f"with {remaining:.1f}s left, less than a review takes now ({typical or 0:.1f}s)"

    async def _wait_turn(self, deadline: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            while True:
                await asyncio.wait([waiter], timeout=self.recheck)
                if waiter.done():
                    return  # _release handed its slot over: _running already counts this review
                # The reviews ahead are slower than thought: give up now, not when the turn comes.
                self._refuse_if_late(deadline, ahead=self._waiters.index(waiter))
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed over just as we gave up: pass it on
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):  # _release may have dropped it already
                    self._waiters.remove(waiter)
            raise

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot moves to the next waiter; _running is unchanged
                return
        self._running -= 1
