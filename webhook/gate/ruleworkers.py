"""The per-object part of judging many changes at once (``routegate check``), spread over processes.

``Gate.review_all`` judges thousands of inputs against one combined state: one render and one
``haproxy -c`` for all of them, and per input its rules (schema, CEL, HAProxy rules, cross-object) and
its status. The per-input part is pure CPU work in Python, so threads cannot share it out (the GIL);
worker processes can. They are forked from the gate's process, so the state, its indexes and the
compiled schemas and CEL programs come along as they are, without pickling ten thousand objects:
only input numbers go to a worker, and findings and statuses come back. Meanwhile the parent renders
and runs ``haproxy -c``; then it takes back the chunks no worker has started and judges them itself,
so every CPU stays busy to the end (one worker per other CPU).

A worker runs exactly ``rules.run`` and ``statuses.status_of`` as the gate would in-process: the
verdicts are the same (``tests/test_ruleworkers.py`` compares them). Where ``fork`` is not available,
for small batches, or when the workers die, the caller judges in-process as before.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import multiprocessing
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from haproxy_check.render import gcpause
from validators.changes import Change
from validators.checks import Result
from validators.crossobject import statuses
from validators.findings import Finding
from validators.states import State
from validators.views import attachments, indexes, scopes

log = structlog.get_logger("routegate.ruleworkers")

MIN_ITEMS = 200  # below this, forking costs more than it saves
CHUNK = 64  # inputs per task: few round trips, and still an even spread over the workers
# Concurrent reviews (``Gate.review_together``) whose rules go to a forked worker: from this many, the
# fork (about 10-20 ms of this process at 10,000 routes) costs less than the rules it takes off this
# process's GIL, which the event loop needs for the burst's TLS handshakes and requests.
MIN_REVIEWS = 8


class RuleChecks(Protocol):
    def run(self, change: Change, state: State) -> Result: ...


@dataclass(frozen=True, slots=True)
class Prejudged:
    """One input's per-object outcome: what ``Gate._batch_verdict`` would compute in-process. From a
    worker, ``validated.defaulted`` is None: a batch verdict reads only the findings (``_shipped``)."""

    validated: Result
    status: dict[str, Any] | None
    attached: bool  # not a route, or a route that attaches to some listener of the combined state


# What a worker sends back per input: plain values (findings, status, attached). Not the Prejudged and its
# Result themselves: a frozen dataclass unpickles field by field, and the defaulted object (a copy of the
# whole input) is never read; unpickling 20,000 of those took seconds of the parent, beside its render.
_Shipped = tuple[list[Finding], dict[str, Any] | None, bool]


def _shipped(outcome: Prejudged) -> _Shipped:
    return outcome.validated.findings, outcome.status, outcome.attached


def _received(shipped: _Shipped) -> Prejudged:
    findings, status, attached = shipped
    return Prejudged(Result(findings, None), status, attached)


@dataclass(frozen=True, slots=True)
class _Job:
    rules: RuleChecks
    scope: scopes.Scope
    items: Sequence[tuple[Change, State]]
    combined: State  # already seen through ``scope``
    with_status: bool  # whether the caller reports statuses (``prejudge_one``)
    claims: _Claims  # which chunks a worker started, which this process took back


class _Claims:
    """Who judges each chunk: a worker that starts one marks it started, and this process marks the ones
    it takes back; a worker skips a chunk taken back, and this process judges again a chunk whose worker
    skipped it. Two flags in memory shared with the forked workers, with no lock (a worker that died
    holding one would stop this process): when both sides mark one chunk at once, each may see the
    other's flag (the worker skips it and this process judges it) or neither (both judge it, and this
    process uses its own outcome), never a chunk nobody judges.

    Why not ``Future.cancel``: when a worker dies after a cancel, Python 3.11's pool sets the broken
    pool's exception on the cancelled future too, which raises in the pool's own thread; that thread
    then ends before failing the other futures and ending the other workers."""

    def __init__(self, count: int) -> None:
        fork = multiprocessing.get_context("fork")
        self.started = fork.RawArray("b", count)
        self.taken_back = fork.RawArray("b", count)

    def start(self, chunk: int) -> bool:
        """In a worker: whether to judge ``chunk`` (it was not taken back)."""
        self.started[chunk] = 1
        return not self.taken_back[chunk]

    def take_back(self, chunk: int) -> bool:
        """In this process: whether ``chunk`` is now this process's alone (no worker started it)."""
        self.taken_back[chunk] = 1
        return not self.started[chunk]

    def take_back_all(self) -> None:
        for chunk in range(len(self.taken_back)):
            self.taken_back[chunk] = 1


