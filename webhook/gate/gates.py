"""The Gate: one coroutine that judges a change, shared by the webhook, the CLI and reconcile loops.

It knows no HTTP. Steps, in one direction only:
  validators (schema, CEL, HAProxy rules, cross-object)  ->  overlay the change on the state
  ->  render (off the event loop)  ->  sandboxed ``haproxy -c``  ->  baseline rule  ->  Verdict.

Baseline rule (HAPTIC's): when the proposed configuration fails, render and check the state without
the change. If that fails with the same alerts, other objects broke it already: admit with a warning,
since denying would block an unrelated fix. Otherwise the change broke it: deny. Baselines are cached
per state version so a burst of reviews checks the baseline once. When the baseline's failure can hide the
change's own, ``isolationrounds`` checks the change apart from the objects the baseline blames.

This module is the single review; many changes settled by one render and one check (``Gate.review_all``,
``Gate.review_together``) are ``together``, whose ``ReviewsTogether`` the Gate inherits.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.results import Alert, CheckResult, HAProxyBinary, RenderError, RenderResult
from haproxy_check.runtime import predictions, slots
from haproxy_check.runtime.predictions import Prediction
from haproxy_check.traffic import diffs
from haproxy_check.traffic.diffs import TrafficDiff
from validators import checks, dataplanes
from validators.changes import Change, Operation
from validators.findings import Finding, Severity, denies, format_path
from validators.objects import REVIEWED_KINDS, Ref
from validators.states import Overlay, State
from validators.views import closures, scopes
from webhook.gate import isolationrounds, trafficdiffs
from webhook.gate.alertkeys import alert_key as _alert_key
from webhook.gate.gateparts import Checks as Checks
from webhook.gate.gateparts import Renders as Renders
from webhook.gate.gateparts import RuleChecks as RuleChecks
from webhook.gate.gateparts import already_failing, noted, unchecked
from webhook.gate.loadedindex import LoadedIndex
from webhook.gate.together import ReviewsTogether
from webhook.gate.verdicts import Decision, Verdict

HAPROXY_REJECTED = "RG0800"
NOT_ATTACHED = "RG0401"
RENDER_REFUSED = "RG0801"
BASELINE_CACHE = 8
T = TypeVar("T")


def _binds_nothing(result: CheckResult) -> bool:
    """haproxy -c found no error but no listener either (exit code 2 without an alert): valid, but with no
    frontend nothing loaded the maps, so the change's map entries were not judged."""
    return result.decided and result.exit_code == 2 and not result.alerts


# A review's closure and the render of the change on it, or why the render was refused.
_Rendered = tuple[State, RenderResult] | RenderError


