"""The Verdict: what the gate decided about one change, and why.

Three outcomes, never two: ``ERROR`` means the gate could not decide (haproxy timed out, state not
synced), which must never be reported as a plain deny of the user's object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from haproxy_check.results import Alert, HAProxyBinary
from haproxy_check.runtime.predictions import Prediction
from haproxy_check.traffic.diffs import TrafficDiff
from validators.findings import Finding, Severity, ordered
from validators.objects import Ref

MAX_REASONS = 32
# Objects other than the subject listed by name in warnings (a Gateway delete can break thousands of
# routes; the apiserver keeps 4 KiB of warnings): the rest are counted in the summary line.
MAX_AFFECTED = 10


def _line(f: Finding) -> str:
    return f"{f.field}: {f.message} [{f.code}]" if f.field else f"{f.message} [{f.code}]"


class Decision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    ref: Ref
    findings: tuple[Finding, ...] = ()
    alerts: tuple[Alert, ...] = ()  # haproxy -c alerts behind a deny, with config context
    notes: tuple[str, ...] = ()  # warnings that are not findings (not attached, reload needed, ...)
    error: str = ""  # why the gate could not decide, for Decision.ERROR
    haproxy: HAProxyBinary | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    handled: bool = True
    status: Mapping[str, Any] = field(default_factory=dict)  # route status (Accepted/ResolvedRefs) as rendered
    # the data plane's HAProxy version the render was written for, the checker's, and whether the
    # data plane's was assumed (no --dataplane-version): {"version", "checker", "assumed"}
    dataplane: Mapping[str, Any] = field(default_factory=dict)
    # how the data plane takes the change (runtime, reload, unknown: haproxy_check.runtime.predictions);
    # its note is among ``notes`` too
    prediction: Prediction | None = None
    # which request classes the change moves, and whose they were (webhook.gate.trafficdiffs); None: not computed
    traffic: TrafficDiff | None = None

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW

    @property
    def denials(self) -> list[Finding]:
        return ordered(f for f in self.findings if f.severity is Severity.DENY)

    @property
    def message(self) -> str:
        """One line naming the object and every field at fault, most specific first."""
        if self.decision is Decision.ERROR:
            return f"{self.ref}: routegate could not decide: {self.error}"
        if self.decision is Decision.ALLOW:
            return ""
        parts = [f"{f.field}: {f.message}" if f.field else f.message for f in self.denials[:MAX_REASONS]]
        return f"{self.ref}: " + "; ".join(parts)

    @property
    def has_warnings(self) -> bool:
        """Whether :attr:`warnings` has a line, without writing them (a warn finding or a note gives at
        least one: a finding about another object is listed whenever any is)."""
        return bool(self.notes) or any(f.severity is Severity.WARN for f in self.findings)

    @property
    def warnings(self) -> list[str]:
        """Warn findings and notes as user-facing lines (the webhook cleans and caps them).

        A finding about another object than the subject names it (its field path alone would be read
        as the subject's); when several objects are affected a summary line first names them all, up
        to MAX_AFFECTED, and counts the rest."""
        subject = str(self.ref)
        warned = ordered(f for f in self.findings if f.severity is Severity.WARN)
        own = [_line(f) for f in warned if not f.about or f.about == subject]
        others = [f for f in warned if f.about and f.about != subject]
        affected = sorted({f.about for f in others})
        shown = set(affected[:MAX_AFFECTED])
        summary: list[str] = []
        if len(affected) > 1:
            more = len(affected) - MAX_AFFECTED
            summary = [f"{len(affected)} other objects are affected: {', '.join(affected[:MAX_AFFECTED])}"
                       + (f" and {more} more" if more > 0 else "")]
        about = [f"{f.about}: {_line(f)}" for f in others if f.about in shown]
        return own + summary + about + list(self.notes)