_job: _Job | None = None  # what a forked worker judges: set in the parent just before the fork


def attached(change: Change, combined: State) -> bool:
    """Not a route, or a route attached to some listener of ``combined`` (so the combined render has it)."""
    return change.ref.kind not in attachments.ROUTE_KINDS or bool(attachments.attach(change.subject, combined)[0])


def prejudge_one(rules: RuleChecks, scope: scopes.Scope, change: Change, state: State, combined: State, *,
                 with_status: bool = True) -> Prejudged:
    """The per-object outcome of one input (the same steps in a worker and in-process). ``with_status``:
    False when the caller reports no statuses (a text report), which spares computing them for every input."""
    validated = rules.run(change, scope.view(state))
    wanted = with_status and change.ref.kind in statuses.STATUS_KINDS
    status = statuses.status_of(change.subject, combined) if wanted else None
    return Prejudged(validated, status, attached(change, combined))


def _judge_chunk(number: int, indices: list[int]) -> list[_Shipped] | None:
    """The outcomes of chunk ``number`` (the inputs ``indices``), or None when this process took it back."""
    job = _job
    if job is None:  # pragma: no cover - only reachable if a worker were spawned, not forked
        raise RuntimeError("no job: rule workers must be forked from the judging process")
    if not job.claims.start(number):
        return None
    # A chunk allocates many small containers that die with it (findings, walks, CEL values), and a
    # worker also keeps what it memoizes: every collection during the chunk rescans those for cycles
    # that are not there (a few % of a worker's CPU at 10,000 routes). Paused per chunk (at most CHUNK
    # inputs); a worker forked inside the batch's own pause (``Gate.review_all``) inherits that one and
    # collects nothing until it ends, which a process living for one batch can afford.
    with gcpause.paused():
        return [_shipped(prejudge_one(job.rules, job.scope, *job.items[i], job.combined,
                                      with_status=job.with_status)) for i in indices]


