"""The Gate: one coroutine that judges a change, shared by the webhook, the CLI and reconcile loops.

It knows no HTTP. Steps, in one direction only:
  validators (schema, CEL, HAProxy rules, cross-object)  ->  overlay the change on the state
  ->  render (off the event loop)  ->  sandboxed ``haproxy -c``  ->  baseline rule  ->  Verdict.

Baseline rule (HAPTIC's): when the proposed configuration fails, render and check the state without
the change. If that fails with the same alerts, other objects broke it already: admit with a warning,
since denying would block an unrelated fix. Otherwise the change broke it: deny. Baselines are cached
per state version so a burst of reviews checks the baseline once. When the baseline's failure can hide the
change's own, ``isolationrounds`` checks the change apart from the objects the baseline blames.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.descriptions import Description
from haproxy_check.render import gcpause
from haproxy_check.results import Alert, CheckResult, HAProxyBinary, RenderError, RenderResult
from haproxy_check.runtime import predictions, slots
from haproxy_check.runtime.predictions import Prediction
from haproxy_check.traffic import diffs
from haproxy_check.traffic.diffs import TrafficDiff
from validators import checks, dataplanes
from validators.changes import Change, Operation
from validators.crossobject import statuses
from validators.enforcement import Enforcement
from validators.findings import Finding, Severity, denies, format_path
from validators.objects import REVIEWED_KINDS, Ref
from validators.states import Overlay, State, Without
from validators.views import attachments, closures, scopes
from webhook.gate import batching, batchkinds, bisection, isolationrounds, ruleworkers, trafficdiffs
from webhook.gate.alertkeys import alert_key as _alert_key
from webhook.gate.loadedindex import LoadedIndex
from webhook.gate.verdicts import Decision, Verdict

HAPROXY_REJECTED = "RG0800"
NOT_ATTACHED = "RG0401"
RENDER_REFUSED = "RG0801"
BASELINE_CACHE = 8
NAMED_SUSPECT_ROUNDS = 4  # checks of a failing batch without the routes its alerts name, each naming more
T = TypeVar("T")


class RuleChecks(Protocol):
    enforcement: Enforcement

    def run(self, change: Change, state: State) -> checks.Result: ...


class Renders(Protocol):
    def render(self, state: State, *, subject: Ref | None = None,
               previous: Description | None = None) -> RenderResult: ...


class Checks(Protocol):
    binary: HAProxyBinary

    async def check(self, render: RenderResult) -> CheckResult: ...


def _binds_nothing(result: CheckResult) -> bool:
    """haproxy -c found no error but no listener either (exit code 2 without an alert): valid, but with no
    frontend nothing loaded the maps, so the change's map entries were not judged."""
    return result.decided and result.exit_code == 2 and not result.alerts


def _already_failing(first: Alert, ref: Ref) -> str:
    """The note on a change admitted because the configuration failed before it, the same way."""
    owner = str(first.origin.ref) if first.origin else "other objects"
    where = format_path(first.origin.path) if first.origin else ""
    # The culprit comes first: the apiserver caps a warning at 256 characters. HAProxy's message
    # quotes the culprit's values (another tenant's hosts, paths, regexes): only the culprit's
    # own review shows them; this one gets the object and field.
    detail = (f": {first.message}" if first.origin and first.origin.ref == ref
              else f" ({where})" if where else "")
    return (f"the HAProxy configuration already fails haproxy -c because of {owner}{detail}; "
            "this change does not alter that")


def _unchecked(ref: Ref) -> Verdict:
    """The verdict on an object of a kind routegate does not review."""
    return Verdict(Decision.ALLOW, ref, handled=False,
                   notes=(f"routegate does not check {ref.kind or 'this kind'}; allowed unchecked",))


def _renderable(change: Change) -> bool:
    """A change the combined render may cover: reviewed and not a delete."""
    return change.ref.kind in REVIEWED_KINDS and change.operation is not Operation.DELETE


