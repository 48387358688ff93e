"""One weighted backend per TLSRoute/TCPRoute rule: servers of every backendRef, shares by weight.

A rule splits connections across its backendRefs by weight. Each ref's servers share that ref's
weight (so a Service with more endpoints does not get more traffic), and the share of refs that cannot
serve (invalid ref, Service without ready endpoints, BackendTLSPolicy without usable CA) is rejected
by a ``tcp-request content reject if { rand(total) ... }`` rule instead of silently moving to the
others (seed 004).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from haproxy_check.descriptions import ServerDesc
from haproxy_check.render import endpoints, servertls
from haproxy_check.render.servertls import FileSink
from validators import codes
from validators.crossobject import backendrefs
from validators.findings import Finding, Severity
from validators.limits import Limits
from validators.objects import Obj, Ref, ref_of
from validators.states import State

if TYPE_CHECKING:  # rendering imports this module: the settings type is for the checker only
    from haproxy_check.render.rendersettings import RenderSettings

MAX_WEIGHT = 256


@dataclass(frozen=True, slots=True)
class RefOutcome:
    path: tuple[str | int, ...]
    weight: int
    servers: int
    problem: str  # "" when the ref serves
    service: str = ""  # "ns/name:port" of the Service it names (the routing table names its owner)


@dataclass(frozen=True, slots=True)
class RuleBackend:
    name: str
    route: Ref
    rule_index: int
    servers: tuple[ServerDesc, ...]
    body: tuple[str, ...]  # the reject-share rule, when any
    refs: tuple[RefOutcome, ...] = field(default=())
    findings: tuple[Finding, ...] = field(default=())  # servers capped by limits.serversPerBackend

    @property
    def problems(self) -> list[RefOutcome]:
        return [r for r in self.refs if r.problem]


def server_weights(shares: Sequence[tuple[int, int]]) -> list[int]:
    """Per-server weight for each (ref weight, server count) so each ref gets its weight's share."""
    fracs = [Fraction(w, n) if w > 0 and n > 0 else Fraction(0) for w, n in shares]
    nonzero = [f for f in fracs if f]
    if not nonzero:
        return [0 for _ in shares]
    lcm = math.lcm(*(f.denominator for f in nonzero))
    ints = [int(f * lcm) for f in fracs]
    g = math.gcd(*(i for i in ints if i))
    ints = [i // g for i in ints]
    top = max(ints)
    if top > MAX_WEIGHT:
        ints = [max(1, round(i * MAX_WEIGHT / top)) if i else 0 for i in ints]
    return ints


def reject_rule(total: int, rejected: int) -> tuple[str, ...]:
    if total <= 0 or rejected >= total:
        return ("tcp-request content reject",)
    if rejected <= 0:
        return ()
    return (f"tcp-request content reject if {{ rand({total}) -m int lt {rejected} }}",)


def build(state: State, route: Obj, rule_index: int, name: str, files: FileSink, *, tls: bool,
          settings: RenderSettings | None = None) -> RuleBackend:
    """The backend of rule ``rule_index``; ``tls`` applies BackendTLSPolicy (never for passthrough)."""
    refs = backendrefs.rule_backend_refs(route, state, rule_index)
    per_ref: list[tuple[backendrefs.BackendRef, list[ServerDesc], str]] = []
    capped: list[Finding] = []
    for ref in refs:
        if not ref.resolved or ref.service is None or ref.port is None:
            per_ref.append((ref, [], f"{ref.reason}: {ref.message}"))
            continue
        options: tuple[str, ...] = ()
        if tls:
            stls = servertls.server_tls(state, ref.service, ref.port, files, settings=settings)
            if stls.blocked:
                per_ref.append((ref, [], stls.blocked))
                continue
            options = stls.options
        limit = (settings.limits if settings is not None else Limits()).servers_per_backend
        servers, over = endpoints.servers_within(state, ref.service, ref.port, options=options, limit=limit)
        if over:
            capped.append(Finding(
                codes.RENDER_SERVERS_CAPPED, f"Service {ref.namespace}/{ref.name} port {ref.port} has more than "
                f"{limit} ready endpoints; only {limit} are rendered, from the first EndpointSlices by name "
                "(limits.serversPerBackend)", ref.path, Severity.WARN, subject=True, about=str(ref_of(route))))
        per_ref.append((ref, servers, "" if servers else
                        f"Service {ref.namespace}/{ref.name} port {ref.port} has no ready endpoints"))
    weights = server_weights([(ref.weight, len(servers)) for ref, servers, _ in per_ref])
    out: list[ServerDesc] = []
    for (ref, servers, _), w in zip(per_ref, weights, strict=True):
        prefix = f"r{ref.ref_index}-" if len(refs) > 1 else ""
        out += [ServerDesc(f"{prefix}{s.name}", s.address, s.port, w, s.options) for s in servers]
    total = sum(ref.weight for ref, _, _ in per_ref)
    serving = sum(ref.weight for ref, servers, _ in per_ref if servers)
    return RuleBackend(
        name=name, route=ref_of(route), rule_index=rule_index,
        servers=tuple(out), body=reject_rule(total, total - serving),
        refs=tuple(RefOutcome(ref.path, ref.weight, len(servers), problem, f"{ref.namespace}/{ref.name}:{ref.port}")
                   for ref, servers, problem in per_ref),
        findings=tuple(capped))

