"""The rules of a change plus its admission policies: ``Checks`` with ValidatingAdmissionPolicies and
routegate's own policies judged after the rules, on the object the API server would store.

One wrapper serves every surface, because each of them calls ``rules.run``: the webhook's reviews,
``check`` (in-process and in its forked rule workers) and the reconcile audit. Policies that read
``traffic`` are judged where a traffic value exists: by the Gate once the change's diff is known
(:meth:`PolicyChecks.traffic_findings`), by the audit with what a stored object serves
(:meth:`PolicyChecks.audit_run`). Everything here is pure: the policies, the params and the state are
values the caller read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from validators import budgets, codes, cputime
from validators.changes import Change, Operation
from validators.checks import Checks, Result
from validators.findings import Finding, Severity, ordered
from validators.objects import REVIEWED_KINDS, Obj, dig
from validators.policies import ownpolicies, policycodes, vaps
from validators.policies.ownpolicies import OwnPolicy
from validators.states import State


def namespace_object(state: State, name: str) -> Obj:
    """The namespace as the API server gives it to policies (the label it always sets included); one
    missing from the state (a dry run of files alone) is known by its name."""
    found = state.get("Namespace", "", name)
    labels = dict(dig(found, "metadata", "labels") or {}) if found is not None else {}
    labels.setdefault("kubernetes.io/metadata.name", name)
    base: dict[str, Any] = dict(found) if found is not None else {"apiVersion": "v1", "kind": "Namespace"}
    meta = base.get("metadata")
    return {**base, "metadata": {**(dict(meta) if isinstance(meta, Mapping) else {}), "name": name, "labels": labels}}


class PolicyChecks:
    """``inner`` (a :class:`~validators.checks.Checks`) with admission policies; every other attribute is
    the inner one's (enforcement, schemas, ...)."""

    def __init__(self, inner: Checks, *, vap: vaps.PolicySet | None = None, own: Sequence[OwnPolicy] = ()) -> None:
        self.inner = inner
        self.vap = vap if vap else None
        self.own = tuple(p for p in own if not p.needs_traffic)
        self.own_traffic = tuple(p for p in own if p.needs_traffic)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being built): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def check(self, change: Change, state: State) -> list[Finding]:
        return self.run(change, state).findings

    def run(self, change: Change, state: State) -> Result:
        started = cputime.now()
        result = self.inner.run(change, state)
        found = self._guarded(lambda: self._policies(change, state, result.defaulted, served=False), started)
        return _merged(result, found)

    def audit_run(self, change: Change, state: State) -> Result:
        """``run`` for the reconcile audit: traffic policies see what the stored object serves."""
        started = cputime.now()
        result = self.inner.run(change, state)
        found = self._guarded(lambda: self._policies(change, state, result.defaulted, served=True), started)
        return _merged(result, found)

    def traffic_findings(self, change: Change, state: State, moves: Sequence[Mapping[str, Any]]) -> list[Finding]:
        """The policies that read ``traffic``, on the change's diff (the Gate, after haproxy -c passed)."""
        if not self.own_traffic:
            return []
        return self._guarded(lambda: self._own(change, state, change.obj, self.own_traffic, list(moves), False))

    def _guarded(self, work: Any, started: float | None = None) -> list[Finding]:
        """``work`` within what is left of the object's CPU budget (the rules spent theirs since ``started``)."""
        spent = cputime.now() - started if started is not None else 0.0
        try:
            with budgets.limited(max(0.0, self.inner.cpu_budget_seconds - spent)):
                found: list[Finding] = work()
                return found
        except budgets.OverBudget as exc:
            return [Finding(codes.VALIDATION_BUDGET, f"admission policies: {exc}; no further policies ran")]
        except Exception as exc:  # a bug here must not let the change through unjudged
            return [Finding(policycodes.VAP_DENIED, f"the admission policies could not be evaluated: "
                            f"{type(exc).__name__}: {exc}")]

    def _policies(self, change: Change, state: State, defaulted: Obj | None, *, served: bool) -> list[Finding]:
        subject_obj = change.subject
        if subject_obj.get("kind") not in REVIEWED_KINDS:
            return []
        obj = None if change.operation is Operation.DELETE else (defaulted or change.obj)
        if self.vap is None and not self.own and not (served and self.own_traffic):
            return []
        subject = self._subject(change, state, obj)
        found: list[Finding] = []
        if self.vap is not None:
            found += self.vap.judge(subject) + vaps.unsupported_findings(self.vap, subject)
        found += self._own(change, state, obj, self.own, (), False, subject)
        if served:
            found += self._own(change, state, obj, self.own_traffic, (), True, subject)
        return found

    def _subject(self, change: Change, state: State, obj: Obj | None) -> vaps.Subject:
        ns = str(dig(change.subject, "metadata", "namespace", default="") or "")
        return vaps.subject_of(str(change.operation), obj, change.old, namespace_object(state, ns) if ns else None,
                               dry_run=change.dry_run)

    def _own(self, change: Change, state: State, obj: Obj | None, policies: Sequence[OwnPolicy],
             traffic: Sequence[Mapping[str, Any]], served: bool, subject: vaps.Subject | None = None,
             ) -> list[Finding]:
        """``served``: ``traffic`` is what the object serves (the audit), not a diff."""
        if not policies or change.subject.get("kind") not in REVIEWED_KINDS:
            return []
        current = obj if obj is not None else change.subject
        attached = ownpolicies.attachments_of(current, state, self.inner.http_ports)
        moves = ownpolicies.served_traffic(current, attached) if served else list(traffic)
        extra = {"attachments": attached, "traffic": moves, "lookup": ownpolicies.lookup_of(current, state)}
        subject = subject if subject is not None else self._subject(change, state, obj)
        found = ownpolicies.judge(policies, subject, extra)
        ns = str(dig(current, "metadata", "namespace", default="") or "")
        return self.inner.enforcement.apply(found, namespace=ns)


def _merged(result: Result, found: list[Finding]) -> Result:
    if not found:
        return result
    return Result(ordered([*result.findings, *found]), result.defaulted)


__all__ = ["PolicyChecks", "Severity", "namespace_object"]
