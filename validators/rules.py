"""The HAProxy admission rules, registered per kind as data (STYLE R5), and the rule table.

A rule is ``(obj, ctx) -> Iterator[Finding]``: it returns early when it does not apply and never raises
for malformed input. Tests and callers may pass a subset of :data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from validators import budgets
from validators.cel import celchecks
from validators.codes import INFOS, RuleInfo
from validators.contexts import Context
from validators.crossobject import crossobjects
from validators.findings import Finding, Severity
from validators.objectrules import (
    backendtlsrules,
    filters,
    gatewayrefusals,
    listeners,
    names,
    policies,
    regexes,
    routecosts,
    sweeps,
    traversals,
    unhonoured,
)
from validators.objects import Obj
from validators.policies import policycodes

Rule = Callable[[Obj, Context], Iterator[Finding]]

__all__ = ["COMMON", "RULES", "Rule", "RuleInfo", "markdown", "table"]

COMMON: tuple[Rule, ...] = (names.object_names, sweeps.renderable)

_ROUTE_FILTERS: tuple[Rule, ...] = (
    filters.header_modifiers,
    filters.match_names,
    filters.extension_refs,
    filters.backend_filters,
    unhonoured.request_mirrors,
    unhonoured.route_policies,
    regexes.balanced,
    policies.session_names,
    policies.timeouts,
    routecosts.match_hostnames,
)

RULES: Mapping[str, Sequence[Rule]] = {
    "HTTPRoute": (
        *COMMON,
        *_ROUTE_FILTERS,
        filters.prefix_rewrites,
        filters.redirect_codes,
        filters.external_auth,
        policies.retries,
    ),
    "GRPCRoute": (*COMMON, *_ROUTE_FILTERS, policies.retries),
    "TLSRoute": (*COMMON, listeners.tlsroute_hostnames),
    "TCPRoute": COMMON,
    "Gateway": (*COMMON, listeners.tcp_ports, listeners.tls_modes, listeners.pod_ports,
                unhonoured.listener_tls_options, gatewayrefusals.refused_gateway),
    "ListenerSet": (*COMMON, listeners.tcp_ports, listeners.tls_modes, listeners.pod_ports,
                    unhonoured.listener_tls_options),
    "BackendTLSPolicy": (*COMMON, backendtlsrules.subject_alt_names, backendtlsrules.trust),
    "ReferenceGrant": COMMON,
    "Route": (*COMMON, filters.route_crd_headers),
}


def run(obj: Obj, ctx: Context, rules: Mapping[str, Sequence[Rule]] = RULES) -> list[Finding]:
    kind = obj.get("kind")
    chosen = rules.get(kind, COMMON) if isinstance(kind, str) else COMMON
    found: list[Finding] = []
    with traversals.walking(obj):
        for rule in chosen:
            budgets.spend("HAProxy rules")
            found += rule(obj, ctx)
    return found


def table() -> list[RuleInfo]:
    """Every code with its default severity and one line: ours, CEL's and the cross-object warnings."""
    infos = [*INFOS, *celchecks.RULE_INFOS, *policycodes.RULE_INFOS]
    infos += [RuleInfo(c, Severity.WARN, s) for c, s in crossobjects.CODES.items()]
    return sorted({i.code: i for i in infos}.values(), key=lambda i: i.code)


def markdown() -> str:
    """The table as Markdown rows (docs/RULES.md uses it verbatim)."""
    rows = ["| code | default | summary |", "|---|---|---|"]
    for info in table():
        name = f" (`{info.name}`)" if info.name else ""
        summary = info.summary.replace("|", "\\|")
        rows.append(f"| `{info.code}` | {info.default_severity} | {summary}{name} |")
    return "\n".join(rows)
