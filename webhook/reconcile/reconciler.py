"""The reconcile gate: promote only configuration the Gate passes, keep last-known-good otherwise.

``Reconciler.reconcile(state)`` is the library entry point a controller embeds. It uses the Gate's own
steps, never copies of them:

  audit (the Gate's rules on every stored object, ``webhook.reconcile.audits``)
  -> leave out what seed 004 says an object stored despite admission loses (``webhook.reconcile.leaveouts``)
  -> render the state with the Gate's renderer: patched from the last render when a few objects changed
     (``haproxy_check.render.patching``: the changed objects' closure rendered again and spliced in, byte
     for byte the full render), in full otherwise (``routegate_reconcile_renders_total{how}`` says which)
  -> ``haproxy -c`` with the Gate's checker (a patched render that fails it is rendered again in full, so
     isolation traces the alerts through the full render's source map)
  -> failed or refused: isolate the objects at fault (``webhook.reconcile.isolating``: each held back at its last
     promoted version, or left out) and check the rest; when no culprit can be isolated, write
     nothing: last-known-good stays live for everyone
  -> the shrink guard (``webhook.reconcile.shrinkguard``): a mass drop of routes or backends the source cannot
     vouch for (a short list, a forbidden kind, a lost CRD) is held, and last-known-good stays live
  -> passed: promote atomically (``haproxy_check.runtime.promotion``), then call the ``on_promoted`` hooks
     with the previous and the new version (the place where Runtime API application plugs in)
  -> the Gateway API statuses of what is promoted, once the data plane has it (they never delay traffic):
     in memory for the status writer (``webhook.reconcile.promotedmemory``), and ``statuses.json`` beside it.

Every step is timed (``routegate_reconcile_step_duration_seconds``, with ``total`` and ``unattributed``), and
the run's first change to the data plane updated is ``routegate_reconcile_propagation_seconds``.

With a GatewayClass scope, only our objects are audited, get findings, Events and statuses.

Nothing is denied here: problems become findings on the objects at fault, logged with the message
admission would give (``Verdict.message``), counted, and written as Warning Events when a recorder is
given. A check that could not decide (timeout) promotes nothing and is not a rejection either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import structlog

from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.descriptions import Description
from haproxy_check.render import patching
from haproxy_check.results import CheckResult, RenderError, RenderResult
from haproxy_check.runtime import descriptionfiles
from haproxy_check.runtime.descriptionfiles import DescriptionJson
from haproxy_check.runtime.promotion import FileDigests, Promoted, Promoter, content_hash
from validators import codes
from validators.findings import Finding, Severity, denies
from validators.objectrules import gatewayrefusals
from validators.objects import Ref, dig
from validators.states import State
from webhook import metrics
from webhook.gate.gates import Gate, _binds_nothing
from webhook.gate.verdicts import Decision, Verdict
from webhook.reconcile import (
    audits,
    events,
    isolating,
    leaveouts,
    promotedstatuses,
    promotedversions,
    reconcilechecks,
    shrinkguard,
)
from webhook.reconcile.promotedmemory import SEEN_AT, Kept, PromotedMemory, observe_propagation

log = structlog.get_logger("routegate.reconcile")

# Called after a promotion with the previous live version (None on the first) and the new one; each
# version directory holds description.json, the Backend()/RegisterMap() records a runtime planner diffs.
OnPromoted = Callable[[Promoted | None, Promoted], Awaitable[None]]
# Called after every run, once its findings are reported, with the outcome and the state it judged
# (the Gateway API statuses are written from here: webhook.reconcile.statuswriter).
OnOutcome = Callable[["Outcome", State], Awaitable[None]]


class Result(StrEnum):
    PROMOTED = "promoted"  # a new version is live
    UNCHANGED = "unchanged"  # passed, and byte for byte what is live already
    REJECTED = "rejected"  # haproxy -c failed or the renderer refused: last-known-good stays
    UNDECIDED = "undecided"  # the check could not finish: nothing written
    HELD = "held"  # passed, but drops more than the shrink guard lets a source drop: last-known-good stays
    PASSED = "passed"  # a judgement only (no Promoter: ``routegate check --all``), and haproxy -c passed


@dataclass(frozen=True, slots=True)
class Fault:
    ref: Ref
    findings: tuple[Finding, ...]

    @property
    def message(self) -> str:
        """Admission's one-line message: the object, then every field at fault (denials first)."""
        denied = Verdict(Decision.DENY, self.ref, findings=self.findings).message
        if denies(self.findings):
            return denied
        parts = [f"{f.field}: {f.message}" if f.field else f.message for f in self.findings]
        return f"{self.ref}: " + "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Outcome:
    result: Result
    state_version: str
    promoted: Promoted | None  # the live version after this run (last-known-good when not promoted)
    faults: tuple[Fault, ...] = ()  # stored objects with findings (audit and render)
    # what the output holds of objects not rendered as stored: in part (seed 004), held back at their last
    # promoted version or left out (isolated); each with its findings, also in ``faults``
    left_out: tuple[leaveouts.LeftOut, ...] = ()
    rejection: tuple[str, ...] = ()  # why nothing was promoted, one line per alert, naming the object
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def at_fault(self) -> list[Ref]:
        rejected = {f.ref for f in self.faults if any(x.code in (codes.HAPROXY_REJECTED, codes.RENDER_REFUSED)
                                                      for x in f.findings)}
        return sorted({f.ref for f in self.faults if denies(f.findings)} | {x.ref for x in self.left_out} | rejected)


