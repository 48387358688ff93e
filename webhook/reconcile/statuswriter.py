"""Write the Gateway API statuses of what reconcile promoted to the API, through the status subresource.

``OutcomeStatuses`` is a reconcile hook: after each run it turns the outcome into the statuses our
objects should carry (``webhook.reconcile.statusshapes``: from the ``statuses.json`` promoted beside the
configuration, what was held back, and whether the data plane has the version) and hands them to the
``StatusWriter``. The writer never blocks reconcile: it keeps the latest wanted status per object and
writes in its own task.

Per object the writer reads the stored status (GET .../status), merges ours in (other controllers'
``parents``/``ancestors`` entries untouched, ``lastTransitionTime`` kept where a condition's status did
not change) and writes only when the result differs (PUT .../status with the resourceVersion it read:
a concurrent writer makes it 409, and the writer reads again and retries). What it wrote is
remembered by content, so an unchanged reconcile costs no request at all (and a re-read every
``resync`` seconds catches a status someone else changed). Requests are rate-limited (token bucket);
a failed write (403, 5xx, apiserver down) is counted and retried with a growing delay, while newer
statuses supersede it. Only while ``leader()`` says so does anything get written: with a cluster, the
process holds a Lease (``certs.leaderelection``), so of several promoting replicas one writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from validators.objects import Ref, as_map, dig
from validators.states import State
from validators.views.scopes import Scope
from webhook import metrics
from webhook.reconcile import statusshapes, statustargets
from webhook.reconcile.promotedmemory import PromotedMemory
from webhook.reconcile.reconciler import Outcome, Result

if TYPE_CHECKING:
    from certs.leaderelection import Elector

log = structlog.get_logger("routegate.statuses")


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusWriter:
    def __init__(self, api: Any, *, rate: float = 20.0, burst: int = 50, conflicts: int = 5, backoff: float = 1.0,
                 max_backoff: float = 60.0, resync: float = 600.0, leader: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], str] = _utc_now) -> None:
        from kubernetes_asyncio.client import CustomObjectsApi  # the client's models only with a cluster
        from kubernetes_asyncio.client.exceptions import ApiException

        self._api = CustomObjectsApi(api)
        self._api_error = ApiException
        self.rate = rate
        self.burst = burst
        self.conflicts = conflicts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.resync = resync
        self.leader = leader or (lambda: True)
        self._clock = clock
        self._now = now
        self._pending: dict[Ref, statusshapes.Target] = {}
        self._retry: dict[Ref, tuple[float, int]] = {}  # not before, failed attempts
        self._done: dict[Ref, tuple[str, float]] = {}  # fingerprint written or found stored, and when
        self._wanted: dict[Ref, statusshapes.Target] = {}  # the last complete set submitted
        # each Target's fingerprint, kept while the same Target object is handed again (webhook.reconcile.statustargets
        # hands the very object of an unchanged status): a run that changed one status fingerprints one
        self._fingerprints: dict[Ref, tuple[statusshapes.Target, str]] = {}
        self._led = False  # whether the last look found this process leading
        self._tokens = float(burst)
        self._filled = clock()
        self._wake = asyncio.Event()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def submit(self, targets: Iterable[statusshapes.Target], *, complete: bool = False) -> int:
        """Want these statuses (newer ones supersede what is pending); ``complete`` says ``targets`` is
        every object we report on (the rest is forgotten). Returns how many need a request."""
        now = self._clock()
        given: dict[Ref, statusshapes.Target] = {}
        queued = 0
        for target in targets:
            given[target.ref] = target
            done = self._done.get(target.ref)
            if done is not None and done[0] == self._fingerprint(target) and now - done[1] < self.resync:
                self._pending.pop(target.ref, None)
                continue
            self._pending[target.ref] = target
            queued += 1
        if complete:
            self._wanted = given
            self._done = {ref: v for ref, v in self._done.items() if ref in given}
            self._fingerprints = {ref: v for ref, v in self._fingerprints.items() if ref in given}
            for ref in [r for r in self._pending if r not in given]:  # deleted or no longer ours
                del self._pending[ref]
                self._retry.pop(ref, None)
        metrics.STATUS_PENDING.set(len(self._pending))
        if queued:
            self._wake.set()
        return queued

    def _fingerprint(self, target: statusshapes.Target) -> str:
        known = self._fingerprints.get(target.ref)
        if known is not None and known[0] is target:
            return known[1]
        printed = target.fingerprint()
        self._fingerprints[target.ref] = (target, printed)
        return printed

    async def run(self) -> None:
        """Write what is pending, forever (the task reconcile runs beside its loop)."""
        while True:
            ready = self._ready()
            if ready is None:
                self._wake.clear()
                try:
                    async with asyncio.timeout(self._next_retry()):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            await self._attempt(ready)

    async def flush(self) -> int:
        """Try every pending status once (due or not); how many are still pending (``--once``, tests)."""
        if self._leading():
            for ref in list(self._pending):
                await self._attempt(ref)
        return len(self._pending)

    def _leading(self) -> bool:
        """Whether to write now. On taking the lead, what was remembered as written is forgotten and every
        wanted status is checked again: another leader may have written since."""
        leading = self.leader()
        if leading and not self._led:
            self._done.clear()
            self._pending = {**self._wanted, **self._pending}
            metrics.STATUS_PENDING.set(len(self._pending))
        self._led = leading
        return leading

    def _ready(self) -> Ref | None:
        if not self._leading():
            return None
        now = self._clock()
        for ref in self._pending:
            retry = self._retry.get(ref)
            if retry is None or retry[0] <= now:
                return ref
        return None

    def _next_retry(self) -> float | None:
        if not self._pending:
            return None
        if not self.leader():
            return 1.0  # look again: leadership may have come
        now = self._clock()
        return max(0.05, min((self._retry.get(r, (now, 0))[0] for r in self._pending), default=now) - now)

    async def _attempt(self, ref: Ref) -> None:
        target = self._pending.get(ref)
        if target is None:
            return
        try:
            outcome = await self._write(target)
        except self._api_error as exc:
            self._failed(target, f"HTTP {exc.status}: {exc.reason}", status=exc.status)
            return
        except Exception as exc:  # unreachable, timed out, aiohttp's errors: never let one stop the writer
            self._failed(target, repr(exc), status=None)
            return
        metrics.STATUS_WRITES.labels(outcome).inc()
        if self._pending.get(ref) is target:  # a newer status submitted meanwhile stays pending
            del self._pending[ref]
            self._retry.pop(ref, None)
        if outcome in ("written", "unchanged"):
            self._done[ref] = (self._fingerprint(target), self._clock())
        metrics.STATUS_PENDING.set(len(self._pending))

    def _failed(self, target: statusshapes.Target, error: str, *, status: int | None) -> None:
        metrics.STATUS_WRITES.labels("failed").inc()
        attempts = self._retry.get(target.ref, (0.0, 0))[1] + 1
        delay = min(self.max_backoff, self.backoff * 2 ** (attempts - 1))
        self._retry[target.ref] = (self._clock() + delay, attempts)
        log.warning("cannot write status; will retry", object=str(target.ref), status=status, error=error,
                    attempts=attempts, retry_in=delay)

    async def _token(self) -> None:
        """One request's worth of the token bucket (``burst`` at once, ``rate`` a second after that)."""
        while True:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._filled) * self.rate)
            self._filled = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            await asyncio.sleep((1 - self._tokens) / self.rate)

    async def _write(self, target: statusshapes.Target) -> str:
        """"written", "unchanged", "stale" (the object changed since it was judged) or "gone"."""
        group, _, version = target.api_version.rpartition("/")
        ref = target.ref
        for attempt in range(self.conflicts + 1):
            await self._token()
            try:
                if ref.namespace:
                    stored = await self._api.get_namespaced_custom_object_status(
                        group, version, ref.namespace, target.plural, ref.name)
                else:
                    stored = await self._api.get_cluster_custom_object_status(group, version, target.plural, ref.name)
            except self._api_error as exc:
                if exc.status == 404:
                    return "gone"
                raise
            stored = as_map(stored)
            generation = dig(stored, "metadata", "generation")
            if target.generation and isinstance(generation, int) and generation != target.generation:
                return "stale"  # judged at another generation: the reconcile of the new one follows
            before = stored.get("status")
            status = statusshapes.merged(before if isinstance(before, dict) else None, target, self._now())
            if status == before:
                return "unchanged"
            body = {**stored, "status": status}
            await self._token()
            try:
                if ref.namespace:
                    await self._api.replace_namespaced_custom_object_status(
                        group, version, ref.namespace, target.plural, ref.name, body)
                else:
                    await self._api.replace_cluster_custom_object_status(group, version, target.plural, ref.name, body)
            except self._api_error as exc:
                if exc.status == 409 and attempt < self.conflicts:
                    metrics.STATUS_WRITES.labels("conflict").inc()
                    continue  # someone wrote in between: read again, merge again
                if exc.status == 404:
                    return "gone"
                raise
            log.info("status written", object=str(ref), generation=target.generation)
            return "written"
        raise AssertionError("unreachable: the last conflict is raised")  # pragma: no cover


