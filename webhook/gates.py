"""The Gate: one coroutine that judges a change, shared by the webhook, the CLI and reconcile loops.

It knows no HTTP. Steps, in one direction only:
  validators (schema, CEL, HAProxy rules, cross-object)  ->  overlay the change on the state
  ->  render (off the event loop)  ->  sandboxed ``haproxy -c``  ->  baseline rule  ->  Verdict.

Baseline rule (HAPTIC's): when the proposed configuration fails, render and check the state without
the change. If that fails with the same alerts, other objects broke it already: admit with a warning,
since denying would block an unrelated fix. Otherwise the change broke it: deny. Baselines are cached
per state version so a burst of reviews checks the baseline once.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from haproxy_check import classify
from haproxy_check.checks import CheckTimedOut
from haproxy_check.results import Alert, CheckResult, HAProxyBinary, RenderError, RenderResult
from validators import attachments, checks, statuses
from validators.changes import Change, Operation
from validators.enforcement import Enforcement
from validators.findings import Finding, Severity, denies, format_path
from validators.objects import REVIEWED_KINDS, Ref
from validators.states import Overlay, State, Without
from webhook.verdicts import Decision, Verdict

HAPROXY_REJECTED = "RG0800"
RENDER_REFUSED = "RG0801"
BASELINE_CACHE = 8
T = TypeVar("T")


class RuleChecks(Protocol):
    enforcement: Enforcement

    def run(self, change: Change, state: State) -> checks.Result: ...


class Renders(Protocol):
    def render(self, state: State, *, subject: Ref | None = None) -> RenderResult: ...


class Checks(Protocol):
    binary: HAProxyBinary

    async def check(self, render: RenderResult) -> CheckResult: ...


_LINE_NUMBERS = re.compile(r"\[[^\]]*:\d+\]|\bline \d+\b|:\d+\b")


def _alert_key(alert: Alert) -> tuple[str, str]:
    """What makes two alerts 'the same failure' across renders whose line numbers differ."""
    owner = str(alert.origin.ref) if alert.origin else ""
    return owner, _LINE_NUMBERS.sub("", alert.message)


def _batchable(change: Change, combined: State) -> bool:
    """A change the combined render covers: reviewed, not a delete, and (routes) attached somewhere."""
    if change.ref.kind not in REVIEWED_KINDS or change.operation is Operation.DELETE:
        return False
    return change.ref.kind not in attachments.ROUTE_KINDS or bool(attachments.attach(change.subject, combined)[0])


class Gate:
    def __init__(
        self,
        *,
        rules: RuleChecks,
        renderer: Renders,
        checker: Checks,
        clock: Callable[[], float] = time.perf_counter,
        note_budget: float = 1.0,
    ) -> None:
        self.rules = rules
        self.renderer = renderer
        self.checker = checker
        self.note_budget = note_budget  # seconds a render may take before the reload note is skipped
        self._clock = clock
        self._baselines: OrderedDict[str, asyncio.Future[CheckResult]] = OrderedDict()
        self._baseline_renders: OrderedDict[str, asyncio.Future[RenderResult]] = OrderedDict()

    @property
    def binary(self) -> HAProxyBinary:
        return self.checker.binary

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict:
        ref = change.ref
        if ref.kind not in REVIEWED_KINDS:
            return Verdict(Decision.ALLOW, ref, handled=False,
                           notes=(f"routegate does not check {ref.kind or 'this kind'}; allowed unchecked",))
        timings: dict[str, float] = {}
        started = self._clock()
        validated = await asyncio.to_thread(self.rules.run, change, state)
        findings = list(validated.findings)
        timings["validate"] = self._clock() - started
        if change.operation is Operation.DELETE:
            # Deleting an object never needs its own fields to be valid: its findings (the impact on
            # objects that referenced it) are warnings at most; only the render can deny a delete.
            findings = [f.with_severity(Severity.WARN) for f in findings]
        else:
            if denies(findings):
                return Verdict(Decision.DENY, ref, findings=tuple(findings), haproxy=self.binary,
                               timings=timings)
            if validated.defaulted is not None:
                # Render what the API server will store: the object with its schema defaults applied.
                change = replace(change, obj=validated.defaulted)
        proposed = Overlay(state, change)
        mark = self._clock()
        try:
            render = await asyncio.to_thread(self.renderer.render, proposed, subject=ref)
        except RenderError as exc:
            return self._refused(change, exc, findings, timings)
        timings["render"] = self._clock() - mark
        # Render-time findings about the subject follow the same enforcement settings as the rules.
        findings += self.rules.enforcement.apply([f for f in render.findings if f.about in ("", str(ref))],
                                                 namespace=ref.namespace)
        if denies(findings):
            return Verdict(Decision.DENY, ref, findings=tuple(findings), haproxy=self.binary, timings=timings)
        mark = self._clock()
        try:
            result = await self.checker.check(render)
        except CheckTimedOut as exc:
            return Verdict(Decision.ERROR, ref, findings=tuple(findings), error=str(exc), haproxy=self.binary,
                           timings=timings)
        timings["check"] = self._clock() - mark
        if result.ok:
            notes = await self._apply_note(state, render, render_seconds=timings["render"]) if reload_note else ()
            timings["total"] = self._clock() - started
            return Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=notes, haproxy=self.binary,
                           timings=timings, status=render.statuses.get(str(ref), {}))
        verdict = await self._judge_failure(change, state, findings, result, timings, started)
        return replace(verdict, status=render.statuses.get(str(ref), {}))

    async def review_all(self, items: Sequence[tuple[Change, State]], *, combined: State) -> list[Verdict]:
        """Judge changes applied together (``kubectl apply -f DIR``): each against its state holding all
        the others, ``combined`` holding all of them.

        When the combined configuration passes ``haproxy -c``, one render and one check serve every
        change (a CI dry run of 1000 routes costs one render, not 1000). A combination that fails, and
        any route attached to no listener (rendered behind a synthetic listener only as a subject), are
        judged one by one as the webhook would. Batch verdicts carry no reload note: that is advice
        about one change to a running data plane.
        """
        verdicts: list[Verdict | None] = [None] * len(items)
        batch = [i for i, (change, _) in enumerate(items) if _batchable(change, combined)]
        passed = await self._combined_passes(combined) if batch else None
        if passed is not None:
            render, seconds = passed
            for i in batch:
                verdicts[i] = await self._batch_verdict(items[i], render, combined, seconds)
        for i, (change, state) in enumerate(items):
            if verdicts[i] is None:
                verdicts[i] = await self.review(change, state=state, reload_note=False)
        return [v for v in verdicts if v is not None]

    async def _combined_passes(self, combined: State) -> tuple[RenderResult, float] | None:
        """The render of ``combined`` and its time when ``haproxy -c`` accepts it, else None."""
        mark = self._clock()
        try:
            render = await asyncio.to_thread(self.renderer.render, combined, subject=None)
            result = await self.checker.check(render)
        except (RenderError, CheckTimedOut):
            return None
        return (render, self._clock() - mark) if result.ok else None

    async def _batch_verdict(self, item: tuple[Change, State], render: RenderResult, combined: State,
                             seconds: float) -> Verdict:
        change, state = item
        ref = change.ref
        validated = await asyncio.to_thread(self.rules.run, change, state)
        findings = list(validated.findings)
        if not denies(findings):  # as in review(): a denied object is not judged by its render
            findings += self.rules.enforcement.apply([f for f in render.findings if f.about == str(ref)],
                                                     namespace=ref.namespace)
        status = (statuses.route_status(change.subject, combined) if ref.kind in attachments.ROUTE_KINDS else {})
        decision = Decision.DENY if denies(findings) else Decision.ALLOW
        return Verdict(decision, ref, findings=tuple(findings), haproxy=self.binary,
                       timings={"render+check (shared by the batch)": seconds}, status=status)

    async def _judge_failure(
        self, change: Change, state: State, findings: list[Finding], result: CheckResult,
        timings: dict[str, float], started: float,
    ) -> Verdict:
        ref = change.ref
        if not result.decided:  # the checker failed (signal, garbage, ...): no judgement, never an allow
            return Verdict(Decision.ERROR, ref, findings=tuple(findings), error=result.error, haproxy=self.binary,
                           timings=timings)
        mark = self._clock()
        try:
            baseline = await self._baseline(state)
        except (CheckTimedOut, RenderError):
            baseline = None
        if baseline is not None and not baseline.decided:
            baseline = None  # a baseline the checker could not judge excuses nothing
        timings["baseline"] = self._clock() - mark
        known = {_alert_key(a) for a in baseline.alerts} if baseline is not None and not baseline.ok else set()
        new = [a for a in result.alerts if _alert_key(a) not in known]
        if not new and baseline is not None:
            isolated = await self._isolated(change, state, baseline)
            if isolated is None:
                return Verdict(Decision.ERROR, ref, findings=tuple(findings), haproxy=self.binary, timings=timings,
                               error="haproxy -c could not judge the change apart from the objects that "
                                     "already break the configuration")
            new = isolated
        timings["total"] = self._clock() - started
        if not new:
            first = result.alerts[0]
            owner = str(first.origin.ref) if first.origin else "other objects"
            # The culprit comes first: the apiserver caps a warning at 256 characters.
            note = (f"the HAProxy configuration already fails haproxy -c because of {owner}; "
                    f"this change does not alter that: {first.message}")
            return Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=(note,),
                           haproxy=self.binary, timings=timings)
        denial = [self._alert_finding(ref, alert) for alert in new]
        return Verdict(Decision.DENY, ref, findings=tuple(findings + denial), alerts=tuple(new),
                       haproxy=self.binary, timings=timings)

    async def _isolated(self, change: Change, state: State, baseline: CheckResult) -> list[Alert] | None:
        """Alerts of the change checked apart from the objects the baseline blames (None: undecided).

        HAProxy reports one error per map file or section, so an object that already breaks the
        configuration can hide a new error of the same kind; hide the culprits and check again.
        """
        culprits = frozenset(a.origin.ref for a in baseline.alerts if a.origin and a.origin.ref != change.ref)
        if not culprits:
            return []
        try:
            render = await asyncio.to_thread(self.renderer.render, Overlay(Without(state, culprits), change),
                                             subject=change.ref)
            result = await self.checker.check(render)
        except RenderError:
            return []
        except CheckTimedOut:
            return None
        if not result.decided:
            return None
        return [] if result.ok else list(result.alerts)

    def _alert_finding(self, ref: Ref, alert: Alert) -> Finding:
        version = self.binary.version
        where = ""
        if alert.file:
            line = next((c[9:] for c in alert.context if c.startswith(">")), "")
            where = f" ({alert.file}:{alert.line}" + (f": {line.strip()}" if line.strip() else "") + ")"
        message = f"haproxy {version} rejects the configuration: {alert.message}{where}"
        if alert.origin is None:
            return Finding(HAPROXY_REJECTED, message)
        if alert.origin.ref == ref:
            return Finding(HAPROXY_REJECTED, message, alert.origin.path)
        # The change broke a line another object produced (e.g. a duplicate name): name that object.
        field = format_path(alert.origin.path)
        return Finding(HAPROXY_REJECTED, f"{message}; the failing line comes from {alert.origin.ref}"
                       + (f" {field}" if field else ""))

    def _refused(self, change: Change, exc: RenderError, findings: list[Finding],
                 timings: dict[str, float]) -> Verdict:
        ref = change.ref
        origin = exc.origin
        if origin is not None and origin.ref != ref:
            message = f"{exc.message} (in {origin.ref})"
            path: tuple[str | int, ...] = ()
        else:
            message, path = exc.message, origin.path if origin else ()
        finding = Finding(RENDER_REFUSED, message, path, Severity.DENY)
        return Verdict(Decision.DENY, ref, findings=(*findings, finding), haproxy=self.binary, timings=timings)

    async def _apply_note(self, state: State, render: RenderResult, *, render_seconds: float) -> tuple[str, ...]:
        """Say whether the data plane needs a reload for this change (the classifier's verdict).

        The note needs a render of the state without the change. It is advice, so on a large state whose
        baseline is not cached it is skipped rather than doubling the review's latency."""
        if state.version not in self._baseline_renders and render_seconds > self.note_budget:
            return (f"reload classification skipped: rendering this state takes {render_seconds:.1f}s",)
        try:
            before = await self._baseline_render(state)
        except RenderError:
            return ()
        decision = classify.classify(
            classify.Rendered(before.description, before.config),
            classify.Rendered(render.description, render.config),
            version=self.binary.version_tuple,
        )
        if decision.apply is classify.ApplyClass.RELOAD:
            why = "; ".join(r.split(": ", 1)[-1] for r in decision.reasons[:3])
            return (f"this change needs an HAProxy reload ({why})",)
        if decision.apply is classify.ApplyClass.RUNTIME:
            return ("this change applies through the HAProxy Runtime API without a reload",)
        return ()

    async def _baseline_render(self, state: State) -> RenderResult:
        """The render of ``state`` itself (without the change), cached per state version."""
        return await _cached(self._baseline_renders, state.version,
                             lambda: asyncio.to_thread(self.renderer.render, state, subject=None))

    async def _baseline(self, state: State) -> CheckResult:
        """The check of ``state`` itself, shared by concurrent reviews and cached per version."""

        async def check() -> CheckResult:
            return await self.checker.check(await self._baseline_render(state))

        return await _cached(self._baselines, state.version, check)


async def _cached(cache: OrderedDict[str, asyncio.Future[T]], key: str,
                     make: Callable[[], Awaitable[T]]) -> T:
    """One computation per key shared by concurrent callers; failures are not cached."""
    future = cache.get(key)
    if future is None:
        future = asyncio.ensure_future(make())
        cache[key] = future
        while len(cache) > BASELINE_CACHE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    try:
        return await asyncio.shield(future)
    except BaseException:
        if future.done() and cache.get(key) is future:
            del cache[key]
        raise
