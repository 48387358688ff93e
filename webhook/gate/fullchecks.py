"""The background full check: the whole current state rendered and ``haproxy -c``ed off the request path,
as the reference the delta check (``validators.views.closures``) is monitored against.

Reviews judge only a change's closure. This loop checks everything, after the state stopped changing
for ``debounce`` seconds, at most one run at a time, rendering in a worker process of its own at the
lowest CPU priority (a render of 10,000 routes holds the GIL for seconds: in a thread it would slow
the event loop that answers reviews). It never competes with reviews: it starts its render and its
``haproxy -c`` only while no review waits or runs (``busy``), and that ``haproxy -c`` runs at the
lowest priority too, through a checker of its own (one run at a time, not one of the reviews' slots).
The worker process keeps its render and runs that ``haproxy -c`` itself, sending back only the result:
the server never holds the whole configuration. (What the state's configuration loads is not what the
data plane has loaded: predictions take that from reconcile, ``webhook.gate.loadedindex``.)
When the whole configuration fails and an alert is blamed on an object whose latest delta review
passed haproxy -c on the object's closure, the two checks disagree: that is logged with both sides
and counted in ``routegate_delta_disagreements_total``.
The outcome of every run is exported too (``routegate_full_check_*``), so a configuration that some
object broke outside the webhook (or before it was installed) shows up even though no review sees it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from haproxy_check.check import sandboxes
from haproxy_check.check.checker import Checker, CheckTimedOut
from haproxy_check.render.rendering import Renderer, RenderSettings
from haproxy_check.results import CheckResult, HAProxyBinary, RenderError, RenderResult
from validators.changes import Change, Operation
from validators.objects import KINDS, Obj, Ref, dig
from validators.states import MemoryState, State
from webhook import metrics
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Verdict
from webhook.sources import StateSource

log = structlog.get_logger("routegate.fullcheck")

RECENT = 1000  # delta verdicts remembered per object ref (the newest wins)
LOWEST = 19  # nice value of the background render and haproxy -c


def _render_whole(settings: RenderSettings, template_dirs: tuple[str, ...], objects: list[Obj],
                  version: str) -> RenderResult:
    """The whole state rendered in the worker process (what the gate's renderer would produce)."""
    renderer = Renderer(settings=settings, template_dirs=[Path(d) for d in template_dirs], pause_collection=True)
    return renderer.render(MemoryState(objects, version=version), subject=None)


# The state's objects go to the worker in chunks of this many, each pickled on its own: the executor's
# feeder thread keeps the last buffer it sent until it sends another, so one pickle of the whole state
# (~8 MB at 10,000 routes) stayed in the server for as long as the render took.
CHUNK = 500
_received: list[Obj] = []  # the worker's objects of the render to come


def _receive(first: bool, chunk: list[Obj]) -> None:
    """In the worker: the next chunk of the state's objects (``first``: of a new render)."""
    if first:
        _received.clear()
    _received.extend(chunk)


# The worker's render between its two jobs: it stays in the worker process, which checks it too. Sent
# back, the whole configuration and its source map (~180 MB of text at 10,000 routes) would be
# unpickled into the server, for a moment several times that, to be read once by haproxy -c.
_kept: list[RenderResult] = []


def _render_received(settings: RenderSettings, template_dirs: tuple[str, ...], version: str,
                     keep: bool) -> RenderResult | None:
    """In the worker: render the objects received; the render, or None when ``keep`` holds it for
    ``_check_kept``."""
    objects = list(_received)
    _received.clear()
    _kept.clear()  # a render an earlier run left unchecked (its check never came)
    render = _render_whole(settings, template_dirs, objects, version)
    if not keep:
        return render
    _kept.append(render)
    return None


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """What rebuilds, in the worker, the checker the background check uses (see ``_niced``)."""

    binary: HAProxyBinary
    timeout: float
    scratch_base: Path | None
    isolation: str
    niceness: int

    @classmethod
    def of(cls, checker: Checker) -> CheckSpec:
        return cls(checker.binary, checker.runner.timeout, checker.scratch_base, checker.isolation,
                   checker.runner.niceness)

    def checker(self) -> Checker:
        return Checker(self.binary, timeout=self.timeout, concurrency=1, scratch_base=self.scratch_base,
                       isolation=self.isolation, niceness=self.niceness)


@dataclass(frozen=True, slots=True)
class Checked:
    """What the worker sends back of a whole render it checked: all that the server reads of it."""

    result: CheckResult


def _check_kept(spec: CheckSpec) -> Checked:
    """Step two in the worker: ``haproxy -c`` of the kept render, as the server's checker would run it."""
    if not _kept:
        raise RuntimeError("the full check's worker holds no render to check (it was restarted)")
    render = _kept.pop()

    async def check() -> CheckResult:
        with sandboxes.child_waits_on_the_loop():
            return await spec.checker().check(render)

    return Checked(asyncio.run(check()))


def _lowest_priority() -> None:
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST)


