"""Admission control in front of the Gate: a bounded queue, deadlines, shared work, and a strictly
bounded executor.

Why: a review is CPU-bound Python (validators, render) plus one ``haproxy -c`` subprocess. Letting
every pending review run at once makes them share the GIL and the cores, so under a burst all of them
miss their deadline together, and the event loop (``/healthz``, ``/metrics``) starves with them. Here
(:class:`Batcher`):

- at most ``concurrency`` runs are inside the Gate at a time (2: one can render while the other
  waits for ``haproxy -c``); the reviews arriving meanwhile wait in FIFO order, at most
  ``max_waiting`` of them, and go in together when a run ends (``Gate.review_together``: one render
  and one ``haproxy -c`` per group of independent changes, so 200 reviews cost about one check, not
  200);
- each review carries its deadline (the AdmissionReview timeout). A review whose expected finish
  lies past its deadline is refused with :class:`Refused` ("could not decide") as soon as that is
  known, on arrival, while it waits or when its turn comes, instead of burning CPU on an answer the
  apiserver would no longer read; a batch holds only as many reviews as can finish before its
  earliest deadline; it runs until its last deadline, each review answered "could not decide" at
  its own;
- the CPU-bound steps run on a one-thread executor installed as the loop's default executor
  (``asyncio.to_thread`` uses it): Python holds the GIL while rendering, so a second thread would
  add no throughput, only a second competitor for the loop that answers ``/healthz``.

No HTTP here: the request handler passes the deadline in and maps :class:`Refused` to a verdict.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import structlog

from validators.changes import Change
from validators.states import State
from webhook.gate.verdicts import Verdict

log = structlog.get_logger("routegate.admission")

CONCURRENCY = 2
WORKERS = 1
SWITCH_INTERVAL = 0.0005  # seconds: how soon the rendering thread hands the GIL to the event loop
MAX_WAITING = 256
HISTORY = 32  # recent lone run durations the estimates are the median of
# Recent batched runs the cost of a batch is learned from: few, as a burst changes its pace within
# seconds (its first batches share the CPU with a thousand TLS handshakes and take three times as long
# as those after), and estimates held to the first ones refused reviews the later ones had time for.
RECENT_BATCHES = 4
RECHECK = 0.25  # seconds between a waiting review's looks at whether it can still finish in time
RESPONSE_MARGIN = 1.0  # seconds kept for answering before the apiserver's own timeout
# Seconds a review arriving while another run is under way waits for others to go in with it, though a
# run slot is free: the first reviews of a burst would each take the free slot alone, and under a burst
# a lone run takes about as long as a batch (a second), while hundreds wait behind both slots.
GATHER = 0.05

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


# Reviews judged together at most (one render of all their closures). A run's verdicts come at its end:
# runs of a few dozen hand verdicts out every few hundred milliseconds under a burst, and a run the
# machine slows loses little; past about 32, a review in a larger run costs no less (bench_gate P3).
MAX_BATCH = 64
NOTE_SHARE = 0.25  # share of a batch's time to its earliest deadline that reload notes may use
# Before a batch was measured, a batched review is guessed to cost what the fastest lone one spent
# outside haproxy -c (its rules, closure and render: the check is the part a batch shares; the first
# review of a state also builds its indexes).
UNSHARED = ("validate", "scope", "render")


class Judge(Protocol):
    """The Gate as the batcher calls it."""

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict: ...

    async def review_together(self, changes: Sequence[Change], *, state: State,
                              notes_for: float | None = None) -> list[Verdict]: ...


@dataclass(eq=False)
class _Waiting:
    change: Change
    state: State
    deadline: float
    verdict: asyncio.Future[Verdict]
    measured: bool = True  # whether its run's duration counts in the estimates
    queued: bool = False  # in the waiting line


class Batcher:
    """Admission control that shares work: a review arriving while the gate is idle runs at once, on
    its own; the reviews arriving while ``concurrency`` runs are in the gate wait, and when a run ends
    all of them that fit their deadlines go in together (``Gate.review_together``: one render and one
    ``haproxy -c`` per group of independent changes).

    Deadlines: a run takes about ``lone + per_item * n`` seconds for ``n`` reviews (both measured on
    the runs so far). A batch takes, in arrival order, as many waiting reviews of one state version as
    can finish before the earliest deadline among them; a review that cannot finish even alone is
    refused (:class:`Refused`, "could not decide") as soon as that is known: on arrival, while it waits
    (every ``recheck`` seconds), or when its turn comes. A run is cut off at its last deadline; a review
    whose own deadline passes before the run ends is refused then, and the others keep their run.
    """

    def __init__(self, gate: Judge, *, concurrency: int = CONCURRENCY, max_waiting: int = MAX_WAITING,
                 max_batch: int = MAX_BATCH, history: int = HISTORY, recheck: float = RECHECK,
                 gather: float = GATHER, clock: Callable[[], float] = time.monotonic) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.gate = gate
        self.concurrency = concurrency
        self.max_waiting = max_waiting
        self.max_batch = max_batch
        self.recheck = recheck
        self.gather = gather
        self._clock = clock
        self._waiting: deque[_Waiting] = deque()
        self._by_version: Counter[str] = Counter()  # waiting reviews per state version
        self._sweeping: asyncio.TimerHandle | None = None
        self._gathering: asyncio.TimerHandle | None = None
        self._runs: dict[asyncio.Task[None], tuple[float, float, int]] = {}  # run -> (started, expected end, n)
        self._lone: deque[float] = deque(maxlen=history)  # seconds of runs of one review
        # batched runs: their seconds, the seconds beyond a lone run, and their reviews beyond the first
        self._batched: deque[tuple[float, float, int]] = deque(maxlen=RECENT_BATCHES)
        self._unshared: deque[float] = deque(maxlen=history)  # seconds of lone runs outside haproxy -c
        self.batches = 0  # runs of more than one review (a counter for tests and logs)

    @property
    def running(self) -> int:
        return len(self._runs)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def estimate(self, n: int) -> float:
        """Seconds a run of ``n`` reviews takes now (0 before anything was measured)."""
        lone = statistics.median(self._lone) if self._lone else 0.0
        if self._batched:
            # A run of one review costs no more than a recent run of many: under a burst no review runs
            # alone, and the lone runs measured at its start (beside its TLS handshakes) are stale.
            lone = min(lone, min(seconds for seconds, _, _ in self._batched))
        now = self._clock()
        # A lone review running longer than that says the machine or the state got slower.
        for started, _, size in self._runs.values():
            if size == 1:
                lone = max(lone, now - started)
        return lone + self._per_item(lone) * max(n - 1, 0)

    def _per_item(self, lone: float) -> float:
        """Seconds a further review adds to a run: the recent batched runs' extra seconds over their extra
        reviews. Pooled, not a median of each batch's average: a small batch on a loaded machine pays
        mostly for what a batch shares (its render and ``haproxy -c``), so its average says a review costs
        30 times what it costs in a burst's batches of 64, and a median of a few such batches had every
        review of a burst refused. Before any batch: what a lone review spent outside ``haproxy -c``."""
        if self._batched:
            extra = sum(seconds for _, seconds, _ in self._batched)
            return extra / sum(reviews for _, _, reviews in self._batched)
        return min(self._unshared) if self._unshared else lone / 2

    def _free_in(self) -> float:
        """Seconds until a run slot is free."""
        if len(self._runs) < self.concurrency:
            return 0.0
        now = self._clock()
        return max(0.0, min(end for _, end, _ in self._runs.values()) - now)

    async def review(self, change: Change, state: State, *, deadline: float, measured: bool = True,
                     late: bool = False) -> Verdict:
        """The verdict on ``change`` against ``state`` by ``deadline`` (a ``clock()`` time), alone or
        together with other waiting reviews; raises :class:`Refused` when it cannot be in time.
        ``measured=False``: a run that says nothing about how long reviews take (the warm-up review,
        which builds what later reviews reuse). ``late``: it arrives late in its budget (its connection
        waited long for its TLS handshake turn): refused on arrival on a batch's guessed cost too, while
        no batch was measured yet (a burst's start), so that a server far behind answers it at once
        rather than at the end of its wait, as it did when such connections were told "busy"."""
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise Refused("it arrived after its deadline; retry", reason="late")
        if len(self._waiting) >= self.max_waiting:
            raise Refused(f"the server is overloaded ({len(self._waiting)} reviews waiting); retry", reason="full")
        verdict: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        item = _Waiting(change, state, deadline, verdict, measured)
        if len(self._runs) < self.concurrency and not self._waiting:
            if not self._runs:
                self._start([item])
            else:
                # Another run is under way and a slot is free: what arrives within ``gather`` seconds goes
                # in with this one (reviews rarely come alone while others run: a burst is starting).
                self._enqueue(item)
                if self._gathering is None:
                    self._gathering = asyncio.get_running_loop().call_later(self.gather, self._gathered)
        else:
            ahead = self._by_version[state.version]
            soonest = self._free_in() + self.estimate(1)
            expected = self._free_in() + self.estimate(min(ahead + 1, self.max_batch))
            # Refused on arrival only on measured costs, and only when it could not finish even if it
            # went next, alone. Not on the batch it would join: a burst's pace changes within seconds
            # (its first batches share the CPU with its TLS handshakes and take three times as long as
            # those after), and a refusal on the first ones' cost cannot be taken back when the later
            # ones would have had time for it (a third of a burst was refused that way). A review left
            # waiting is refused at its turn, or by the sweep, once it truly cannot finish. One arriving
            # late (it waited long for its TLS handshake turn) is refused on the batch it would join, so
            # that a server far behind answers it now rather than at the end of its wait.
            if self._lone and (soonest > remaining or (late and expected > remaining)):
                raise Refused(f"{ahead + len(self._runs)} reviews are ahead of it and it would finish in about "
                              f"{expected:.1f}s, after its deadline ({remaining:.1f}s left); retry", reason="late")
            self._enqueue(item)
        try:
            return await verdict
        finally:
            if not verdict.done():
                verdict.cancel()
            self._dequeue(item)

    def _enqueue(self, item: _Waiting) -> None:
        self._waiting.append(item)
        item.queued = True
        self._by_version[item.state.version] += 1
        if self._sweeping is None:
            self._sweeping = asyncio.get_running_loop().call_later(self.recheck, self._sweep)

    def _dequeue(self, item: _Waiting, *, removed: bool = False) -> None:
        """Take ``item`` out of the waiting line (``removed``: the caller took it out of the deque)."""
        if not item.queued:
            return
        item.queued = False
        if not removed:
            self._waiting.remove(item)
        self._by_version[item.state.version] -= 1
        if not self._by_version[item.state.version]:
            del self._by_version[item.state.version]

    def _sweep(self) -> None:
        """Every ``recheck`` seconds while reviews wait: refuse those that can no longer finish in time
        (one pass over the line, not a timer per waiting review: a burst of a thousand would wake the
        loop four thousand times a second)."""
        self._sweeping = None
        now, alone = self._clock(), self.estimate(1)
        late = [w for w in self._waiting if w.deadline - now < alone]
        if late:
            self._waiting = deque(w for w in self._waiting if w.deadline - now >= alone)
        for item in late:
            self._dequeue(item, removed=True)
            if not item.verdict.done():
                item.verdict.set_exception(Refused(
                    f"its turn did not come in time ({max(item.deadline - now, 0):.1f}s left, less than a "
                    f"review takes now); retry", reason="late"))
        if self._waiting:
            self._sweeping = asyncio.get_running_loop().call_later(self.recheck, self._sweep)

    def _gathered(self) -> None:
        self._gathering = None
        self._dispatch()

    def _dispatch(self) -> None:
        while len(self._runs) < self.concurrency and self._waiting:
            batch = self._take()
            if batch:
                self._start(batch)

    def _take(self) -> list[_Waiting]:
        """The next batch of waiting reviews of the first one's state version, all of which can finish
        before the earliest deadline among them; refuses the first when it cannot even alone.

        Two candidates: the line from its head, as many as fit (arrival order), and the most reviews
        that fit together, those with the most time left. The second is taken only when it decides more
        than the first and the batch the rest would still make after it: under a burst the oldest
        reviews have the least time, and a batch of one for a review about to expire (a run costs about
        a lone review plus a small share per further review) would let hundreds expire behind it."""
        while self._waiting and self._waiting[0].verdict.done():  # given up meanwhile
            self._dequeue(self._waiting.popleft(), removed=True)
        if not self._waiting:
            return []
        now = self._clock()
        first = self._waiting[0]
        if first.deadline - now < self.estimate(1):
            self._dequeue(self._waiting.popleft(), removed=True)
            first.verdict.set_exception(Refused(
                f"its turn came with {max(first.deadline - now, 0):.1f}s left, less than a review takes now "
                f"({self.estimate(1):.1f}s); retry", reason="late"))
            return []
        candidates = [w for w in self._waiting if not w.verdict.done() and w.state.version == first.state.version]
        batch: list[_Waiting] = []
        earliest = first.deadline
        for item in candidates:
            if len(batch) >= self.max_batch:
                break
            until = min(earliest, item.deadline)
            if self.estimate(len(batch) + 1) > until - now:
                break
            batch.append(item)
            earliest = until
        most = self._fitting(sorted((w.deadline - now for w in candidates), reverse=True))
        if most > len(batch):
            inline = set(map(id, batch))
            after = self._fitting(sorted((w.deadline - now for w in candidates if id(w) not in inline), reverse=True),
                                  spent=self.estimate(len(batch)))
            if most > len(batch) + after:
                threshold = sorted((w.deadline for w in candidates), reverse=True)[most - 1]
                batch = [w for w in candidates if w.deadline >= threshold][:most]
        taken = set(map(id, batch))
        self._waiting = deque(w for w in self._waiting if id(w) not in taken)  # one pass, not one per review
        for item in batch:
            self._dequeue(item, removed=True)
        return batch

    def _fitting(self, left: list[float], *, spent: float = 0.0) -> int:
        """How many of the reviews with ``left`` seconds (most first) can finish together in a run that
        starts ``spent`` seconds from now: the largest ``k`` whose ``k``-th most time covers a run of ``k``."""
        size = 0
        for k in range(1, min(len(left), self.max_batch) + 1):
            if spent + self.estimate(k) > left[k - 1]:
                break
            size = k
        return size

    @staticmethod
    def _expire(item: _Waiting, size: int) -> None:
        """``item``'s deadline passed while its run goes on for the others."""
        if not item.verdict.done():
            late = f"judged together with {size - 1} other reviews, " if size > 1 else ""
            item.verdict.set_exception(Refused(f"{late}it ran past its deadline; retry", reason="late"))

    def _start(self, batch: list[_Waiting]) -> None:
        started = self._clock()
        task = asyncio.ensure_future(self._run(batch, started))
        # An unmeasured run (size 0 here) does not tell how long a lone review takes while it runs.
        size = len(batch) if all(item.measured for item in batch) else 0
        self._runs[task] = (started, started + self.estimate(len(batch)), size)

    async def _run(self, batch: list[_Waiting], started: float) -> None:
        earliest = min(item.deadline for item in batch)
        # The run goes on until its last review's deadline; each review whose own deadline passes first is
        # answered "could not decide" then, alone. Cut at the earliest deadline, a run that a slowed
        # machine stretched lost every review of it, though most had seconds left (under a burst, a fifth
        # of the reviews judged were lost that way).
        latest = max(item.deadline for item in batch)
        loop = asyncio.get_running_loop()
        expiries = [loop.call_later(max(item.deadline - self._clock(), 0.0), self._expire, item, len(batch))
                    for item in batch if item.deadline < latest]
        try:
            async with asyncio.timeout(max(latest - self._clock(), 0.0)):
                if len(batch) == 1:
                    verdicts = [await self.gate.review(batch[0].change, state=batch[0].state)]
                    if batch[0].measured and all(step in verdicts[0].timings for step in UNSHARED):
                        self._unshared.append(sum(verdicts[0].timings[step] for step in UNSHARED))
                else:
                    self.batches += 1
                    # Reload notes (two renders of each change's closure) only when no review waits behind
                    # this batch: under a burst they would cost more than the verdicts themselves.
                    notes = NOTE_SHARE * (earliest - started) if not self._waiting else 0.0
                    verdicts = await self.gate.review_together([item.change for item in batch], state=batch[0].state,
                                                               notes_for=notes)
            for item, verdict in zip(batch, verdicts, strict=True):
                if not item.verdict.done():
                    item.verdict.set_result(verdict)
        except TimeoutError:
            late = f"judged together with {len(batch) - 1} other reviews, " if len(batch) > 1 else ""
            for item in batch:
                if not item.verdict.done():
                    item.verdict.set_exception(Refused(f"{late}it ran past its deadline; retry", reason="late"))
        except Exception as exc:  # handed to every waiting review; servers maps it to "could not decide"
            for item in batch:
                if not item.verdict.done():
                    item.verdict.set_exception(exc)
        finally:
            for expiry in expiries:
                expiry.cancel()
            seconds = self._clock() - started
            log.debug("run", reviews=len(batch), seconds=round(seconds, 3), waiting=len(self._waiting),
                      deadline_in=round(earliest - started, 3))
            if all(item.measured for item in batch):
                if len(batch) == 1:
                    self._lone.append(seconds)
                else:
                    lone = statistics.median(self._lone) if self._lone else 0.0
                    self._batched.append((seconds, max(seconds - lone, 0.0), len(batch) - 1))
            task = asyncio.current_task()
            if task is not None:
                self._runs.pop(task, None)
            self._dispatch()