class OutcomeStatuses:
    """The reconcile hook: the statuses an outcome implies, handed to the writer.

    ``dataplane(version)`` says whether the data plane has loaded a promoted version (with
    ``--runtime-socket``: the runtime applier applied or reloaded it; without: promotion is the data
    plane's load, as the reload wrapper picks it up)."""

    def __init__(self, writer: StatusWriter, scope: Scope, output: Path, *,
                 dataplane: Callable[[str], bool] = lambda version: True, addresses: Sequence[str] = (),
                 elector: Elector | None = None, bundle_version: Callable[[], str | None] = lambda: None,
                 memory: PromotedMemory | None = None) -> None:
        self.writer = writer
        self.memory = memory if memory is not None else PromotedMemory()  # the reconciler's, when wired
        self._last: tuple[Outcome, State] | None = None  # the last outcome handed over, for ``refresh``
        self._targets = statustargets.StatusTargets(scope)  # built again only where their inputs changed
        self.scope = scope
        self.output = output
        self.dataplane = dataplane
        self.addresses = tuple(addresses)
        self.elector = elector  # when given, the writer writes only while it leads
        self.bundle_version = bundle_version  # the installed Gateway API version (the CRDs' annotation)
        if elector is not None:
            writer.leader = lambda: elector.leading

    async def run(self) -> None:
        """The writer's task, and the election it writes under (given up when cancelled)."""
        await together(self.writer.run(), *([self.elector.run()] if self.elector is not None else []))

    async def flush_once(self) -> str:
        """``--once``: take the lead if free, write what is pending, give the lead back; what happened."""
        if self.elector is not None:
            try:
                await self.elector.try_acquire()
            except Exception as exc:
                return f"statuses not written: leader election failed ({type(exc).__name__}: {exc})"
            if not self.elector.leading:
                return "statuses not written: another process leads (it writes them)"
        try:
            left = await self.writer.flush()
        finally:
            if self.elector is not None:
                with contextlib.suppress(Exception):
                    await self.elector.release()
        return f"{left} statuses could not be written" if left else ""

    async def __call__(self, outcome: Outcome, state: State) -> None:
        self._last = (outcome, state)
        found = await asyncio.to_thread(self.targets, outcome, state)
        if found is None:
            return
        targets, complete = found
        self.writer.submit(targets, complete=complete)

    async def refresh(self) -> None:
        """The last outcome's statuses again: the data plane loaded its version since (a deferred reload)."""
        if self._last is not None:
            await self(*self._last)

    def targets(self, outcome: Outcome, state: State) -> tuple[list[statusshapes.Target], bool] | None:
        """(targets, whether they cover every object we report on); None: nothing to say."""
        if outcome.result not in (Result.PROMOTED, Result.UNCHANGED, Result.REJECTED):
            return None  # undecided: nothing was judged
        live = outcome.promoted.version if outcome.promoted is not None else ""
        facts = statusshapes.facts_from(((f.ref, f.findings) for f in outcome.faults),
                                        ((x.ref, x.what, x.findings) for x in outcome.left_out),
                                        dataplane=bool(live) and self.dataplane(live), version=live,
                                        addresses=self.addresses, bundle_version=self.bundle_version())
        scoped = self.scope.view(state)
        if outcome.result is Result.REJECTED:
            # nothing new reached the data plane: only the objects at fault have something new to say
            return statusshapes.targets(scoped, {}, facts, self.scope, only=facts.held), False
        computed = self._promoted_statuses(live)
        if computed is None:
            return None
        return self._targets.of(scoped, computed, facts), True

    def _promoted_statuses(self, version: str) -> dict[str, Any] | None:
        kept = self.memory.get(version)
        if kept is not None:  # promoted by this process: not read back from statuses.json
            return kept.statuses
        try:
            data = json.loads((self.output / version / "statuses.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("cannot read the promoted statuses", version=version, error=str(exc))
            return None
        return data if isinstance(data, dict) else None


async def together(*work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` concurrently; cancelled, wait until each has finished its own clean-up (a leader
    gives its Lease back), which a cancelled ``asyncio.gather`` does not wait for."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            if not task.done() and not task.cancelling():  # once: a second cancel would cut its clean-up
                task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