def _niced(checker: Any) -> Any:
    """A checker like the gate's for the background check: same binary, timeout, sandbox and scratch
    base, one run at a time, its ``haproxy -c`` at the lowest priority. Another kind of checker
    (tests) is used as it is."""
    if not isinstance(checker, Checker):
        return checker
    return Checker(checker.binary, timeout=checker.runner.timeout, concurrency=1,
                   scratch_base=checker.scratch_base, isolation=checker.isolation, niceness=LOWEST)


@dataclass(frozen=True, slots=True)
class Disagreement:
    ref: Ref
    delta: Verdict  # the latest clean delta allow of ``ref``
    alert: str  # what the full check says about ``ref``


class FullChecker:
    """Runs the full check whenever the state version changed and then stayed put for ``debounce`` s."""

    def __init__(self, gate: Gate, source: StateSource, *, debounce: float = 5.0, poll: float = 1.0,
                 template_dirs: Sequence[str] = (), clock: Callable[[], float] = time.monotonic,
                 busy: Callable[[], bool] = lambda: False, yield_poll: float = 0.1) -> None:
        self.template_dirs = tuple(template_dirs)  # the gate's --templates, for the worker's renderer
        self.gate = gate
        self.checker = _niced(gate.checker)
        # True while reviews wait or run (serving: the Batcher): the full check waits for them.
        self.busy = busy
        self.yield_poll = yield_poll
        self.yielded = 0  # how often a run waited for reviews (tests, logs)
        self.source = source
        self.debounce = debounce
        self.poll = poll
        self._clock = clock
        # ref -> (the spec the delta check passed, its verdict)
        self._recent: collections.OrderedDict[Ref, tuple[Any, Verdict]] = collections.OrderedDict()
        self._pool: concurrent.futures.Executor
        if isinstance(gate.renderer, Renderer):
            self._pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=_lowest_priority)
        else:  # a renderer that cannot be rebuilt in another process (tests): one low-priority thread
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="routegate-fullcheck",
                                                               initializer=_lowest_priority)
        self._lock = asyncio.Lock()
        self.checked_version: str | None = None
        self.last: CheckResult | None = None

    def attach(self) -> None:
        """Follow the gate's delta reviews whose configuration passed haproxy -c."""
        if self.gate.delta:
            self.gate.passed_observers.append(self.record)

    def record(self, change: Change, verdict: Verdict) -> None:
        """Remember a clean delta allow (the closure's configuration passed haproxy -c) of an object the
        API server may store: not a dry run, not a delete."""
        if change.dry_run or change.obj is None:
            return
        # Without its status: one worked out when first read (``laterstatuses``) holds the state its
        # render saw, and a thousand verdicts remembered across state versions would keep as many alive.
        self._recent[verdict.ref] = (dig(change.obj, "spec"), replace(verdict, status={}))
        self._recent.move_to_end(verdict.ref)
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    async def run(self) -> None:
        """Forever: wait for a settled new state version, then check it."""
        try:
            await self._follow()
        finally:
            self.close()

    async def _follow(self) -> None:
        seen, since = None, self._clock()
        while True:
            await asyncio.sleep(self.poll)
            if not self.source.ready:
                continue
            try:
                version = self.source.snapshot().version
                if version != seen:
                    seen, since = version, self._clock()
                elif version != self.checked_version and self._clock() - since >= self.debounce:
                    await self.check_once()
            except Exception as exc:  # the monitor outlives any one bad run; it never decides a review
                log.error("full check failed", error=repr(exc))

    async def check_once(self) -> list[Disagreement]:
        """One full check of the current state (skipped while one is running)."""
        if self._lock.locked():
            return []
        async with self._lock:
            state = self.source.snapshot()
            started = self._clock()
            loop = asyncio.get_running_loop()
            try:
                await self._after_reviews()
                rendered = (await asyncio.gather(*(loop.run_in_executor(self._pool, job)
                                                   for job in self._jobs(state))))[-1]
                await self._after_reviews()
                if rendered is None:  # kept in the worker process, checked there
                    checked: Checked = await loop.run_in_executor(self._pool, self._checks_in_worker())
                else:
                    checked = Checked(await self.checker.check(rendered))
                    del rendered
            except (RenderError, CheckTimedOut) as exc:
                metrics.FULL_CHECKS.labels("undecided").inc()
                log.warning("full check could not decide", version=state.version, error=str(exc))
                return []
            finally:
                metrics.FULL_CHECK_SECONDS.observe(self._clock() - started)
            result = checked.result
            self.checked_version, self.last = state.version, result
            metrics.FULL_CHECKS.labels("ok" if result.ok else "failed").inc()
            metrics.FULL_CHECK_FAILING.set(0 if result.ok else 1)
            found = await asyncio.to_thread(self._disagreements, result, state)
            for d in found:
                metrics.DELTA_DISAGREEMENTS.labels(metrics.kind_label(d.ref.kind)).inc()
                log.warning("delta and full check disagree", object=str(d.ref), delta=str(d.delta.decision),
                            full=d.alert, version=state.version)
            if not result.ok and not found:
                log.info("full check fails; no delta review allowed the objects it blames",
                         version=state.version, alerts=[a.message for a in result.alerts[:3]])
            return found

    async def _after_reviews(self) -> None:
        """Return once no review waits or runs: the CPU is theirs first."""
        if self.busy():
            self.yielded += 1
        while self.busy():  # noqa: ASYNC110 - busy() is a plain predicate (the batcher's counts): polled
            await asyncio.sleep(self.yield_poll)

    def _jobs(self, state: State) -> list[Callable[[], RenderResult | None]]:
        """The render to run in the pool, in order: picklable for the process (partials of module
        functions: the objects' chunks, then the render). The last one's result is the render, or None
        when the worker keeps it to check it itself (``_checks_in_worker``)."""
        renderer = self.gate.renderer
        state = self.gate.scope.view(state)  # our GatewayClasses only, as every review renders
        if not isinstance(renderer, Renderer):
            return [lambda: renderer.render(state, subject=None)]
        objects = [o for kind in KINDS for o in state.list(kind)]
        jobs: list[Callable[[], RenderResult | None]] = [
            functools.partial(_receive, start == 0, objects[start:start + CHUNK])
            for start in range(0, max(len(objects), 1), CHUNK)]  # the first, even empty, starts afresh
        jobs.append(functools.partial(_render_received, renderer.settings, self.template_dirs, state.version,
                                      isinstance(self.checker, Checker)))
        return jobs

    def _checks_in_worker(self) -> Callable[[], Checked]:
        assert isinstance(self.checker, Checker)  # _jobs kept the render only for a checker it can rebuild
        return functools.partial(_check_kept, CheckSpec.of(self.checker))

    def _disagreements(self, result: CheckResult, state: State) -> list[Disagreement]:
        if result.ok:
            return []
        out: list[Disagreement] = []
        for alert in result.alerts:
            if alert.origin is None:
                continue
            ref = alert.origin.ref
            recent = self._recent.get(ref)
            stored = state.get(ref.kind, ref.namespace, ref.name)
            # The delta check passed a configuration holding this very object (the stored spec is the
            # one it judged), and the whole configuration fails on a line of that object.
            if recent is not None and stored is not None and self._judged(stored, recent[0], state):
                out.append(Disagreement(ref, recent[1], alert.message))
                del self._recent[ref]  # counted once per delta verdict
        return out

    def _judged(self, stored: Obj, spec: Any, state: State) -> bool:
        """Whether ``stored`` is the object the delta check judged: the same spec, as stored or with
        the schema defaults the gate applied before rendering (the API server stores those too)."""
        if dig(stored, "spec") == spec:
            return True
        defaulted = self.gate.rules.run(Change(Operation.UPDATE, stored, stored), state).defaulted
        return defaulted is not None and dig(defaulted, "spec") == spec

    def close(self) -> None:
        # shutdown() lets a worker finish the render it is in: at the lowest priority, on a busy machine,
        # minutes (and about 1 GiB at 10,000 routes) after the server is gone. Its result is no use now.
        workers = getattr(self._pool, "_processes", None) or {}
        for worker in list(workers.values()):
            with contextlib.suppress(OSError, ValueError):
                worker.terminate()
        self._pool.shutdown(wait=False, cancel_futures=True)