class Gate(ReviewsTogether):
    def __init__(
        self,
        *,
        rules: RuleChecks,
        renderer: Renders,
        checker: Checks,
        clock: Callable[[], float] = time.perf_counter,
        note_budget: float = 1.0,
        delta: bool = True,
        dataplane_version: tuple[int, ...] | None = None,
        scope: scopes.Scope | None = None,
        traffic: bool = True,
        traffic_budget: float = 1.0,
    ) -> None:
        self.rules = rules
        # Our GatewayClasses: every state a review sees is first seen through this scope.
        self.scope = scope if scope is not None else scopes.Scope()
        # the data plane's HAProxy version, which decides what applies at runtime (default: the checker's)
        self.dataplane_version = dataplane_version
        self.renderer = renderer
        self.checker = checker
        self.note_budget = note_budget  # seconds a render may take before the reload note is skipped
        # The traffic diff of every allow (webhook.gate.trafficdiffs), within ``traffic_budget`` seconds of
        # work on the two routing tables; False only to measure what it costs (bench/bench_gate.py).
        self.traffic = traffic
        self.traffic_budget = traffic_budget
        # True: a review renders and checks the change's closure (validators.views.closures, O(change));
        # False: the whole state (the reference the delta check is tested and monitored against).
        self.delta = delta
        # Called with every allow whose rendered configuration passed haproxy -c (webhook.gate.fullchecks
        # compares the delta check's clean allows with the background full check).
        self.passed_observers: list[Callable[[Change, Verdict], None]] = []
        # Called with every allow that carries its traffic diff, before the observers: judges that read
        # the diff (routegate policies on ``traffic``: webhook.gate.policyloading) may turn it into a deny.
        self.traffic_judges: list[Callable[[Change, State, Verdict], Verdict]] = []
        self._full: Gate | None = None
        self._clock = clock
        self._baselines: OrderedDict[str, asyncio.Future[CheckResult]] = OrderedDict()
        self._baseline_renders: OrderedDict[str, asyncio.Future[RenderResult]] = OrderedDict()
        # what the whole state loads (profiles, maps), recorded by whole-state renders off the request
        # path: the context of a delta review's apply note (webhook.gate.loadedindex)
        self.loaded = LoadedIndex()
        # Forked worker processes that run the rules of concurrent reviews judged together
        # (``review_together``, ``ruleworkers.rules_of``); 0: in this process. ``serve`` sets it.
        self.review_workers = 0

    @property
    def binary(self) -> HAProxyBinary:
        return self.checker.binary

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict:
        try:
            return self._stamped(await self._review(change, state=state, reload_note=reload_note))
        finally:
            # what the review's check took from the checker's pool is replaced now, off its path
            top_up = getattr(self.checker, "top_up_soon", None)
            if top_up is not None:
                top_up()

    def _stamped(self, verdict: Verdict, info: dict[str, str | bool] | None = None) -> Verdict:
        """A judged verdict names the data plane version it was rendered for, and warns when the checker's
        major.minor is another (``validators.dataplanes``). ``info``: ``dataplane_info()``, asked once by
        a caller stamping many verdicts."""
        if not verdict.handled or verdict.dataplane:
            return verdict
        info = info if info is not None else self.dataplane_info()
        warning = str(info.get("warning", ""))
        return replace(verdict, notes=(*verdict.notes, warning) if warning else verdict.notes,
                       dataplane={k: v for k, v in info.items() if k != "warning"})

    def dataplane_info(self) -> dict[str, str | bool]:
        """The data plane version renders are written for, the checker's, whether the data plane's was
        assumed, and the mismatch warning when their major.minor differ (verdicts and /readyz show it)."""
        checker = self.binary.version_tuple
        version = self.dataplane_version or dataplanes.major_minor(checker)
        info: dict[str, str | bool] = {"version": dataplanes.text(version), "checker": dataplanes.text(checker),
                                       "assumed": self.dataplane_version is None}
        warning = dataplanes.mismatch(checker, self.dataplane_version)
        if warning:
            info["warning"] = warning
        return info

    async def _review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict:
        ref = change.ref
        if ref.kind not in REVIEWED_KINDS:
            return unchecked(ref)
        state = self.scope.view(state)
        foreign = self._foreign(change, state)
        if foreign is not None:
            return foreign
        timings: dict[str, float] = {}
        started = self._clock()
        denied, change, findings, rendered = await asyncio.to_thread(self._validate_and_render, change, state,
                                                                     timings, started)
        if denied is not None:
            return denied
        return await self._review_validated(change, state, findings, timings, started, reload_note=reload_note,
                                            rendered=rendered)

    def _validate_and_render(self, change: Change, state: State, timings: dict[str, float], started: float,
                             ) -> tuple[Verdict | None, Change, list[Finding], _Rendered | None]:
        """The rules and, when they pass, the closure and its render (:meth:`_scope_and_render`): one trip to
        the worker thread for the whole CPU-bound part of a lone review, which every trip waits for the GIL."""
        validated = self.rules.run(change, state)
        timings["validate"] = self._clock() - started
        denied, change, findings = self._after_rules(change, validated, timings)
        if denied is not None:
            return denied, change, findings, None
        try:
            rendered: _Rendered = self._scope_and_render(state, change, None, timings)
        except RenderError as exc:
            rendered = exc
        return None, change, findings, rendered

    def _after_rules(self, change: Change, validated: checks.Result, timings: dict[str, float],
                     ) -> tuple[Verdict | None, Change, list[Finding]]:
        """The rules' part of a review: (a denial, or None to go on; the change to render; findings)."""
        ref = change.ref
        findings = list(validated.findings)
        if change.operation is Operation.DELETE:
            # Deleting an object never needs its own fields to be valid: its findings (the impact on
            # objects that referenced it) are warnings at most; only the render can deny a delete.
            findings = [f.with_severity(Severity.WARN) for f in findings]
        else:
            if denies(findings):
                return (Verdict(Decision.DENY, ref, findings=tuple(findings), haproxy=self.binary, timings=timings),
                        change, findings)
            if validated.defaulted is not None:
                # Render what the API server will store: the object with its schema defaults applied.
                change = replace(change, obj=validated.defaulted)
        return None, change, findings

    async def _review_validated(self, change: Change, state: State, findings: list[Finding],
                                timings: dict[str, float], started: float, *, reload_note: bool,
                                scope: State | None = None, rendered: _Rendered | None = None) -> Verdict:
        """The rest of :meth:`review` once the rules passed: closure, render, ``haproxy -c``, baseline.
        ``scope``: the change's closure over ``state`` when already known; ``rendered``: what
        :meth:`_scope_and_render` gave (or raised) when already done."""
        ref = change.ref
        original, full_state = change, state
        if rendered is None:
            try:
                rendered = await asyncio.to_thread(self._scope_and_render, state, change, scope, timings)
            except RenderError as exc:
                rendered = exc
        if isinstance(rendered, RenderError):
            return self._refused(change, rendered, findings, timings)
        # From here on ``state`` is what the render sees: the change's closure (the baseline view).
        state, render = rendered
        # Render-time findings about the subject follow the same enforcement settings as the rules.
        findings += self.rules.enforcement.apply([f for f in render.findings if f.about in ("", str(ref))],
                                                 namespace=ref.namespace)
        findings = checks.without_shadowed(findings)  # one finding per fact (validators.checks)
        if denies(findings):
            return Verdict(Decision.DENY, ref, findings=tuple(findings), haproxy=self.binary, timings=timings)
        # The reload note needs only the renders: it is worked out while haproxy -c runs (another process),
        # and its render of the state without the change is the baseline a failing check compares with.
        note = _ahead(self._apply_note(state, render, render_seconds=timings["render"])) \
            if reload_note else None
        # The traffic diff needs the same two renders: worked out meanwhile too, kept only for an allow.
        traffic = _ahead(self._traffic(state, render, timings)) if self.traffic else None
        mark = self._clock()
        try:
            result = await self.checker.check(render)
        except BaseException as exc:
            _drop(note)
            _drop(traffic)
            if not isinstance(exc, CheckTimedOut):
                raise
            return Verdict(Decision.ERROR, ref, findings=tuple(findings), error=str(exc), haproxy=self.binary,
                           timings=timings)
        timings["check"] = self._clock() - mark
        # A closure without any listener is no configuration haproxy -c judges ("will not start"): the
        # whole state decides (only a change that leaves no bind among its related objects).
        whole_state_decides = self.delta and _binds_nothing(result)
        if whole_state_decides or not result.ok:
            _drop(note)  # the note goes only with an allow of this very configuration
            _drop(traffic)
        if whole_state_decides:
            return await self._full_gate().review(original, state=full_state, reload_note=reload_note)
        if result.ok:
            prediction = await note if note is not None else None
            diff = await traffic if traffic is not None else None
            timings["total"] = self._clock() - started
            verdict = Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=noted(prediction),
                              haproxy=self.binary, timings=timings, status=render.statuses.get(str(ref), {}),
                              prediction=prediction)
            verdict = await self._traffic_judged(original, full_state, trafficdiffs.judged(verdict, diff, render))
            if verdict.allowed:
                for passed in self.passed_observers:
                    passed(change, verdict)
            return verdict
        verdict = await self._judge_failure(change, state, findings, result, timings, started)
        return replace(verdict, status=render.statuses.get(str(ref), {}))

    async def _traffic_judged(self, change: Change, state: State, verdict: Verdict) -> Verdict:
        if not self.traffic_judges:
            return verdict
        # CEL on the diff: off the event loop, as the rules are
        return await asyncio.to_thread(self._traffic_judged_now, change, state, verdict)

    def _traffic_judged_now(self, change: Change, state: State, verdict: Verdict) -> Verdict:
        for judge in self.traffic_judges:
            if verdict.allowed and verdict.traffic is not None:
                verdict = judge(change, state, verdict)
        return verdict

    async def _traffic(self, state: State, render: RenderResult, timings: dict[str, float]) -> TrafficDiff:
        """The traffic diff of ``render`` against the render of ``state`` (the closure without the change,
        the baseline the reload note renders too: cached, shared)."""
        try:
            before = await self._baseline_render(state)
        except RenderError as exc:
            return diffs.timed_out(f"the closure without the change could not be rendered: {exc.message}")
        mark = self._clock()
        # The diff is linear in the closure, like its render: a large closure (a Gateway with thousands of
        # routes) gets as long as its render took, a small one ``traffic_budget``.
        budget = self.traffic_budget if self.traffic_budget <= 0 else max(self.traffic_budget,
                                                                            timings.get("render", 0.0))
        diff = await asyncio.to_thread(trafficdiffs.compute, before, render, budget=budget, clock=self._clock)
        timings["traffic"] = self._clock() - mark
        return diff

    def _foreign(self, change: Change, state: State) -> Verdict | None:
        """The verdict on another controller's object (``state`` is the scoped view), else None."""
        why = self.scope.out_of_scope(change, state)
        if not why:
            return None
        return Verdict(Decision.ALLOW, change.ref, handled=False,
                       notes=(f"{change.ref} is not ours: {why}; allowed unchecked",))

    def _scope_and_render(self, state: State, change: Change, scope: State | None,
                          timings: dict[str, float]) -> tuple[State, RenderResult]:
        """(What the review renders, checks and compares against: the change's closure over ``state``
        (the baseline view), or all of ``state``; the render of the proposed view ``Overlay(scope,
        change)``). On the worker thread, both in one trip: every trip waits for the GIL twice."""
        mark = self._clock()
        if scope is None:
            scope = closures.closure(state, change) if self.delta else state
        timings["scope"] = self._clock() - mark
        mark = self._clock()
        render = self.renderer.render(Overlay(scope, change), subject=change.ref)
        timings["render"] = self._clock() - mark
        return scope, render

    def _full_gate(self) -> Gate:
        """This gate without the delta check (same rules, renderer and checker)."""
        if self._full is None:
            self._full = Gate(rules=self.rules, renderer=self.renderer, checker=self.checker, clock=self._clock,
                              note_budget=self.note_budget, delta=False, dataplane_version=self.dataplane_version,
                              scope=self.scope, traffic=self.traffic, traffic_budget=self.traffic_budget)
        return self._full

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
        if new and baseline is not None and not baseline.ok:
            new = await isolationrounds.unmasked(change, state, baseline, new, baseline_of=self._baseline)
        if not new and baseline is not None:
            isolated = await isolationrounds.isolated(
                change, state, baseline, render=lambda view, subject: self.renderer.render(view, subject=subject),
                check=self.checker.check, baseline_of=self._baseline)
            if isolated is None:
                return Verdict(Decision.ERROR, ref, findings=tuple(findings), haproxy=self.binary, timings=timings,
                               error="haproxy -c could not judge the change apart from the objects that "
                                     "already break the configuration")
            new = isolated
        timings["total"] = self._clock() - started
        if not new:
            note = already_failing(result.alerts[0], ref)
            return Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=(note,), haproxy=self.binary,
                           timings=timings)
        denial = [self._alert_finding(ref, alert) for alert in new]
        return Verdict(Decision.DENY, ref, findings=tuple(findings + denial), alerts=tuple(new),
                       haproxy=self.binary, timings=timings)

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

    async def _apply_note(self, state: State, render: RenderResult, *, render_seconds: float) -> Prediction | None:
        """How the data plane takes this change: the runtime planner's prediction (``predictions``).

        The plan needs a render of the state without the change. It is advice, so on a large state whose
        baseline is not cached it is skipped rather than doubling the review's latency. A route attached
        to no listener gets none: it changes nothing a data plane runs, and RG0401 already says so.
        A delta review's closure lacks the profiles and maps the rest of the configuration loads: what
        the data plane has loaded comes from reconcile (``webhook.gate.loadedindex``); unpublished, a plan
        that turns on it is "unknown"."""
        if any(f.code == NOT_ATTACHED for f in render.findings):
            return None
        if state.version not in self._baseline_renders and render_seconds > self.note_budget:
            return Prediction.skipped(f"rendering this state takes {render_seconds:.1f}s")
        try:
            before = await self._baseline_render(state)
        except RenderError:
            return None
        version = self.dataplane_version or self.binary.version_tuple
        published = self.loaded.current() if self.delta else None
        # Off the loop: comparing two whole descriptions is CPU work. The proposed servers take the
        # baseline's slots, as a render for a data plane running the baseline would name them.
        return await asyncio.to_thread(
            lambda: predictions.predict(before.description, slots.stabilize(render.description, before.description),
                                        dataplane_version=version, files=render.files,
                                        loaded=published.loaded if published is not None else None,
                                        partial=self.delta,
                                        basis=published.basis if published is not None else ""))

    async def _baseline_render(self, state: State) -> RenderResult:
        """The render of ``state`` itself (without the change), cached per state version."""
        return await _cached(self._baseline_renders, state.version,
                             lambda: asyncio.to_thread(self.renderer.render, state, subject=None))

    async def _baseline(self, state: State) -> CheckResult:
        """The check of ``state`` itself, shared by concurrent reviews and cached per version."""

        async def check() -> CheckResult:
            return await self.checker.check(await self._baseline_render(state))

        return await _cached(self._baselines, state.version, check)


def _ahead(work: Awaitable[T]) -> asyncio.Task[T]:
    """``work`` started now, to be awaited later or dropped (:func:`_drop`)."""
    return asyncio.ensure_future(work)


def _drop(task: asyncio.Task[T] | None) -> None:
    """A task started ahead whose result is not needed: cancelled (a shared render it waits for goes on,
    cached for whoever needs it next), its outcome retrieved so that a failure is not logged as lost."""
    if task is None:
        return
    task.cancel()
    task.add_done_callback(lambda done: done.cancelled() or done.exception())


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
        # Only the computation's own failure is forgotten: a caller cancelled just as it finished (a reload
        # note dropped when the check failed) must not throw away a result the next caller needs.
        if future.done() and (future.cancelled() or future.exception() is not None) and cache.get(key) is future:
            del cache[key]
        raise