def worker_count() -> int:
    """Worker processes to use beside this one: one per other CPU this process may run on (this one
    renders and then judges with them), none on a single CPU."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus - 1


def end_all(grace: float = 2.0) -> None:
    """End the worker processes this process forked and has not seen end: a pool that was shut down
    without waiting (``RuleWorkers.close``) lets its idle workers go on their own, which a process ending
    with ``os._exit`` would not wait for (they would be left blocked on their task queue), and the kept
    review worker (told to leave first). Each gets ``grace`` seconds to leave, then is terminated."""
    close_kept()
    children = multiprocessing.active_children()
    deadline = time.monotonic() + grace
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
    for child in children:
        if child.is_alive():
            child.terminate()
            child.join()


# set in the parent just before the kept worker's fork: the rules and the state view it judges against
_reviews: tuple[RuleChecks, State] | None = None


def _fresh_locks() -> None:
    """In a forked child: new copies of the locks the rules may take. The webhook forks its review worker
    while its other run renders in a thread (``Batcher``, two runs at a time); a lock that thread held at
    the fork (an index build, a collection pause) would stay held in the child, where that thread does
    not exist, and the worker would wait for it forever. An index half built then is built again here."""
    indexes._GUARD = threading.Lock()
    indexes._BUILDING.clear()
    gcpause._lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks)


def _rules_batch(changes: Sequence[Change], then: Callable[[Change, Result, State], Any] | None,
                 ) -> list[tuple[list[Finding], Any, Any]]:
    """In the kept worker: ``rules.run`` of ``changes`` against the view it was forked with (their
    findings and defaulted objects), and what ``then`` makes of each."""
    if _reviews is None:  # pragma: no cover - only reachable if a worker were spawned, not forked
        raise RuntimeError("no reviews: rule workers must be forked from the judging process")
    rules, view = _reviews
    with gcpause.paused():  # as in _judge_chunk: short-lived garbage, nothing to collect
        out = []
        for change in changes:
            result = rules.run(change, view)
            out.append((result.findings, result.defaulted, then(change, result, view) if then else None))
        return out


def _schemas_of(rules: RuleChecks) -> object:
    """The CRD schemas the rules judge with: followed live from a cluster, they are replaced as a whole
    when a CRD changes (webhook.server.liveschemas), and a worker forked before that judges with the old ones."""
    return getattr(getattr(rules, "inner", rules), "schemas", None)


@dataclass(eq=False)
class _Kept:
    """The review worker of one state version: forked with the rules and that version's view, kept for
    every later batch of that version (the key holds no reference to the state: it is the version's)."""

    version: str
    rules: RuleChecks
    schemas: object
    pool: concurrent.futures.ProcessPoolExecutor

    def serves(self, rules: RuleChecks, view: State) -> bool:
        return self.version == view.version and self.rules is rules and self.schemas is _schemas_of(rules)


_kept: _Kept | None = None


def _submitted(rules: RuleChecks, view: State, workers: int, changes: Sequence[Change],
               then: Callable[[Change, Result, State], Any] | None) -> concurrent.futures.Future[Any]:
    """``changes`` handed to the worker judging ``view``'s version with ``rules``: the one kept since an
    earlier batch of it, or a new fork (the one of an older version is let go: it finishes what it has
    and ends)."""
    global _kept, _reviews
    if _kept is not None and _kept.serves(rules, view):
        return _kept.pool.submit(_rules_batch, list(changes), then)
    close_kept()
    _reviews = (rules, view)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: see RuleWorkers.start
            pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            # a fork pool starts all its workers at its first task, and never again (a dead one breaks it)
            future = pool.submit(_rules_batch, list(changes), then)
    finally:
        _reviews = None  # the fork has its copy; this process keeps no reference to the version's state
    _kept = _Kept(view.version, rules, _schemas_of(rules), pool)
    return future


def close_kept() -> None:
    """Let the kept review worker go (it ends once it has judged what is queued for it): a new state
    version, a failure, or shutdown."""
    global _kept
    if _kept is not None:
        # Not cancelled: what is queued there are other reviews' rules, awaited by them. (And a future
        # cancelled there breaks the pool's own thread if the worker dies: ``_Claims``.)
        _kept.pool.shutdown(wait=False)
        _kept = None


# At exit, while the modules are still whole: a pool collected in the interpreter's teardown reports an
# exception from its finalizer (multiprocessing's util is gone by then).
atexit.register(close_kept)


async def rules_of(rules: RuleChecks, changes: Sequence[Change], view: State, *, workers: int,
                   then: Callable[[Change, Result, State], Any] | None = None) -> list[tuple[Result, Any]]:
    """``rules.run(change, view)`` of every change, what ``Gate.review_together`` computes first for a batch
    of concurrent reviews: in a forked worker process when there are at least MIN_REVIEWS of them and
    ``workers`` allows one, else (or when the worker fails) in this process's worker thread, one change
    per trip as before. Each comes with ``then(change, result, view)`` when the worker worked it out
    (picklable), else None: the caller works out what it lacks itself.

    Why a process: in the webhook a batch's rules are about half of its Python work (schema, CEL,
    cross-object and HAProxy rules: ~1-2 ms a route at 10,000 routes), and in a thread they hold the GIL
    that the event loop needs for the burst's TLS handshakes and requests; every time the loop gives the
    GIL up for a socket or TLS call, it waits up to a switch interval to get it back. The fork takes the
    state, its indexes and the compiled schemas along as they are; only the changes go out, and findings,
    defaulted objects and ``then``'s values come back. The worker runs exactly ``rules.run``: the results
    are the ones this process would compute (``tests/test_ruleworkers.py``).

    The worker is kept for the state version it was forked with (``_submitted``): a burst's batches
    all meet one version, and a fork per batch cost this process the fork and the child the copies of
    every page it wrote (the reference counts of the state it read), again for each batch."""
    results: dict[int, tuple[Result, Any]] = {}
    if workers >= 1 and len(changes) >= MIN_REVIEWS and "fork" in multiprocessing.get_all_start_methods():
        try:
            future = _submitted(rules, view, workers, changes, then)
            got = await asyncio.wrap_future(future)
            results = {i: (Result(findings, defaulted), after) for i, (findings, defaulted, after) in enumerate(got)}
        except Exception as exc:  # a dead worker (BrokenProcessPool), an unpicklable change or result: judged here
            log.warning("rule worker failed; the reviews' rules run in this process", error=repr(exc))
            close_kept()  # the next batch forks a new one
    return [results[i] if i in results else (await asyncio.to_thread(rules.run, change, view), None)
            for i, change in enumerate(changes)]


class RuleWorkers:
    """Forked workers judging the inputs ``indices`` of one ``review_all`` call; use as a context."""

    def __init__(self, rules: RuleChecks, scope: scopes.Scope, items: Sequence[tuple[Change, State]],
                 combined: State, indices: Sequence[int], *, workers: int,
                 done: dict[int, Prejudged] | None = None, with_status: bool = True) -> None:
        self._done = dict(done or {})  # outcomes already known (the warm-up before the fork)
        self._workers = workers
        size = max(1, min(CHUNK, -(-len(indices) // ((workers + 1) * 4))))
        self._chunks = [list(indices[at:at + size]) for at in range(0, len(indices), size)]
        self._job = _Job(rules, scope, items, combined, with_status, _Claims(len(self._chunks)))
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._futures: list[tuple[list[int], concurrent.futures.Future[list[_Shipped] | None]]] = []

    @staticmethod
    def usable(count: int, workers: int) -> bool:
        return workers >= 1 and count >= MIN_ITEMS and "fork" in multiprocessing.get_all_start_methods()

    def start(self) -> None:
        """Fork the workers and hand out every input; returns at once."""
        global _job
        _job = self._job
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns on fork in a process with threads: the only other threads here are
                # the event loop's idle executor threads, holding no lock a worker needs.
                warnings.simplefilter("ignore", DeprecationWarning)
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self._workers, mp_context=multiprocessing.get_context("fork"))
                for number, chunk in enumerate(self._chunks):
                    self._futures.append((chunk, self._pool.submit(_judge_chunk, number, chunk)))
        finally:
            _job = None  # the forks have their copy; the parent keeps no reference to the batch

    async def results(self) -> dict[int, Prejudged]:
        """Every input's outcome. Called once this process is done with its own share (the render and
        its check): the chunks no worker has started yet are taken back and judged here, from the last
        one down, while the workers finish theirs (a pool starts chunks in order, so once the last one
        is running or done, every earlier one is too). Inputs of a chunk whose worker failed are
        missing (the caller judges those in-process)."""
        out = dict(self._done)
        futures = list(self._futures)
        while futures and self._job.claims.take_back(len(futures) - 1):
            chunk, _ = futures.pop()
            out.update(zip(chunk, await asyncio.to_thread(self._judge_here, chunk), strict=True))
        failed: list[BaseException] = []
        for chunk, future in futures:
            try:
                got = await asyncio.wrap_future(future)
            except Exception as exc:  # a dead worker (BrokenProcessPool), an unpicklable result
                failed.append(exc)
                continue
            if got is None:  # taken back as the worker started it: nobody judged it yet
                got = [_shipped(outcome) for outcome in await asyncio.to_thread(self._judge_here, chunk)]
            out.update(zip(chunk, map(_received, got), strict=True))
        if failed:
            log.warning("rule workers failed; their inputs are judged in this process",
                        chunks=len(failed), error=repr(failed[0]))
        return out

    def _judge_here(self, chunk: list[int]) -> list[Prejudged]:
        job = self._job
        with gcpause.paused():  # as in a worker (_judge_chunk)
            return [prejudge_one(job.rules, job.scope, *job.items[i], job.combined, with_status=job.with_status)
                    for i in chunk]

    def close(self) -> None:
        if self._pool is not None:
            self._job.claims.take_back_all()  # the chunks still queued are skipped, not judged for nobody
            self._pool.shutdown(wait=False)
            self._pool = None

    def __enter__(self) -> RuleWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