def _batchable(change: Change, combined: State) -> bool:
    """A change the combined render covers: reviewed, not a delete, and (routes) attached somewhere."""
    return _renderable(change) and ruleworkers.attached(change, combined)


def _together(change: Change, combined: State) -> bool:
    """A change a group of concurrent reviews may settle (``Gate.review_together``): what
    :func:`_batchable` takes, and the DELETE of a route whose stored version is attached somewhere (its
    lone closure renders that listener, so it binds something, as the combined render does)."""
    if change.operation is Operation.DELETE:
        return ((change.ref.kind in attachments.ROUTE_KINDS and ruleworkers.attached(change, combined))
                or batchkinds.batchable(change))
    return _batchable(change, combined)


def _claim_ahead(change: Change, validated: checks.Result, view: State) -> batching.Claim | None:
    """The batching claim of a change that passed its rules, the change as ``Gate._after_rules`` hands it
    on (schema defaults applied), worked out in the review worker beside the rules (``ruleworkers.rules_of``);
    None for a denied change or one whose claim the gate works out itself."""
    if change.operation is not Operation.DELETE:
        if denies(validated.findings):
            return None
        if validated.defaulted is not None:
            change = replace(change, obj=validated.defaulted)
    try:
        return batchkinds.claim_of(change, view)
    except Exception:  # judged again here, where a failure is reported as the review's own
        return None


# A review's closure and the render of the change on it, or why the render was refused.
_Rendered = tuple[State, RenderResult] | RenderError


@dataclass(frozen=True, slots=True)
class _Validated:
    """A change of a concurrent batch that passed the rules, waiting for its render and check."""

    index: int
    change: Change  # with the schema defaults applied
    findings: list[Finding]
    timings: dict[str, float]
    started: float