class Reconciler:
    def __init__(self, gate: Gate, promoter: Promoter | None, *, recorder: events.EventRecorder | None = None,
                 on_promoted: list[OnPromoted] | None = None, clock: Callable[[], float] = time.perf_counter,
                 shrink: shrinkguard.Limits | None = None, on_outcome: list[OnOutcome] | None = None,
                 memory: PromotedMemory | None = None) -> None:
        self.gate = gate
        self.promoter = promoter
        self.recorder = recorder
        self.on_promoted = list(on_promoted or [])
        self.on_outcome = list(on_outcome or [])
        self._clock = clock
        self._lock = asyncio.Lock()
        self.last: Outcome | None = None
        self._described: tuple[str, Description | None] | None = None  # the live version's, parsed once
        # what this process promoted, handed to the hooks in memory (they read files only after a restart)
        self.memory = memory if memory is not None else PromotedMemory()
        # re-judges only objects whose content or reads changed; other controllers' objects not at all
        self._audits = audits.AuditCache(gate.rules, gate.scope)
        # renders each state as a patch of the last one (O(change)), in full where a change is not local
        self._patcher = patching.Patcher(gate.renderer, user_templates=not getattr(gate, "delta", False))
        # a patched render is judged by haproxy -c of its closure (the gate's delta check); the whole
        # promoted configuration is checked after the promotion, and wins (webhook.reconcile.reconcilechecks)
        self.full_checks = reconcilechecks.BackgroundFullChecks(gate.checker, on_disagreement=self._roll_back_record)
        self._delta_checked: tuple[Ref, ...] | None = None  # the first attempt's changed objects, if delta-checked
        # the render last promoted (or found unchanged): a patch of it may be delta-checked, since what lies
        # outside the closure passed haproxy -c there; a patch of a render that failed or was held may not
        self._passed_render: RenderResult | None = None
        # ... its check, and whether that was the delta check (the changed objects) or a full one (None)
        self._passed: tuple[CheckResult, tuple[Ref, ...] | None] | None = None
        # the statuses of what is promoted, computed again only for objects whose status inputs changed
        self._promoted_statuses = promotedstatuses.PromotedStatuses(gate.scope)
        self._description_json = DescriptionJson()  # description.json, each unchanged backend's and map's text reused
        self._digests = FileDigests()  # each promoted file's sha256, hashed again only when its bytes are new
        self._statuses_json = MembersJson()  # statuses.json, each unchanged object's status text reused
        # the view last promoted: each object's last promoted version, which an object whose update breaks
        # haproxy -c is held back at (webhook.reconcile.isolating); None until the first promotion of this process
        self._last_good: State | None = None
        # ... kept on disk beside the promoted versions, so a restart still holds back
        # (webhook.reconcile.promotedversions)
        self._versions = (promotedversions.PromotedVersions(
            promoter.output, promotedversions.identity_of(gate.scope, getattr(gate.renderer, "settings", None)))
            if promoter is not None else None)
        self._restore_tried = False
        self.shrink = shrinkguard.ShrinkGuard(shrink)

    async def reconcile(self, state: State, *, seen_at: float | None = None) -> Outcome:
        """One run over ``state``; runs are serialized (a promotion is never interleaved with another).
        ``seen_at``: when the first change it carries was seen (``time.monotonic()``), for the end-to-end
        propagation histogram."""
        async with self._lock:
            token = SEEN_AT.set(seen_at)
            mark = self._clock()
            try:
                outcome = await self._run(state)
                metrics.RECONCILES.labels(str(outcome.result)).inc()
                steps = _Steps(self._clock, outcome.timings)
                with steps.step("report"):
                    if outcome.result in (Result.PROMOTED, Result.UNCHANGED):
                        self.shrink.live_is(self.gate.scope.view(state))  # what later drops are measured against
                    if outcome.result in (Result.PROMOTED, Result.UNCHANGED, Result.HELD):
                        metrics.SHRINK_HELD.set(outcome.result is Result.HELD)
                    await self._report(outcome, state)
                self.last = outcome  # once its findings are logged, counted and written as Events
                with steps.step("outcome"):
                    for hook in self.on_outcome:
                        try:
                            await hook(outcome, state)
                        except Exception as exc:  # a hook (status writing) failing never undoes the run
                            log.error("after-reconcile hook failed", hook=type(hook).__name__, error=repr(exc))
                steps.finish(self._clock() - mark)
            finally:
                SEEN_AT.reset(token)
        return outcome

    async def judge(self, state: State) -> Outcome:
        """The same audit, leave-outs, render and check as ``reconcile``, for every stored object, without
        promoting, logging, counting or writing Events (``routegate check --kubeconfig --all``). With a
        Promoter, what passes is still not promoted: the outcome says PASSED."""
        async with self._lock:
            return await self._run(state, promote=False)

    async def _timed(self, step: str, timings: dict[str, float], work: Awaitable[object]) -> object:
        mark = self._clock()
        try:
            return await work
        finally:
            timings[step] = self._clock() - mark
            metrics.RECONCILE_SECONDS.labels(step).observe(timings[step])

    async def _run(self, state: State, *, promote: bool = True) -> Outcome:
        timings: dict[str, float] = {}
        steps = _Steps(self._clock, timings)
        disagreed = self.full_checks.take()
        if disagreed is not None:
            # the full check wins: judge this run in full, from the last view that passed it in full, so
            # isolation holds the culprit back at its last fully checked version
            self._patcher.forget("disagreement")
            self._last_good = self.full_checks.fully_checked
        with steps.step("scope"):
            live = self.promoter.last_known_good() if self.promoter is not None else None
            provenance = getattr(state, "provenance", None)  # the source's own account, before scoping hides it
            state = self.gate.scope.view(state)  # our GatewayClasses only, as admission judges them
        audited = await self._timed("audit", timings, asyncio.to_thread(self._audits.audit, state))
        assert isinstance(audited, list)
        with steps.step("leaveouts"):
            view, left = leaveouts.apply(state, audited)
            by_ref: dict[Ref, list[Finding]] = {ref: list(found) for ref, found in audited}
            previous = self._live_description(live)
            if previous is None and live is not None and (self._described is None
                                                          or self._described[0] != live.version):
                previous = await asyncio.to_thread(self._read_live_description, live)
        try:
            with steps.step("refused"):
                view, left = await self._refused_gateways(view, left, live, previous, by_ref)
            attempt = await self._attempt(view, previous, timings, delta=promote and self.promoter is not None)
        except CheckTimedOut as exc:
            return self._undecided(exc, state, by_ref, left, live, timings)
        if not attempt.ok:
            try:
                with steps.step("restore"):
                    last_good = self._last_good if self._last_good is not None else \
                        await self._restored(view, live, previous)
                isolated = await self._timed("isolate", timings, isolating.isolate(
                    view, attempt, lambda v: self._attempt(v, previous), last_good=last_good,
                    alert_finding=self.gate._alert_finding))
            except CheckTimedOut as exc:
                return self._undecided(exc, state, by_ref, left, live, timings)
            if isolated is None:
                return self._rejected(attempt, state, by_ref, left, live, timings)
            assert isinstance(isolated, isolating.Isolated)
            attempt = isolated.attempt
            self._delta_checked = None  # isolation rendered and checked in full
            for item in isolated.set_aside:
                known = by_ref.setdefault(item.ref, [])
                known.extend(f for f in item.findings if f not in known)
            left = [*left, *isolated.set_aside]
        view = attempt.view
        render, checked = attempt.render, attempt.checked
        assert render is not None and checked is not None
        with steps.step("findings"):
            self._add_render_findings(render, by_ref, state)
        if not promote or self.promoter is None:
            return Outcome(Result.PASSED, state.version, live, _faults(by_ref), tuple(left), (), timings)
        with steps.step("shrink"):
            held = self.shrink.judge(previous, render.description, state, provenance)
        if held is not None:
            metrics.SHRINK_HOLDS.inc()
            return Outcome(Result.HELD, state.version, live, _faults(by_ref), tuple(left), (held.message,), timings)
        with steps.step("serialize"):
            files = {**render.files, descriptionfiles.FILE: self._description_json.of(render.description, render.files)}
            digests = self._digests.of(files)
            digest = content_hash(files, digests)
        if live is not None and live.content_hash == digest and self.promoter.live() is not None:
            self._last_good = view
            self._passed_render, self._passed = render, (checked, self._delta_checked)
            if self._delta_checked is None:
                self.full_checks.passed_in_full(view)
            # what the data plane runs is the same, what the statuses say may not be
            await self._statuses_beside(live, view, state, _kept(render, files), timings)
            if self._versions is not None and self._versions.recorded != live.content_hash:
                with steps.step("record"):
                    await self._record(view, live)  # once per live version (unchanged runs render the same)
            return Outcome(Result.UNCHANGED, state.version, live, _faults(by_ref), tuple(left), (), timings)
        promoted = await self._timed("promote", timings, asyncio.to_thread(
            self.promoter.promote, files, state_version=state.version, digests=digests))
        assert isinstance(promoted, Promoted)
        self._last_good = view  # what each object's last promoted version is (webhook.reconcile.isolating)
        self._passed_render, self._passed = render, (checked, self._delta_checked)
        if self._delta_checked is None:
            self.full_checks.passed_in_full(view)
        else:
            self.full_checks.submit(reconcilechecks.Promotion(
                promoted.version, render, view, tuple(str(r) for r in self._delta_checked)))
        self.memory.remember(promoted.version, _kept(render, files))
        self._described = (promoted.version, render.description)
        metrics.LAST_PROMOTION.set(promoted.promoted_at)
        with steps.step("dataplane"):
            for hook in self.on_promoted:
                try:
                    await hook(live, promoted)
                except Exception as exc:  # a hook (runtime apply) failing never un-promotes the files
                    log.error("after-promotion hook failed", hook=getattr(hook, "__name__", repr(hook)),
                              error=repr(exc))
            if not any(getattr(hook, "updates_dataplane", False) for hook in self.on_promoted):
                observe_propagation("promoted", SEEN_AT.get())  # the reload wrapper loads what is promoted
        with steps.step("record"):  # after the data plane has it: the objects on disk are for a restart
            await self._record(view, promoted)
        await self._statuses_beside(promoted, view, state, _kept(render, files), timings)
        await self._timed("warm", timings, asyncio.to_thread(self._patcher.warm))  # off the propagation path
        return Outcome(Result.PROMOTED, state.version, promoted, _faults(by_ref), tuple(left), (), timings)

    async def _statuses_beside(self, version: Promoted, view: State, state: State, kept: Kept,
                               timings: dict[str, float]) -> None:
        """The Gateway API status of what is promoted (validators.crossobject.statuses), computed once the
        data plane has the version (statuses do not delay traffic), kept in memory for the status writer
        and written as ``statuses.json`` beside the configuration it describes (for humans: not part of
        the version's content hash, so a change only statuses see promotes no new version)."""
        promoted_status = await self._timed("statuses", timings, asyncio.to_thread(self._statuses, view, state))
        assert isinstance(promoted_status, dict)
        self.memory.remember(version.version, replace(kept, statuses=promoted_status))
        assert self.promoter is not None
        target = self.promoter.output / version.version / "statuses.json"
        mark = self._clock()
        try:
            await asyncio.to_thread(lambda: _write_replacing(target, self._statuses_json.of(promoted_status)))
        except OSError as exc:  # the version was pruned by hand: the writer has the statuses in memory
            log.warning("statuses.json not written", version=version.version, error=str(exc))
        finally:
            self._timing("statuses_file", mark, timings)

    async def _attempt(self, view: State, previous: Description | None,
                       timings: dict[str, float] | None = None, *, delta: bool = False) -> isolating.Attempt:
        """Render ``view`` and ``haproxy -c`` it; the steps are timed when ``timings`` is given (the first
        attempt, rendered as a patch of the last render where it can be; isolation rounds count under
        "isolate" and render in full). ``delta``: a patched render may be judged by ``haproxy -c`` of the
        changed objects' closure alone (the gate's delta check, docs/DELTA-CHECK.md); the whole
        configuration is then checked in the background after the promotion. Raises CheckTimedOut."""
        mark = self._clock()
        how = "full"
        if timings is not None:
            self._delta_checked = None
        try:
            # servers keep the slot names the live version gave them, so an endpoint that moves is one
            # `set server` at runtime and not a rename (haproxy_check/runtime/slots.py)
            if timings is not None:
                last = self._patcher.last
                delta = delta and last is not None and last.result is self._passed_render
                render, how = await asyncio.to_thread(self._patcher.render, view, previous=previous)
                metrics.RECONCILE_RENDERS.labels(how).inc()
                if how.startswith("full:") and how != "full:first":
                    log.info("reconcile rendered in full", why=self._patcher.reason)
            else:
                render = await asyncio.to_thread(self.gate.renderer.render, view, subject=None, previous=previous)
        except RenderError as exc:
            self._patcher.forget()
            return isolating.Attempt(view, refused=exc)
        finally:
            self._timing("render", mark, timings)
        mark = self._clock()
        try:
            if delta and how == "unchanged" and render is self._passed_render and self._passed is not None:
                # the very render that passed last time (no object it reads changed): judged already
                metrics.RECONCILE_CHECKS.labels("reused").inc()
                checked, self._delta_checked = self._passed
                return isolating.Attempt(view, render, checked=checked)
            closure = self._patcher.closure if delta and how == "patched" else None
            if closure is not None:
                partial = await self.gate.checker.check(closure)
                if partial.ok and not _binds_nothing(partial):
                    self._delta_checked = self._patcher.changed
                    metrics.RECONCILE_CHECKS.labels("delta").inc()
                    return isolating.Attempt(view, render, checked=partial)
                # failed, undecided or nothing bound: the whole configuration decides, rendered in full
                # so that isolation can trace the alerts (the patched bytes are the same)
                metrics.RECONCILE_CHECKS.labels("full").inc()
                metrics.RECONCILE_RENDERS.labels("full:check").inc()
                render = await asyncio.to_thread(self.gate.renderer.render, view, subject=None, previous=previous)
                return isolating.Attempt(view, render, checked=await self.gate.checker.check(render))
            if timings is not None:
                metrics.RECONCILE_CHECKS.labels("full").inc()
            checked = await self.gate.checker.check(render)
            if not checked.ok and how in ("patched", "unchanged"):
                # a patched render has no source map: the full one names the objects behind each alert
                # (the same bytes, so the same verdict; isolation reads the origins)
                metrics.RECONCILE_RENDERS.labels("full:check").inc()
                render = await asyncio.to_thread(self.gate.renderer.render, view, subject=None, previous=previous)
                checked = await self.gate.checker.check(render)
        finally:
            self._timing("check", mark, timings)
        return isolating.Attempt(view, render, checked=checked)

    async def _refused_gateways(self, view: State, left: list[leaveouts.LeftOut], live: Promoted | None,
                                previous: Description | None, by_ref: dict[Ref, list[Finding]],
                                ) -> tuple[State, list[leaveouts.LeftOut]]:
        """Gateways the Gateway API says to reject: held back where the data plane runs them
        (webhook.reconcile.leaveouts)."""
        refused = gatewayrefusals.refused(view)
        if not refused:
            return view, left
        last_good = self._last_good if self._last_good is not None else await self._restored(view, live, previous)
        view, kept = leaveouts.refused_gateways(view, refused, last_good, by_ref)
        return view, [*left, *kept]

    async def _record(self, view: State, promoted: Promoted) -> None:
        """Keep the promoted view's objects on disk (webhook.reconcile.promotedversions); failing never un-promotes."""
        if self._versions is None:
            return
        try:
            await asyncio.to_thread(self._versions.save, view, promoted.content_hash)
        except OSError as exc:
            log.error("could not record the promoted versions; a restart will not hold back", error=repr(exc))

    async def _roll_back_record(self, promotion: reconcilechecks.Promotion) -> None:
        """After a background full check refused a delta-checked promotion: the versions on disk are made
        the last fully checked view's again (what the next run holds back at, ``_run``), so a restart
        before that run does not hold back at versions the full check refused. Under the run lock (a run
        records its own promotion); the live version stays what it is, so the record stays usable."""
        if self._versions is None or self.promoter is None:
            return
        async with self._lock:
            live = await asyncio.to_thread(self.promoter.last_known_good)
            checked = self.full_checks.fully_checked
            try:
                if checked is None or live is None:
                    await asyncio.to_thread(self._versions.forget)
                else:
                    await asyncio.to_thread(self._versions.save, checked, live.content_hash)
            except OSError as exc:
                log.error("could not roll the promoted versions on disk back after a disagreement; a restart "
                          "before the next run may hold back at versions the full check refused", error=repr(exc))
                return
            log.info("promoted versions on disk rolled back to the last fully checked view",
                     refused=promotion.version)

    async def _restored(self, view: State, live: Promoted | None, previous: Description | None) -> State | None:
        """The promoted versions a previous process recorded, once per process, when they still pass
        ``haproxy -c`` with everything else as stored now (webhook.reconcile.promotedversions). Raises CheckTimedOut."""
        if self._versions is None or self._restore_tried:
            return None
        recorded = await asyncio.to_thread(self._versions.load, live.content_hash if live is not None else None)
        if recorded is None:
            self._restore_tried = True
            return None
        recorded = promotedversions.same_objects(recorded, view)
        judged = await self._attempt(promotedversions.view_with(view, recorded), previous)
        self._restore_tried = True
        if not judged.ok:
            log.warning("promoted versions on disk do not pass haproxy -c with the objects stored now; not used",
                        decided=judged.decided)
            return None
        log.info("holding back at the promoted versions on disk", objects=len(recorded))
        self._last_good = promotedversions.as_state(recorded, f"recorded:{live.content_hash[:12] if live else ''}")
        return self._last_good

    def _timing(self, step: str, mark: float, timings: dict[str, float] | None) -> None:
        if timings is not None:
            timings[step] = self._clock() - mark
            metrics.RECONCILE_SECONDS.labels(step).observe(timings[step])

    def _undecided(self, exc: CheckTimedOut, state: State, by_ref: dict[Ref, list[Finding]],
                   left: list[leaveouts.LeftOut], live: Promoted | None, timings: dict[str, float]) -> Outcome:
        log.warning("reconcile could not decide; nothing promoted", version=state.version, error=str(exc))
        return Outcome(Result.UNDECIDED, state.version, live, _faults(by_ref), tuple(left), (str(exc),), timings)

    def _rejected(self, attempt: isolating.Attempt, state: State, by_ref: dict[Ref, list[Finding]],
                  left: list[leaveouts.LeftOut], live: Promoted | None, timings: dict[str, float]) -> Outcome:
        """No culprit could be set aside: the first failure's findings, and last-known-good stays."""
        if attempt.refused is not None:
            return self._refused(attempt.refused, state, by_ref, left, live, timings)
        lines = []
        for alert in attempt.checked.alerts if attempt.checked is not None else ():
            owner = alert.origin.ref if alert.origin is not None else None
            finding = self.gate._alert_finding(owner or Ref("", "", ""), alert)
            if owner is not None:
                by_ref.setdefault(owner, []).append(finding)
            lines.append(f"{owner}: {finding.field + ': ' if finding.field else ''}{finding.message}"
                         if owner else finding.message)
        if not lines and attempt.checked is not None and attempt.checked.error:
            lines.append(attempt.checked.error)
        metrics.PROMOTIONS_REJECTED.inc()
        return Outcome(Result.REJECTED, state.version, live, _faults(by_ref), tuple(left), tuple(lines), timings)

    def _live_description(self, live: Promoted | None) -> Description | None:
        """The live version's description from memory (promoted by this process), else None."""
        if live is None:
            return None
        if self._described is not None and self._described[0] == live.version:
            return self._described[1]
        kept = self.memory.get(live.version)
        return kept.description if kept is not None else None

    def _read_live_description(self, live: Promoted) -> Description | None:
        """The live version's description.json, read once after a restart (blocking: run it in a thread)."""
        if self.promoter is None:
            return None
        try:
            description: Description | None = descriptionfiles.read(self.promoter.output / live.version)
        except (OSError, ValueError, TypeError):
            description = None  # pruned by hand, or promoted before descriptions were: fresh slot names
        self._described = (live.version, description)
        return description

    def _statuses(self, view: State, state: State) -> dict[str, Any]:
        """The statuses of our objects only: another controller's route or policy is not ours to describe.
        Recomputed only for the objects whose status inputs changed (``webhook.reconcile.promotedstatuses``)."""
        return self._promoted_statuses.of(view, state)

    def _add_render_findings(self, render: RenderResult, by_ref: dict[Ref, list[Finding]], state: State) -> None:
        """Render findings about stored objects of ours (``audits.ours_in``), under the same enforcement
        settings as admission."""
        ours = audits.ours_in(self.gate.scope, state)
        for finding in render.findings:
            ref = audits.parse_ref(finding.about)
            if ref is None:
                continue
            if ours is not None:
                obj = state.get(ref.kind, ref.namespace, ref.name)
                if obj is not None and not ours(obj):
                    continue
            found = self.gate.rules.enforcement.apply([finding], namespace=ref.namespace)
            known = by_ref.setdefault(ref, [])
            known.extend(f for f in found if f not in known)

    def _refused(self, exc: RenderError, state: State, by_ref: dict[Ref, list[Finding]],
                 left: list[leaveouts.LeftOut], live: Promoted | None, timings: dict[str, float]) -> Outcome:
        origin = exc.origin
        finding = Finding(codes.RENDER_REFUSED, exc.message, origin.path if origin else (), Severity.DENY)
        if origin is not None:
            by_ref.setdefault(origin.ref, []).append(finding)
        line = f"{origin.ref}: {finding.field + ': ' if finding.field else ''}{exc.message}" if origin else exc.message
        metrics.PROMOTIONS_REJECTED.inc()
        return Outcome(Result.REJECTED, state.version, live, _faults(by_ref), tuple(left), (line,), timings)

    async def _report(self, outcome: Outcome, state: State) -> None:
        kinds: dict[str, int] = {}
        for ref in outcome.at_fault:
            kinds[ref.kind] = kinds.get(ref.kind, 0) + 1
        metrics.OBJECTS_AT_FAULT.clear()
        for kind, count in kinds.items():
            metrics.OBJECTS_AT_FAULT.labels(metrics.kind_label(kind)).set(count)
        violations: dict[tuple[str, str], int] = {}
        for fault in outcome.faults:
            for f in fault.findings:
                violations[(f.code, str(f.severity))] = violations.get((f.code, str(f.severity)), 0) + 1
        _count_isolated(outcome.left_out)
        metrics.VIOLATIONS.clear()
        for (code, severity), count in violations.items():
            metrics.VIOLATIONS.labels(code, severity).set(count)
        for fault in outcome.faults:
            level = log.warning if denies(fault.findings) else log.info
            level("stored object has findings", object=str(fault.ref), message=fault.message,
                  codes=sorted({f.code for f in fault.findings}), version=outcome.state_version)
        for item in outcome.left_out:
            log.warning("left out of the output", object=str(item.ref), what=item.what)
        if outcome.result is Result.HELD:
            log.error("not promoted: mass drop held by the shrink guard; last-known-good stays live",
                      version=outcome.state_version, live=outcome.promoted.version if outcome.promoted else None,
                      why=outcome.rejection[0])
        elif outcome.result is Result.REJECTED:
            log.error("not promoted; last-known-good stays live", version=outcome.state_version,
                      live=outcome.promoted.version if outcome.promoted else None, why=list(outcome.rejection))
        elif outcome.result is Result.PROMOTED and outcome.promoted is not None:
            log.info("promoted", version=outcome.promoted.version, state=outcome.state_version,
                     hash=outcome.promoted.content_hash[:12])
        if self.recorder is not None:
            await self._events(outcome, state)

    async def _events(self, outcome: Outcome, state: State) -> None:
        assert self.recorder is not None
        left = {item.ref: item for item in outcome.left_out}
        for fault in outcome.faults:
            stored = state.get(fault.ref.kind, fault.ref.namespace, fault.ref.name)
            uid = str(dig(stored, "metadata", "uid") or "") if stored is not None else ""
            api_version = str(stored.get("apiVersion") or "") if stored is not None else ""
            by_reason: dict[str, list[Finding]] = {}
            for f in fault.findings:
                if events.worth_an_event(f):
                    by_reason.setdefault(events.reason_for(f), []).append(f)
            for reason, found in sorted(by_reason.items()):
                message = "; ".join(f"{f.field}: {f.message}" if f.field else f.message for f in found)
                if fault.ref in left and any(f in left[fault.ref].findings for f in found):
                    message += f"; in the HAProxy configuration: {left[fault.ref].what}"
                await self.recorder.warn(fault.ref, reason, message, uid=uid, api_version=api_version)


