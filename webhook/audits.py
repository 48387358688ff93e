"""Audit: judge every stored object with the admission rules, as if it were created now.

The same ``Checks.run`` the webhook calls on a CREATE, so the findings (codes, field paths, messages)
are the ones admission gives. An object can be stored invalid (the webhook was down, ``failurePolicy:
Ignore``, created before routegate was installed, a Service or Secret changed underneath it); this
says which and why. It touches every object, so it runs in the reconcile loop and ``routegate check
--all``, never on an AdmissionReview.
"""

from __future__ import annotations

from collections.abc import Sequence

from validators.changes import Change, Operation
from validators.findings import Finding
from validators.objects import REVIEWED_KINDS, Ref, ref_of
from validators.states import State
from webhook.gates import RuleChecks

Audited = Sequence[tuple[Ref, tuple[Finding, ...]]]


def audit(rules: RuleChecks, state: State) -> list[tuple[Ref, tuple[Finding, ...]]]:
    """Every stored object of a reviewed kind that has findings, with them (kind order, then by name).

    Judged as a CREATE (no old object), so no rule skips a field because it did not change."""
    out: list[tuple[Ref, tuple[Finding, ...]]] = []
    for kind in sorted(REVIEWED_KINDS):
        for obj in state.list(kind):
            result = rules.run(Change(Operation.CREATE, obj, None, dry_run=True), state)
            if result.findings:
                out.append((ref_of(obj), tuple(result.findings)))
    return out
