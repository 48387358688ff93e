"""TCPRoute model: ``frontend gateway-tcp-port-<port>`` (mode tcp, default_backend, no ACLs) per
claimed port and ``gtw_tcp_<ns>_<route>_<rule>`` backends (seed 004).

Port ownership comes from ``validators.crossobject.claims.tcp_claims`` (oldest route wins), the same function the
RG0507 warning uses. A route attached to several TCP listeners gets one frontend per port, all
sharing its one backend. TCP listeners on the HTTP/HTTPS ports never get here (dropped upstream).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from haproxy_check import escaping
from haproxy_check.render import isolation
from haproxy_check.render.l4 import rulebackends
from haproxy_check.render.l4.rulebackends import RuleBackend
from haproxy_check.render.servertls import FileSink
from validators.crossobject import claims
from validators.findings import Finding, Severity
from validators.objects import Ref
from validators.states import State
from validators.views import attachments


@dataclass(frozen=True, slots=True)
class TCPFrontend:
    name: str
    port: int
    backend: str
    route: Ref
    parent_index: int


@dataclass(slots=True)
class TCPModel:
    frontends: list[TCPFrontend] = field(default_factory=list)
    backends: list[RuleBackend] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def backend_name(route: Ref, rule_index: int) -> str:
    return escaping.ident(f"gtw_tcp_{route.namespace}_{route.name}_{rule_index}", what="backend name")


def build(state: State, files: FileSink, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
          settings: Any = None) -> TCPModel:
    model = TCPModel()
    won, _lost = claims.tcp_claims(state, http_ports=http_ports)  # losers: RG0507 in crossobjects
    lsts = attachments.listeners(state, http_ports=http_ports)
    taken = {x.port: x for x in lsts if x.protocol in ("HTTP", "HTTPS", "TLS") and not x.conflicted}
    backends: dict[str, RuleBackend] = {}
    for port, claim in sorted(won.items()):
        refused = [f for lst in claim.listeners if (f := isolation.unbound(lst, settings)) is not None]
        if refused:  # a pod port of isolated Gateways: never bound by a TCP listener
            model.findings.extend(refused)
            continue
        other = taken.get(port)
        if other is not None:  # one bind per port: the HTTP engine / TLS frontend keeps it
            for lst in claim.listeners:
                model.findings.append(Finding(
                    "RG0522", f"TCP listener on port {port} is not rendered: {other.source} listener "
                    f"{other.name!r} uses the port for {other.protocol}", (*lst.path, "port"), Severity.WARN,
                    subject=False, about=str(lst.source)))
            continue
        try:
            name = backend_name(claim.route, claim.rule_index)
        except escaping.Unsafe as exc:  # a name the schema check denies; never a render crash
            model.findings.append(Finding("RG0519", f"TCPRoute is not rendered: {exc}", ("metadata", "name"),
                                          Severity.WARN, subject=False, about=str(claim.route)))
            continue
        if name not in backends:
            backends[name] = rulebackends.build(state, claim.obj, claim.rule_index, name, files, tls=True,
                                                settings=settings)
            model.findings.extend(backends[name].findings)
        model.frontends.append(TCPFrontend(f"gateway-tcp-port-{port}", port, name, claim.route,
                                           claim.parent_index))
    model.backends = [backends[n] for n in sorted(backends)]
    return model