def _count_isolated(left: tuple[leaveouts.LeftOut, ...]) -> None:
    for treatment in (leaveouts.Treatment.HELD_BACK, leaveouts.Treatment.LEFT_OUT):
        metrics.ISOLATED.labels(str(treatment)).set(sum(item.treatment is treatment for item in left))


def _faults(by_ref: dict[Ref, list[Finding]]) -> tuple[Fault, ...]:
    return tuple(Fault(ref, tuple(found)) for ref, found in sorted(by_ref.items()) if found)


def _description(render: RenderResult) -> bytes:
    return _json_bytes(render.description.as_dict())


def _kept(render: RenderResult, files: dict[str, bytes]) -> Kept:
    """What the hooks need of a promoted version: the description, and of the files only the certificate
    and CA payloads (``set ssl``); haproxy.cfg and the maps stay on disk, not in memory twice."""
    payloads = {f.path: files[f.path] for f in render.description.files if f.kind != "other" and f.path in files}
    return Kept(render.description, payloads, {})


def _write_replacing(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _json_bytes(data: Any, *, sort_keys: bool = False) -> bytes:
    """JSON for the wrapper and for humans: one line per top-level member. Not ``indent=``: that makes json
    fall back from its C encoder to pure Python, seconds per run at 10,000 routes."""
    if not isinstance(data, dict):
        return (json.dumps(data, sort_keys=sort_keys) + "\n").encode()
    keys = sorted(data) if sort_keys else list(data)
    members = [f"  {json.dumps(k)}: {json.dumps(data[k], sort_keys=sort_keys)}" for k in keys]
    return ("{\n" + ",\n".join(members) + "\n}\n").encode() if members else b"{}\n"


class MembersJson:
    """``_json_bytes(data, sort_keys=True)`` byte for byte, each member's text reused while its value is
    the very object of last time (``webhook.reconcile.promotedstatuses`` hands an unchanged status on as it is):
    the statuses of 10,000 routes are not serialized again on every change."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[Any, str]] = {}  # key -> (the value, held so it stays that object; text)

    def of(self, data: dict[str, Any]) -> bytes:
        texts: dict[str, tuple[Any, str]] = {}
        for key, value in data.items():
            seen = self._texts.get(key)
            texts[key] = seen if seen is not None and seen[0] is value else (
                value, f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}")
        self._texts = texts
        if not texts:
            return b"{}\n"
        return ("{\n" + ",\n".join(texts[k][1] for k in sorted(texts)) + "\n}\n").encode()


class _Steps:
    """A run's step timings: each step adds its seconds (a step can run in parts); ``finish`` adds the
    whole run and what no step covered, and exports them all (``routegate_reconcile_step_duration_seconds``)."""

    def __init__(self, clock: Callable[[], float], timings: dict[str, float]) -> None:
        self._clock = clock
        self.timings = timings

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        mark = self._clock()
        try:
            yield
        finally:
            seconds = self._clock() - mark
            self.timings[name] = self.timings.get(name, 0.0) + seconds
            metrics.RECONCILE_SECONDS.labels(name).observe(seconds)

    def finish(self, total: float) -> None:
        covered = sum(self.timings.values())
        self.timings["total"] = total
        self.timings["unattributed"] = max(total - covered, 0.0)
        metrics.RECONCILE_SECONDS.labels("total").observe(total)
        metrics.RECONCILE_SECONDS.labels("unattributed").observe(self.timings["unattributed"])
