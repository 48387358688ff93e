"""Audit: judge every stored object with the admission rules, as if it were created now.

The same ``Checks.run`` the webhook calls on a CREATE, so the findings (codes, field paths, messages)
are the ones admission gives. An object can be stored invalid (the webhook was down, ``failurePolicy:
Ignore``, created before routegate was installed, a Service or Secret changed underneath it); this
says which and why. It touches every object, so it runs in the reconcile loop and ``routegate check
--all``, never on an AdmissionReview.

``AuditCache`` makes the reconcile loop's audit incremental: each object's findings are kept with the
object as judged and everything its judgement read (``validators.views.reads``: gets, listings, index keys),
and reused while the object is the same and every read still reads the same, as the renderer's route
cache does. Only objects whose content or dependencies changed since the previous state are judged
again; the result equals ``audit`` on the same state (tests/reconcile/test_incremental_audit.py).

With a GatewayClass scope (``--gateway-class``/``--controller-name``), other controllers' objects are
neither judged nor given findings: a route whose every parentRef is another controller's Gateway, a
BackendTLSPolicy none of our routes uses (``Scope.out_of_scope``, as admission lets them through).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from validators.changes import Change, Operation
from validators.findings import Finding
from validators.objects import REVIEWED_KINDS, Obj, Ref, ref_of
from validators.states import State
from validators.views.reads import FrozenReads, Recording
from validators.views.scopes import Scope
from webhook.gates import RuleChecks

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
    """``audit`` across state versions, judging again only what changed (module docstring). One per
    rule set and scope; ``audit`` calls are serialized (the reconcile loop runs one at a time)."""

    def __init__(self, rules: RuleChecks, scope: Scope | None = None) -> None:
        self.rules = rules
        self.scope = scope
        self._entries: dict[Ref, tuple[Obj, FrozenReads, tuple[Finding, ...]]] = {}
        self._lock = threading.Lock()
        self.judged = 0  # objects judged (not reused) by the last audit
        self.reused = 0

    def audit(self, state: State) -> list[tuple[Ref, tuple[Finding, ...]]]:
        with self._lock:
            indexed: dict[str, Any] = {}  # the state's indexes, looked up once for every entry's check
            seen: set[Ref] = set()
            self.judged = self.reused = 0

            def judge(obj: Obj) -> Sequence[Finding]:
                ref = ref_of(obj)
                seen.add(ref)
                entry = self._entries.get(ref)
                if entry is not None and (entry[0] is obj or entry[0] == obj) and entry[1].hold(state, indexed):
                    self.reused += 1
                    return entry[2]
                recording = Recording(state)
                findings = tuple(_judge(self.rules, obj, recording))
                self._entries[ref] = (obj, recording.reads.frozen(), findings)
                self.judged += 1
                return findings

            out = _collect(state, judge, ours_in(self.scope, state))
            for gone in self._entries.keys() - seen:  # deleted objects: nothing to keep
                del self._entries[gone]
            return out


def parse_ref(about: str) -> Ref | None:
    """``"HTTPRoute ns/name"`` (``str(Ref)``) back to a Ref; None for ""."""
    kind, _, rest = about.partition(" ")
    if not kind or not rest:
        return None
    namespace, _, name = rest.rpartition("/")
    return Ref(kind, namespace, name)
