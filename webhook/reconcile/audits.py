"""Audit: judge every stored object with the admission rules, as if it were created now.

The same ``Checks.run`` the webhook calls on a CREATE, so the findings (codes, field paths, messages)
are the ones admission gives. An object can be stored invalid (the webhook was down, ``failurePolicy:
Ignore``, created before routegate was installed, a Service or Secret changed underneath it); this
says which and why. It touches every object, so it runs in the reconcile loop and ``routegate check
--all``, never on an AdmissionReview.

``AuditCache`` makes the reconcile loop's audit O(change): each object's contribution (whether it is
ours, its findings, which object each is about) is kept with everything its judgement read, and only
the objects whose own content or reads changed since the previous state are judged again
(``validators.views.dependents``: the changed refs come from the state's link to its predecessor, the
readers of each from an inverse index, so no unchanged object is even looked at). Findings about
sets of objects (a hostname two routes claim, a Gateway leaving routes without a listener) are
re-judged for the objects that read the changed key only. The result equals ``audit`` on the same
state, finding for finding (tests/reconcile/test_incremental_audit.py, test_audit_sequences.py).

With a GatewayClass scope (``--gateway-class``/``--controller-name``), other controllers' objects are
neither judged nor given findings: a route whose every parentRef is another controller's Gateway, a
BackendTLSPolicy none of our routes uses (``Scope.out_of_scope``, as admission lets them through).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from validators.changes import Change, Operation
from validators.findings import Finding
from validators.objects import REVIEWED_KINDS, Obj, Ref, ref_of
from validators.states import State
from validators.views.dependents import Dependents
from validators.views.scopes import Scope
from webhook.gate.gates import RuleChecks

Audited = Sequence[tuple[Ref, tuple[Finding, ...]]]


def audit(rules: RuleChecks, state: State, scope: Scope | None = None) -> list[tuple[Ref, tuple[Finding, ...]]]:
    """Every stored object of a reviewed kind that has findings, with them (sorted by Ref).

    Judged as a CREATE (no old object), so no rule skips a field because it did not change. A finding
    about another object than the one judged (a Gateway's review names the routes it leaves without a
    listener: ``Finding.about``) is that object's, once however many reviews report it. ``scope``: only
    our objects (module docstring); ``state`` is seen through it already."""
    return _collect(state, lambda obj: _judge(rules, obj, state), ours_in(scope, state))


def ours_in(scope: Scope | None, state: State) -> Callable[[Obj], bool] | None:
    """Whether an object of (scoped) ``state`` is ours to judge; None: everything is."""
    if scope is None or scope.everything:
        return None
    return lambda obj: not scope.out_of_scope(Change(Operation.CREATE, obj, None, dry_run=True), state)


def _judge(rules: RuleChecks, obj: Obj, state: State) -> Sequence[Finding]:
    # Admission policies that read ``traffic`` judge a stored object by what it serves (audit_run).
    run = getattr(rules, "audit_run", rules.run)
    return run(Change(Operation.CREATE, obj, None, dry_run=True), state).findings


def _collect(state: State, judge: Callable[[Obj], Sequence[Finding]], ours: Callable[[Obj], bool] | None,
             ) -> list[tuple[Ref, tuple[Finding, ...]]]:
    found: dict[Ref, list[Finding]] = {}
    foreign: dict[Ref, bool] = {}

    def not_ours(ref: Ref) -> bool:
        if ours is None:
            return False
        if ref not in foreign:
            obj = state.get(ref.kind, ref.namespace, ref.name)
            foreign[ref] = obj is not None and not ours(obj)
        return foreign[ref]

    for kind in sorted(REVIEWED_KINDS):
        for obj in state.list(kind):
            judged = ref_of(obj)
            if not_ours(judged):
                continue
            for finding in judge(obj):
                owner = parse_ref(finding.about) or judged
                if owner != judged and not_ours(owner):
                    continue
                if finding.about:
                    finding = replace(finding, subject=True, about="")
                known = found.setdefault(owner, [])
                if finding not in known:
                    known.append(finding)
    return [(ref, tuple(items)) for ref, items in sorted(found.items()) if items]


class AuditCache:
    """``audit`` across state versions, judging again only the objects whose inputs changed (module
    docstring). One per rule set and scope; ``audit`` calls are serialized (the reconcile loop runs one
    at a time)."""

    def __init__(self, rules: RuleChecks, scope: Scope | None = None) -> None:
        self.rules = rules
        self.scope = scope
        self._judged: Dependents[_Contribution] = Dependents(self._contribution, sorted(REVIEWED_KINDS))
        self._with_findings: set[Ref] = set()  # the judged objects that contribute a finding
        self._lock = threading.Lock()
        self.judged = 0  # objects judged (not reused) by the last audit
        self.reused = 0

    def audit(self, state: State) -> list[tuple[Ref, tuple[Finding, ...]]]:
        with self._lock:
            touched = self._judged.update(state)
            results = self._judged.results
            for ref in touched:
                if results.get(ref):
                    self._with_findings.add(ref)
                else:
                    self._with_findings.discard(ref)
            self.judged, self.reused = self._judged.computed, self._judged.reused
            found: dict[Ref, list[Finding]] = {}
            for judged in sorted(self._with_findings, key=_judging_order):
                for owner, finding in results[judged] or ():
                    known = found.setdefault(owner, [])
                    if finding not in known:
                        known.append(finding)
            return [(ref, tuple(items)) for ref, items in sorted(found.items()) if items]

    def _contribution(self, obj: Obj, state: State) -> _Contribution:
        """What judging ``obj`` adds to the audit, as ``_collect`` adds it: None when it is not ours."""
        ours = ours_in(self.scope, state)
        if ours is not None and not ours(obj):
            return None
        judged = ref_of(obj)
        out: list[tuple[Ref, Finding]] = []
        for finding in _judge(self.rules, obj, state):
            owner = parse_ref(finding.about) or judged
            if owner != judged and ours is not None:
                other = state.get(owner.kind, owner.namespace, owner.name)
                if other is not None and not ours(other):
                    continue
            if finding.about:
                finding = replace(finding, subject=True, about="")
            out.append((owner, finding))
        return tuple(out)


# what one judged object adds to the audit: (owner, finding) in the order found; None: not ours
_Contribution = tuple[tuple[Ref, Finding], ...] | None
_KIND_ORDER = {kind: i for i, kind in enumerate(sorted(REVIEWED_KINDS))}


def _judging_order(ref: Ref) -> tuple[int, str, str]:
    """The order ``_collect`` judges in: by kind, then as ``State.list`` sorts (namespace, name)."""
    return _KIND_ORDER[ref.kind], ref.namespace, ref.name


def parse_ref(about: str) -> Ref | None:
    """``"HTTPRoute ns/name"`` (``str(Ref)``) back to a Ref; None for ""."""
    kind, _, rest = about.partition(" ")
    if not kind or not rest:
        return None
    namespace, _, name = rest.rpartition("/")
    return Ref(kind, namespace, name)
