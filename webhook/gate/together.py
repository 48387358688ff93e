"""Reviews judged together: many changes settled by one render and one ``haproxy -c``.

Two callers: ``review_all`` judges changes applied together (a CI dry run of a directory: each change
against the state holding all the others), ``review_together`` judges concurrent reviews of one stored
state (the webhook under a burst, groups of independent changes from ``webhook.gate.batching`` and
``batchkinds``). When the combined check fails, the batch is bisected (``bisection``) to find the changes
that fail on their own; those and whatever the bisection cannot settle go to the single review. Every
verdict is the one the single review (``gates.Gate.review``) gives; ``Gate`` inherits these methods, and
:class:`SingleReview` names what of the single review they use, so this module does not import ``gates``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.render import gcpause, laterstatuses
from haproxy_check.results import CheckResult, HAProxyBinary, RenderError, RenderResult
from haproxy_check.runtime.predictions import Prediction
from haproxy_check.traffic import diffs
from haproxy_check.traffic.diffs import TrafficDiff
from validators import checks
from validators.changes import Change, Operation
from validators.crossobject import statuses
from validators.findings import Finding, Severity, denies
from validators.objects import REVIEWED_KINDS, Ref
from validators.states import Overlay, State, Without
from validators.views import attachments, closures, scopes
from webhook.gate import batching, batchkinds, bisection, ruleworkers, trafficdiffs
from webhook.gate.gateparts import Checks, Renders, RuleChecks, already_failing, noted, unchecked
from webhook.gate.verdicts import Decision, Verdict

NAMED_SUSPECT_ROUNDS = 4  # checks of a failing batch without the routes its alerts name, each naming more


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



@dataclass(frozen=True, slots=True)
class _Validated:
    """A change of a concurrent batch that passed the rules, waiting for its render and check."""

    index: int
    change: Change  # with the schema defaults applied
    findings: list[Finding]
    timings: dict[str, float]
    started: float



class SingleReview(Protocol):
    """What reviews judged together use of the Gate's single review (``gates.Gate`` provides it)."""

    rules: RuleChecks
    scope: scopes.Scope
    renderer: Renders
    checker: Checks
    delta: bool
    traffic: bool
    traffic_budget: float
    passed_observers: list[Callable[[Change, Verdict], None]]
    traffic_judges: list[Callable[[Change, State, Verdict], Verdict]]
    review_workers: int
    _clock: Callable[[], float]

    @property
    def binary(self) -> HAProxyBinary: ...

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict: ...

    def _stamped(self, verdict: Verdict, info: dict[str, str | bool] | None = None) -> Verdict: ...

    def dataplane_info(self) -> dict[str, str | bool]: ...

    def _foreign(self, change: Change, state: State) -> Verdict | None: ...

    def _after_rules(self, change: Change, validated: checks.Result, timings: dict[str, float],
                     ) -> tuple[Verdict | None, Change, list[Finding]]: ...

    async def _review_validated(self, change: Change, state: State, findings: list[Finding],
                                timings: dict[str, float], started: float, *, reload_note: bool,
                                scope: State | None = None) -> Verdict: ...

    async def _traffic_judged(self, change: Change, state: State, verdict: Verdict) -> Verdict: ...

    def _traffic_judged_now(self, change: Change, state: State, verdict: Verdict) -> Verdict: ...

    async def _traffic(self, state: State, render: RenderResult, timings: dict[str, float]) -> TrafficDiff: ...

    async def _apply_note(self, state: State, render: RenderResult, *, render_seconds: float,
                          ) -> Prediction | None: ...


class ReviewsTogether(SingleReview):
    """The Gate's reviews judged together (``Gate.review_all``, ``Gate.review_together``)."""

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
                    verdicts[i] = unchecked(change.ref)
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

    def _batch_traffic_judged(self, items: Sequence[tuple[Change, State]], batch: list[int], combined: State,
                              verdicts: list[Verdict | None]) -> None:
        for i in batch:
            if (verdict := verdicts[i]) is not None:
                verdicts[i] = self._traffic_judged_now(items[i][0], combined, verdict)

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
        # A route's is worked out when first read, as a lone review's (``laterstatuses``): the admission
        # answer does not read it, and in a burst it was a tenth of the event loop's work per batch.
        subject = change.subject
        status = (laterstatuses.later(lambda: statuses.route_status(subject, combined))
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
        verdict = Verdict(Decision.ALLOW, ref, findings=tuple(findings), notes=noted(prediction),
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
                notes = (*verdict.notes, already_failing(first, change.ref)) if sees_culprit else verdict.notes
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


def _render_findings(render: RenderResult) -> dict[str, list[Finding]]:
    """A render's findings by the object they are about, grouped once for a batch: each of N inputs
    filtering the whole list costs N x findings (N^2 with a warning per route)."""
    grouped: dict[str, list[Finding]] = {}
    for f in render.findings:
        grouped.setdefault(f.about, []).append(f)
    return grouped
