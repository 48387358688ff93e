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
from validators.findings import Finding, Severity, ordered
from validators.objects import Ref

MAX_REASONS = 32


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
    def warnings(self) -> list[str]:
        """Warn findings and notes as user-facing lines (the webhook cleans and caps them)."""
        found = [
            f"{f.field}: {f.message} [{f.code}]" if f.field else f"{f.message} [{f.code}]"
            for f in ordered(f for f in self.findings if f.severity is Severity.WARN)
        ]
        return found + list(self.notes)