class Gate:
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
        return self._stamped(await self._review(change, state=state, reload_note=reload_note))

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
            return _unchecked(ref)
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
            verdict = Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=_noted(prediction),
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

    def _batch_traffic_judged(self, items: Sequence[tuple[Change, State]], batch: list[int], combined: State,
                              verdicts: list[Verdict | None]) -> None:
        for i in batch:
            if (verdict := verdicts[i]) is not None:
                verdicts[i] = self._traffic_judged_now(items[i][0], combined, verdict)

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

    async def review_all(self, items: Sequence[tuple[Change, State]], *, combined: State,
                         workers: int = 0, with_status: bool = True, before: State | None = None) -> list[Verdict]:
        """Judge changes applied together (``kubectl apply -f DIR``): each against its state holding all
        the others, ``combined`` holding all of them.

        When the combined configuration passes ``haproxy -c``, one render and one check serve every
        change (a CI dry run of 1000 routes costs one render, not 1000). When it fails, the batch is
        bisected (:meth:`_settle_failing_batch`): a few combined checks find the changes that fail on
        their own, only those are judged one by one, and the others get the verdict a one-by-one
        review gives them (allowed, with the note naming the culprit). Routes attached to no listener
        (rendered behind a synthetic listener only as a subject), deletes, and whatever the bisection
        cannot settle are judged one by one as the webhook would. Batch verdicts carry no reload note:
        that is advice about one change to a running data plane.
        ``workers``: processes that run the batch's per-object rules while this one renders and checks
        (``webhook.gate.ruleworkers``; 0: all in this process). ``with_status``: False leaves the batch verdicts'
        ``status`` empty, for a caller that does not report it (computing it is a few % of the batch).
        ``before``: the state without any of the changes; given, the batch verdicts carry the traffic diff
        of the batch (the render of ``before`` against the combined one), each the moves naming it.
        """
        verdicts: list[Verdict | None] = [None] * len(items)
        combined = self.scope.view(combined)
        # The batch's values are acyclic records (verdicts, findings, the render's lines) that live until
        # the batch is judged: a collection meanwhile would rescan the whole render for nothing (about two
        # seconds of a 10,000-route check). What the pause kept leaves the young generations unscanned
        # when it ends (``gcpause``).
        with gcpause.paused():
            for i, (change, state) in enumerate(items):
                if change.ref.kind in REVIEWED_KINDS:
                    verdicts[i] = self._foreign(change, self.scope.view(state))
                else:  # what review() says, without a trip through it for each of thousands of Services
                    verdicts[i] = _unchecked(change.ref)
            await self._judge_batch(items, combined, workers, verdicts, with_status, before)
        for i, (change, state) in enumerate(items):
            if verdicts[i] is None:
                verdicts[i] = await self.review(change, state=state, reload_note=False)
        with gcpause.paused():
            info = self.dataplane_info()
            return [self._stamped(v, info) for v in verdicts if v is not None]

    async def _judge_batch(self, items: Sequence[tuple[Change, State]], combined: State, workers: int,
                           verdicts: list[Verdict | None], with_status: bool, before: State | None = None) -> None:
        """Fill in ``verdicts`` for the inputs one combined render and check can judge (``review_all``)."""
        candidates = [i for i, (change, _) in enumerate(items) if verdicts[i] is None and _renderable(change)]
        with self._prejudging(items, candidates, combined, workers, with_status) as pending:
            checked = await self._checked(combined) if candidates else None
            prejudged = await pending.results() if pending is not None else {}
        if checked is None:
            return
        # Whether a route attaches anywhere was asked by the workers along with its rules.
        batch = [i for i in candidates
                 if (prejudged[i].attached if i in prejudged else _batchable(items[i][0], combined))]
        render, result, seconds = checked
        grouped = _render_findings(render)
        if result.ok:
            for i in batch:
                verdicts[i] = await self._batch_verdict(items[i], render, combined, seconds, prejudged.get(i),
                                                        grouped, with_status)
            if self.traffic and before is not None and batch:
                await self._batch_traffic([items[i][0].ref for i in batch], batch, before, render, verdicts)
                if self.traffic_judges:  # one trip off the event loop for the whole batch
                    await asyncio.to_thread(self._batch_traffic_judged, items, batch, combined, verdicts)
            return
        settled = await self._settle_failing_batch(
            items, batch, combined, render, result,
            verdict_of=lambda i: self._batch_verdict(items[i], render, combined, 0.0, prejudged.get(i), grouped,
                                                     with_status))
        for i, verdict in settled.items():
            verdicts[i] = verdict

    async def _batch_traffic(self, refs: list[Ref], batch: list[int], before: State, render: RenderResult,
                             verdicts: list[Verdict | None]) -> None:
        """The batch's traffic diff split among its verdicts (``trafficdiffs.attributed``); its budget
        grows with the batch, whose tables hold every input."""
        budget = self.traffic_budget * max(1.0, len(batch) / 100)
        try:
            base = await asyncio.to_thread(self.renderer.render, self.scope.view(before), subject=None)
        except RenderError as exc:
            diff = diffs.timed_out(f"the state without the inputs could not be rendered: {exc.message}")
        else:
            diff = await asyncio.to_thread(trafficdiffs.compute, base, render, budget=budget, clock=self._clock)
        split = trafficdiffs.attributed(diff, refs)
        for i, ref in zip(batch, refs, strict=True):
            verdict = verdicts[i]
            if verdict is not None:
                verdicts[i] = trafficdiffs.judged(verdict, split[ref], render)

    async def review_together(self, changes: Sequence[Change], *, state: State,
                              notes_for: float | None = None) -> list[Verdict]:
        """Concurrent reviews against one stored ``state`` (the webhook under a burst): each verdict is
        the one ``review(change, state=state)`` gives, with the work shared.

        Every change passes the rules on its own (a denial there needs no render). The route changes
        left are split into groups of independent changes (``webhook.gate.batching``); each group is one
        render of the union of its closures with all its changes applied and one ``haproxy -c``. When
        that passes, each change is allowed with its own findings, status and reload note. When it
        fails, the batch bisection of :meth:`review_all` isolates the changes that fail on their own;
        those, whatever it cannot settle, and every other change are judged one by one.
        ``notes_for``: seconds from now the reload notes may use (each needs two renders of the change's
        own closure); after that a batched allow says the note was skipped instead (None: no limit).
        """
        if not self.delta or len(changes) < 2:
            # The whole state is rendered per review (user templates): nothing bounds what changes share.
            return [await self.review(change, state=state) for change in changes]
        notes_until = None if notes_for is None else self._clock() + notes_for
        view = self.scope.view(state)
        verdicts: list[Verdict | None] = [None] * len(changes)
        pending: list[_Validated] = []
        ruled: list[int] = []
        for i, change in enumerate(changes):
            if change.ref.kind not in REVIEWED_KINDS or not (batching.batchable(change)
                                                             or batchkinds.batchable(change)):
                continue
            foreign = self._foreign(change, view)
            if foreign is not None:
                verdicts[i] = foreign
                continue
            ruled.append(i)
        started = self._clock()
        # every change's rules, in a forked worker when there are enough (``ruleworkers.rules_of``)
        results = await ruleworkers.rules_of(self.rules, [changes[i] for i in ruled], view,
                                             workers=self.review_workers, then=_claim_ahead)
        ahead: dict[int, batching.Claim] = {}  # the claims the worker worked out beside the rules
        for i, (validated, claim) in zip(ruled, results, strict=True):
            change = changes[i]
            timings: dict[str, float] = {"validate": self._clock() - started}
            denied, judged, findings = self._after_rules(change, validated, timings)
            if denied is not None:
                verdicts[i] = denied
            else:
                pending.append(_Validated(i, judged, findings, timings, started))
                if isinstance(claim, batching.Claim):
                    ahead[i] = claim
        claims = await asyncio.to_thread(
            lambda: [ahead[p.index] if p.index in ahead else batchkinds.claim_of(p.change, view) for p in pending])
        for group in batchkinds.groups(claims):
            members = [pending[k] for k in group]
            settled = await self._check_together(members, [claims[k] for k in group], view, notes_until) \
                if len(members) > 1 else {}
            for j, p in enumerate(members):
                verdicts[p.index] = settled[j] if j in settled else await self._review_validated(
                    p.change, view, p.findings, p.timings, p.started, reload_note=True,
                    scope=closures.Closure(view, claims[group[j]].members))
        for i, change in enumerate(changes):
            if verdicts[i] is None:
                verdicts[i] = await self.review(change, state=state)
        return [v for v in verdicts if v is not None]

    async def _check_together(self, members: list[_Validated], claims: list[batching.Claim], view: State,
                              notes_until: float | None) -> dict[int, Verdict]:
        """Verdicts of a group of independent validated changes from one combined check, by position;
        the changes it cannot settle are left out."""
        union = closures.Closure(view, frozenset().union(*(c.members for c in claims)))
        combined = batching.Changed(union, [p.change for p in members])
        items = [(p.change, view) for p in members]
        batch = [j for j, p in enumerate(members) if _together(p.change, combined)]
        if len(batch) < 2:
            return {}
        checked = await self._checked(combined)
        if checked is None or not checked[1].decided:
            return {}
        if not checked[1].ok and any(members[j].change.operation is Operation.DELETE
                                     or members[j].change.ref.kind in batchkinds.KINDS for j in batch):
            # The bisection hides routes to find the culprits; a DELETE's lone configuration is the one
            # without it already, so a failing group with deletes is judged one by one (grants and
            # policies too: hiding routes never hides them).
            return {}
        render, result, seconds = checked
        others = len(batch) - 1
        # The group's traffic diff: the united closures without the changes against the combined render,
        # one diff split by change (independent changes: no common competitor host or port).
        split: dict[Ref, TrafficDiff] = {}
        if self.traffic and result.ok:
            diff = await self._traffic(union, render, {"render": seconds})
            split = batchkinds.attributed(diff, [claims[j] for j in batch])

        async def verdict_of(j: int) -> Verdict:
            verdict = await self._together_verdict(members[j], closures.Closure(view, claims[j].members), render,
                                                   combined, seconds, notes_until, others,
                                                   split.get(members[j].change.ref))
            return verdict

        if result.ok:
            return {j: await verdict_of(j) for j in batch}
        return await self._settle_failing_batch(items, batch, combined, render, result, verdict_of=verdict_of)

    async def _together_verdict(self, item: _Validated, scope: State, render: RenderResult,
                                combined: State, seconds: float, notes_until: float | None,
                                others: int, traffic: TrafficDiff | None = None) -> Verdict:
        """The verdict of one change whose configuration passed as part of a combined check: what
        :meth:`review` gives after a clean ``haproxy -c``. ``scope``: the change's own closure."""
        change, ref = item.change, item.change.ref
        timings = {**item.timings, "render+check (shared by the batch)": seconds}
        # The combined render has no subject: a denial it marks as about another object is the subject's.
        own = [replace(f, subject=True) if f.severity is Severity.DENY else f
               for f in render.findings if f.about == str(ref)]
        # one finding per fact, as review() keeps them (a Gateway's placeholder-certificate note gives way
        # to the rules' missing certificate on the same field)
        findings = checks.without_shadowed([*item.findings,
                                            *self.rules.enforcement.apply(own, namespace=ref.namespace)])
        if denies(findings):
            return Verdict(Decision.DENY, ref, findings=tuple(findings), haproxy=self.binary, timings=timings)
        # A deleted route is not rendered and a custom Route has no status: a lone review's render gives
        # them none, nor does this one (a render without a subject computes no status).
        status = (statuses.route_status(change.subject, combined)
                  if change.operation is not Operation.DELETE and ref.kind in attachments.ROUTE_KINDS
                  else batchkinds.lone_status(change, scope, batchkinds.http_ports_of(self.renderer))
                  if ref.kind in batchkinds.KINDS
                  else render.statuses.get(str(ref), {}))
        prediction: Prediction | None = None
        if notes_until is not None and self._clock() > notes_until:
            prediction = Prediction.skipped(f"checked together with {others} other concurrent "
                                            f"review{'s' if others != 1 else ''}")
        else:
            mark = self._clock()
            try:
                own_render = await asyncio.to_thread(self.renderer.render, Overlay(scope, change), subject=ref)
                prediction = await self._apply_note(scope, own_render, render_seconds=self._clock() - mark)
            except RenderError:
                prediction = None
        timings["total"] = self._clock() - item.started
        verdict = Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=_noted(prediction),
                          haproxy=self.binary, timings=timings, status=status, prediction=prediction)
        verdict = await self._traffic_judged(change, combined, trafficdiffs.judged(verdict, traffic, render))
        if verdict.allowed:
            for passed in self.passed_observers:
                passed(change, verdict)
        return verdict

    async def _checked(self, state: State) -> tuple[RenderResult, CheckResult, float] | None:
        """Render and ``haproxy -c`` of ``state`` (no subject) and the time both took; None when the
        render is refused or the check timed out (no judgement to build on)."""
        mark = self._clock()
        try:
            render = await asyncio.to_thread(self.renderer.render, state, subject=None)
            result = await self.checker.check(render)
        except (RenderError, CheckTimedOut):
            return None
        return render, result, self._clock() - mark

    async def _settle_failing_batch(self, items: Sequence[tuple[Change, State]], batch: list[int],
                                    combined: State, render: RenderResult, failed: CheckResult, *,
                                    verdict_of: Callable[[int], Awaitable[Verdict]] | None = None,
                                    ) -> dict[int, Verdict]:
        """Verdicts for the changes of a failing batch that do not cause the failure; the rest are left
        to one-by-one review.

        Bisection: a group of routes is checked on top of everything but the batch's other routes, in
        one render; a group that passes is innocent, a failing one is split, and a single route that
        fails on its own is a suspect. The innocents' one-by-one verdict is known when everything but
        the suspects passes: the combined configuration fails, the state without any one innocent
        fails the same way, and with the culprits hidden it passes, so each is allowed with the note
        naming the failing line's owner. Anything less clear (the state outside the batch fails
        already, changes that fail only together, a failure no object owns, suspects the alerts do
        not all name) settles nothing, and every change is judged one by one as before.
        ``verdict_of(i)``: the verdict of an innocent whose configuration passed (default: the batch
        verdict from the combined render).
        """
        if not failed.alerts or any(a.origin is None for a in failed.alerts):
            return {}
        # Only routes are bisected: a route needs its Gateway to be rendered at all, and a Gateway's
        # one-by-one verdict depends on the routes attached to it, so the rest is always present.
        refs = {i: items[i][0].ref for i in batch if items[i][0].ref.kind in attachments.ROUTE_KINDS}
        outside = await self._checked(Without(combined, frozenset(refs.values())))
        if outside is None or not outside[1].ok:
            return {}
        # The alerts' source map names the suspects first: bisecting only among them costs a few checks
        # of small groups, where bisecting the whole batch cost 2 log2(N) renders of about all of it.
        found = await self._named_suspects(refs, combined, failed)
        suspects, rest_passes = found if found is not None else (
            await self._failing_alone(list(refs), refs, combined, fails=True), False)
        if not suspects:
            return {}
        innocent = [i for i in refs if i not in suspects]
        if not rest_passes:
            rest = await self._checked(Without(combined, frozenset(refs[i] for i in suspects)))
            if rest is None or not rest[1].ok:
                return {}
        # One by one, a review hides the objects the alerts name and checks again; HAProxy names one
        # culprit per map file or section, so unless the alerts name every suspect that check still
        # fails, and the review's verdict is not the one argued here: leave it to the review. A delta
        # review whose closure holds no culprit never meets the failure, so it is settled either way.
        named = {a.origin.ref for a in failed.alerts if a.origin is not None}
        if not named >= {refs[i] for i in suspects} and not self.delta:
            return {}
        first = failed.alerts[0]
        culprits = {refs[i] for i in suspects}
        settled: dict[int, Verdict] = {}
        for i in innocent:
            change, state = items[i]
            sees_culprit = True
            if self.delta:
                # A delta review checks the change's closure only: it meets the failure (and gives the note)
                # only when a culprit is a member; when one is, leave the exact wording to that review.
                members = await asyncio.to_thread(closures.members, self.scope.view(state), change)
                if culprits & members:
                    continue
                sees_culprit = False
            verdict = await (verdict_of(i) if verdict_of is not None
                             else self._batch_verdict(items[i], render, combined, 0.0))
            # A denied change is denied before any render, exactly as in review().
            if verdict.allowed:
                notes = (*verdict.notes, _already_failing(first, change.ref)) if sees_culprit else verdict.notes
                verdict = replace(verdict, notes=notes, timings={})
            settled[i] = verdict
        return settled

    async def _named_suspects(self, refs: dict[int, Ref], combined: State,
                              failed: CheckResult) -> tuple[list[int], bool] | None:
        """The batch routes failing ``haproxy -c`` on their own, found among those the alerts name, and
        whether everything but them is known to pass; None when the alerts do not lead there (the
        caller bisects the whole batch). HAProxy names one culprit per map file or section, so the
        batch without the named ones is checked again and the routes its alerts name are added, a few
        rounds at most; once that passes, no other route fails on its own (a passing group holds no
        culprit, as the bisection takes it) and only the named ones are bisected."""
        index = {ref: i for i, ref in refs.items()}
        named: list[int] = []
        alerts = failed.alerts
        for _ in range(NAMED_SUSPECT_ROUNDS):
            new = sorted({index[a.origin.ref] for a in alerts if a.origin is not None and a.origin.ref in index}
                         - set(named))
            if not new:
                return None
            named += new
            checked = await self._checked(Without(combined, frozenset(refs[i] for i in named)))
            if checked is None:
                return None
            if checked[1].ok:
                suspects = await self._failing_alone(named, refs, combined)
                return None if suspects is None else (suspects, set(suspects) == set(named))
            alerts = checked[1].alerts
            if not alerts or any(a.origin is None for a in alerts):
                return None
        return None

    async def _failing_alone(self, group: list[int], refs: dict[int, Ref], combined: State, *,
                             fails: bool = False) -> list[int] | None:
        """The changes of ``group`` that fail ``haproxy -c`` on their own on top of everything outside
        the batch (the other changes hidden); None when that cannot be told apart: a render refused, a
        check timed out, or a group that fails while both its halves pass (changes failing together).
        ``fails``: the group is known to fail already (the whole batch), so it is not checked again."""

        async def passes_with(members: Sequence[int]) -> bool | None:
            present = set(members)
            hidden = frozenset(ref for i, ref in refs.items() if i not in present)
            checked = await self._checked(Without(combined, hidden))
            return None if checked is None else checked[1].ok

        return await bisection.failing_alone(group, passes_with, fails=fails)

    @contextlib.contextmanager
    def _prejudging(self, items: Sequence[tuple[Change, State]], batch: list[int], combined: State,
                    workers: int, with_status: bool) -> Iterator[ruleworkers.RuleWorkers | None]:
        """The batch's per-object rules started in forked workers (None: too few, or no workers)."""
        if not ruleworkers.RuleWorkers.usable(len(batch), workers):
            yield None
            return
        # Compiled schemas and the combined state's indexes are built once here, before the fork, so
        # that each worker inherits them instead of building its own: on a route, the common kind (a
        # Gateway's rules would walk every route attached to it, here, while nothing else runs).
        first = next((i for i in batch if items[i][0].ref.kind in attachments.ROUTE_KINDS), batch[0])
        warm = ruleworkers.prejudge_one(self.rules, self.scope, *items[first], combined, with_status=with_status)
        with ruleworkers.RuleWorkers(self.rules, self.scope, items, combined, [i for i in batch if i != first],
                                     workers=workers, done={first: warm}, with_status=with_status) as pending:
            pending.start()
            yield pending

    async def _batch_verdict(self, item: tuple[Change, State], render: RenderResult, combined: State,
                             seconds: float, prejudged: ruleworkers.Prejudged | None = None,
                             grouped: dict[str, list[Finding]] | None = None, with_status: bool = True) -> Verdict:
        """``grouped``: ``_render_findings(render)``, when the caller judges many inputs by one render."""
        change, state = item
        ref = change.ref
        if prejudged is None:
            prejudged = await asyncio.to_thread(ruleworkers.prejudge_one, self.rules, self.scope, change, state,
                                                combined, with_status=with_status)
        validated = prejudged.validated
        findings = list(validated.findings)
        if not denies(findings):  # as in review(): a denied object is not judged by its render
            about = grouped if grouped is not None else _render_findings(render)
            findings += self.rules.enforcement.apply(list(about.get(str(ref), ())),
                                                     namespace=ref.namespace)
            findings = checks.without_shadowed(findings)
        status = prejudged.status or {}
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
            note = _already_failing(result.alerts[0], ref)
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


def _noted(prediction: Prediction | None) -> tuple[str, ...]:
    """The prediction as the note admission shows (none when nothing changes)."""
    note = prediction.note() if prediction is not None else ""
    return (note,) if note else ()


def _render_findings(render: RenderResult) -> dict[str, list[Finding]]:
    """A render's findings by the object they are about, grouped once for a batch: each of N inputs
    filtering the whole list costs N x findings (N^2 with a warning per route)."""
    grouped: dict[str, list[Finding]] = {}
    for f in render.findings:
        grouped.setdefault(f.about, []).append(f)
    return grouped


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
