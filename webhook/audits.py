"""Audit: judge every stored object with the admission rules, as if it were created now.

The same ``Checks.run`` the webhook calls on a CREATE, so the findings (codes, field paths, messages)
are the ones admission gives. An object can be stored invalid (the webhook was down, ``failurePolicy:
Ignore``, created before routegate was installed, a Service or Secret changed underneath it); this
says which and why. It touches every object, so it runs in the reconcile loop and ``routegate check
--all``, never on an AdmissionReview.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from validators.changes import Change, Operation
from validators.findings import Finding
from validators.objects import REVIEWED_KINDS, Ref, ref_of
from validators.states import State
from webhook.gates import RuleChecks

Audited = Sequence[tuple[Ref, tuple[Finding, ...]]]


def audit(rules: RuleChecks, state: State) -> list[tuple[Ref, tuple[Finding, ...]]]:
    """Every stored object of a reviewed kind that has findings, with them (sorted by Ref).

    Judged as a CREATE (no old object), so no rule skips a field because it did not change. A finding
    about another object than the one judged (a Gateway's review names the routes it leaves without a
    listener: ``Finding.about``) is that object's, once however many reviews report it."""
    found: dict[Ref, list[Finding]] = {}
    for kind in sorted(REVIEWED_KINDS):
        for obj in state.list(kind):
            judged = ref_of(obj)
            for finding in rules.run(Change(Operation.CREATE, obj, None, dry_run=True), state).findings:
                owner = parse_ref(finding.about) or judged
                if finding.about:
                    finding = replace(finding, subject=True, about="")
                known = found.setdefault(owner, [])
                if finding not in known:
                    known.append(finding)
    return [(ref, tuple(items)) for ref, items in sorted(found.items()) if items]


def parse_ref(about: str) -> Ref | None:
    """``"HTTPRoute ns/name"`` (``str(Ref)``) back to a Ref; None for ""."""
    kind, _, rest = about.partition(" ")
    if not kind or not rest:
        return None
    namespace, _, name = rest.rpartition("/")
    return Ref(kind, namespace, name)
