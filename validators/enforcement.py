"""Per-rule enforcement: a policy team turns a rule to deny, warn or off, and exempts namespaces.

Like Gatekeeper's ``enforcementAction``, a new rule can be rolled out in warn mode first. The
configuration is the parsed ``--config`` YAML (the webhook reads the file; this module does no I/O)::

    rules: {RG0101: warn, RG0113: off}
    exemptNamespaces: [kube-system]
    strict: true          # unknown fields (RG0003) deny instead of warn
    limits: {serversPerBackend: 500}   # per-object cost limits, see validators.limits

Objects in an exempt namespace are still checked, but every finding is a warning: the change is
admitted and the user still learns what the gateway will do with it. Mistakes in the configuration
raise :class:`ValueError` naming the key, so a typo never silently disables a rule.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from validators import codes
from validators.findings import Finding, Severity
from validators.limits import Limits

KEYS = ("rules", "exemptNamespaces", "strict", "limits")


class Action(StrEnum):
    DENY = "deny"
    WARN = "warn"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class Enforcement:
    rules: Mapping[str, Action] = field(default_factory=dict)
    exempt_namespaces: frozenset[str] = frozenset()
    strict: bool = False
    limits: Limits = field(default_factory=Limits)  # per-object cost limits (validators.limits)

    @classmethod
    def from_mapping(
        cls, cfg: Mapping[str, Any] | None, *, known: Collection[str] | None = None
    ) -> Enforcement:
        """Parse the YAML shape above; ``known`` defaults to every code of ``validators.rules.table()``."""
        if cfg is None:
            return cls()
        if not isinstance(cfg, Mapping):
            raise ValueError(f"enforcement config: expected a mapping with keys {', '.join(KEYS)}, "
                             f"got {type(cfg).__name__}")
        for key in cfg:
            if key not in KEYS:
                raise ValueError(f"enforcement config: unknown key {key!r}; allowed: {', '.join(KEYS)}")
        fixed: Collection[str] = ()
        if known is None:
            from validators import rules  # the table imports every rule module; only needed here

            table = rules.table()
            known = {info.code for info in table if info.configurable}
            fixed = {info.code for info in table if not info.configurable}
        return cls(
            rules=_rules(cfg.get("rules"), known, fixed),
            exempt_namespaces=_namespaces(cfg.get("exemptNamespaces")),
            strict=_strict(cfg.get("strict", False)),
            limits=Limits.from_mapping(cfg.get("limits")),
        )

    def action(self, code: str, default: Severity) -> Action:
        """What happens to a finding with ``code`` whose rule defaults to ``default``."""
        if code in self.rules:
            return self.rules[code]
        if self.strict and code == codes.UNKNOWN_FIELD:
            return Action.DENY
        return Action(str(default))

    def apply(self, findings: Iterable[Finding], *, namespace: str = "") -> list[Finding]:
        """Findings with their enforced severity; ``off`` rules dropped; exempt namespaces only warn."""
        exempt = namespace in self.exempt_namespaces
        out: list[Finding] = []
        for finding in findings:
            action = self.action(finding.code, finding.severity)
            if action is Action.OFF:
                continue
            severity = Severity.WARN if exempt else Severity(str(action))
            out.append(finding if finding.severity is severity else finding.with_severity(severity))
        return out


def _rules(value: Any, known: Collection[str], fixed: Collection[str] = ()) -> dict[str, Action]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"enforcement config: 'rules' must map rule codes to deny|warn|off, "
                         f"got {type(value).__name__}")
    out: dict[str, Action] = {}
    for code, action in value.items():
        if code in fixed:
            raise ValueError(f"enforcement config: rules.{code}: a verdict of the gate itself, "
                             "not configurable")
        if not isinstance(code, str) or code not in known:
            raise ValueError(f"enforcement config: rules.{code}: unknown rule code; "
                             "`routegate rules` lists the codes")
        if action is False:  # YAML 1.1 reads a bare `off` as false
            out[code] = Action.OFF
            continue
        try:
            out[code] = Action(action.lower() if isinstance(action, str) else action)
        except ValueError:
            raise ValueError(f"enforcement config: rules.{code}: {action!r} is not one of deny, warn, off"
                             ) from None
    return out


def _namespaces(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise ValueError("enforcement config: 'exemptNamespaces' must be a list of namespace names")
    return frozenset(value)


def _strict(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"enforcement config: 'strict' must be true or false, got {value!r}")
    return value
