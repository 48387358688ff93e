"""Reconcile's background full check: the whole promoted configuration ``haproxy -c``ed after a promotion
that only its delta check judged.

A patched render (``haproxy_check.render.patching``) is judged on the hot path by ``haproxy -c`` of the
changed objects' closure only (the gate's delta check, docs/DELTA-CHECK.md), which proves the changed
objects' output as the full configuration has it. What it cannot see (an object outside the closure
the change breaks after all: a closure bug) this check sees: the promoted files, as promoted, checked
in full once the data plane has them. On a disagreement (delta ok, full fails) it logs a bug report,
counts ``routegate_reconcile_full_check_disagreements_total``, and the full result wins: the next run
renders and checks in full from the last fully checked view, so isolation holds the culprit back at its
last fully checked version. The ``on_disagreement`` hook runs at once (the reconciler rolls the promoted
versions it recorded on disk back to that view, ``webhook.reconcile.promotedversions``: a restart before the next
run must not hold back at versions the full check refused).

One check runs at a time and always of the newest delta-checked promotion (older ones are skipped:
the newest holds their changes too). It never takes the reconciler's lock (a full check takes seconds
at 10,000 routes, and a run must not wait for it); it only records what it found, and the reconciler
reads that at the start of its next run, under its lock (``take``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.results import RenderResult
from validators.states import State
from webhook import metrics
from webhook.gate.fullchecks import _niced
from webhook.gate.gates import Checks
from webhook.process import malloctuning

log = structlog.get_logger("routegate.reconcile")


@dataclass(frozen=True, slots=True)
class Promotion:
    """A promoted version whose hot-path check was the delta check."""

    version: str
    render: RenderResult  # the promoted configuration, as promoted
    view: State  # what it was rendered from (each object's promoted version)
    changed: tuple[str, ...]  # the objects whose closure the delta check judged (for the bug report)


class BackgroundFullChecks:
    def __init__(self, checker: Checks, *,
                 on_disagreement: Callable[[Promotion], Awaitable[None]] | None = None) -> None:
        # like the webhook's background check: one run at a time, at the lowest CPU priority, never one
        # of the slots the hot path and the reviews check in
        self.checker: Checks = _niced(checker)
        self._next: Promotion | None = None
        self._task: asyncio.Task[None] | None = None
        # the last view whose whole configuration passed haproxy -c (on the hot path or here)
        self.fully_checked: State | None = None
        self._disagreed: Promotion | None = None  # a delta-checked promotion the full check refused
        self._generation = 0  # moves on each promotion checked in full: older background results are moot
        self.on_disagreement = on_disagreement

    def passed_in_full(self, view: State) -> None:
        """``view`` was promoted after a full ``haproxy -c``: nothing to check in the background."""
        self.fully_checked = view
        self._generation += 1
        self._next = None  # an older delta promotion still queued is superseded by a fully checked one

    def submit(self, promotion: Promotion) -> None:
        """Check ``promotion`` in full in the background (after the one running, if any)."""
        self._next = promotion
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def take(self) -> Promotion | None:
        """The disagreement found since the last call (None: none). Called by a run under its lock."""
        found, self._disagreed = self._disagreed, None
        return found

    async def idle(self) -> None:
        """Wait until no background check runs or waits (tests, shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _loop(self) -> None:
        try:
            while self._next is not None:
                promotion, self._next = self._next, None
                await self._check(promotion)
        finally:  # the check's files (tens of MiB at 10,000 routes) returned (webhook.process.malloctuning)
            malloctuning.give_back_soon()

    async def _check(self, promotion: Promotion) -> None:
        generation = self._generation
        try:
            result = await self.checker.check(promotion.render)
        except (CheckTimedOut, OSError) as exc:
            metrics.RECONCILE_FULL_CHECKS.labels("undecided").inc()
            log.warning("background full check of a promoted version could not decide", version=promotion.version,
                        error=str(exc))
            return
        if generation != self._generation:  # a newer promotion passed in full meanwhile: it is the base now
            return
        if result.ok:
            metrics.RECONCILE_FULL_CHECKS.labels("agreed").inc()
            self.fully_checked = promotion.view
            return
        if not result.decided:
            metrics.RECONCILE_FULL_CHECKS.labels("undecided").inc()
            log.warning("background full check of a promoted version could not decide", version=promotion.version,
                        error=result.error)
            return
        metrics.RECONCILE_FULL_CHECKS.labels("disagreed").inc()
        metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS.inc()
        log.error("BUG: reconcile's delta check passed a configuration haproxy -c refuses in full; the next run "
                  "renders and checks in full from the last fully checked view (please report this)",
                  version=promotion.version, changed=list(promotion.changed),
                  alerts=[f"{a.file}:{a.line}: {a.message}" for a in result.alerts])
        self._disagreed = promotion
        if self.on_disagreement is not None:
            try:
                await self.on_disagreement(promotion)
            except Exception as exc:  # the next run still judges in full from the fully checked view
                log.error("after-disagreement hook failed", error=repr(exc))
