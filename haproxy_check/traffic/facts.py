"""The routing facts a render records besides its maps: which frontend binds where for whom, the
advanced (method/header/query) match lines in their order, which route each rule id belongs to and
which Service each backend serves. Plain, immutable values: ``tables`` reads them with the map files
to know what the data plane does with a request, without reading haproxy.cfg text back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Matcher:
    """One method, header or query parameter matcher of a match, as rendered."""

    kind: str  # "method" | "header" | "query"
    name: str  # header (lower case) or query parameter name; "" for a method
    type: str  # "Exact" | "RegularExpression"
    value: str


@dataclass(frozen=True, slots=True)
class MatchFacts:
    """An advanced rule-selection line: selected for a request whose vhost is one of ``vhosts``, whose
    path-only candidate scores at most ``score``, and that every matcher matches (first line wins)."""

    value: str  # "<score>|<rule id>|<prefix length>|<reason>", what the line selects
    score: int
    vhosts: tuple[str, ...]  # "<host pattern>:<token>"
    path_type: str  # Exact | PathPrefix | RegularExpression
    path_value: str  # as rendered (a prefix without its trailing slash)
    matchers: tuple[Matcher, ...]


@dataclass(frozen=True, slots=True)
class ListenerFacts:
    name: str
    source: str  # "Gateway ns/name" or "ListenerSet ns/name": who declares it
    hostname: str | None
    tls_mode: str | None


@dataclass(frozen=True, slots=True)
class FrontendFacts:
    """One HTTP/HTTPS frontend: where it binds and whose listeners it serves."""

    name: str
    token: str  # the port token of its map keys
    protocol: str  # HTTP | HTTPS
    port: int  # the port it binds (a pod port for an isolated Gateway)
    public_port: int  # the port its listeners declare
    gateway: str  # "ns/name" of the Gateway whose listeners it serves
    listeners: tuple[ListenerFacts, ...]
    advanced: tuple[MatchFacts, ...]  # in the order the frontend tries them
    reject_all: bool = False  # client validation without a usable CA: no request is served
    behind_split: bool = False  # bound on an internal socket behind a TLS passthrough SNI split
    routes: tuple[str, ...] = ()  # "HTTPRoute ns/name" of every route with a rule in it, sorted


@dataclass(frozen=True, slots=True)
class RuleFacts:
    rid: str
    kind: str  # HTTPRoute | GRPCRoute
    route: str  # "ns/name"
    index: int


@dataclass(frozen=True, slots=True)
class TLSFrontendFacts:
    """One SNI-routing tcp frontend (TLSRoute, SSLPassthrough HTTPRoute): where it binds and which maps
    choose the backend of a server name."""

    name: str
    port: int
    mode: str  # Passthrough (reads the ClientHello's SNI) | Terminate (decrypts, reads ssl_fc_sni)
    exact_map: str  # the map file names (``tls-sni-<port>.map``) the SNI is looked up in
    wild_map: str
    shared_https: bool  # an SNI no entry names goes to the HTTP engine's HTTPS frontend of the port
    inner: bool  # bound behind the port's passthrough frontend, reached through the backend ``hop``
    hop: str
    gateways: tuple[str, ...]  # "ns/name" of the Gateways of its listeners
    listeners: tuple[str, ...]  # "Gateway ns/name" / "ListenerSet ns/name" declaring its listeners
    reject_all: bool = False  # client validation without a usable CA: no connection is served


@dataclass(frozen=True, slots=True)
class TCPFrontendFacts:
    """One TCPRoute port: every connection goes to the backend of the route that claimed the port."""

    name: str
    port: int
    backend: str
    route: str  # "TCPRoute ns/name"
    gateways: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class L4BackendFacts:
    """A TLSRoute/TCPRoute (or SSLPassthrough HTTPRoute) rule's backend: whose rule, which Services."""

    name: str
    kind: str  # TLSRoute | TCPRoute | HTTPRoute
    route: str  # "ns/name"
    index: int
    refs: tuple[tuple[str, int, bool], ...]  # ("ns/name:port", weight, serves) of each backendRef


@dataclass(frozen=True, slots=True)
class CrdRouteFacts:
    """A custom Route CRD (seed 000): its backend and the literal server it sends to."""

    backend: str
    route: str  # "ns/name"
    address: str  # "<address>:<port>"


@dataclass(frozen=True, slots=True)
class RoutingFacts:
    frontends: tuple[FrontendFacts, ...] = ()
    rules: tuple[RuleFacts, ...] = ()
    services: tuple[tuple[str, str], ...] = ()  # (backend name, "ns/name:port" of its Service)
    tls: tuple[TLSFrontendFacts, ...] = ()  # SNI-routing frontends, outer (public) ones first per port
    tcp: tuple[TCPFrontendFacts, ...] = ()
    l4_backends: tuple[L4BackendFacts, ...] = ()
    crd_routes: tuple[CrdRouteFacts, ...] = ()
    crd_port: int | None = None  # the port of the custom Routes' own frontend (no Gateway HTTP frontend)


def collect(frontends: Iterable[Any], services: Mapping[str, Any], *, tls: Any = None, tcp: Any = None,
            crd: Any = None, crd_port: int | None = None) -> RoutingFacts:
    """The facts of a render's HTTP frontend models (``httpmodels.FrontendModel``, sorted and complete)
    and its backends (name -> ``BackendSpec``), and of the L4 models the templates rendered
    (``tlsroutes.TLSModel``, ``tcproutes.TCPModel``, ``crdroutes.CrdModel``; None: not rendered). The
    frontend of routes attached nowhere binds no address a client reaches, so it is left out. Linear in
    the rules and advanced lines of the render."""
    fronts: list[FrontendFacts] = []
    rules: dict[str, RuleFacts] = {}
    for fe in frontends:
        if fe.port is None:
            continue
        advanced = tuple(MatchFacts(adv.value, adv.score, adv.vhosts, adv.request[0], adv.request[1],
                                    adv.request[2]) for _, adv in fe.advanced)
        routes: set[str] = set()
        for rule in fe.rules:
            if rule.rid not in rules:
                rules[rule.rid] = RuleFacts(rule.rid, rule.kind, rule.route, rule.index)
            if rule.index == 0:
                routes.add(f"{rule.kind} {rule.route}")
        fronts.append(FrontendFacts(fe.name, fe.token, fe.protocol, fe.port, fe.public_port or fe.port, fe.gateway,
                                    fe.listener_facts, advanced, fe.reject_all, not fe.bind.startswith(":"),
                                    tuple(sorted(routes))))
    return RoutingFacts(tuple(sorted(fronts, key=lambda f: f.name)), tuple(rules[r] for r in sorted(rules)),
                        tuple(sorted((name, spec.service) for name, spec in services.items() if spec.service)),
                        *_l4(tls, tcp, crd), crd_port if crd is not None and crd.routes else None)


def _l4(tls: Any, tcp: Any, crd: Any) -> tuple[tuple[TLSFrontendFacts, ...], tuple[TCPFrontendFacts, ...],
                                              tuple[L4BackendFacts, ...], tuple[CrdRouteFacts, ...]]:
    tls_fronts = tuple(TLSFrontendFacts(
        fe.name, fe.port, fe.mode, fe.exact_map, fe.wild_map, fe.shared_https, fe.inner, fe.hop,
        tuple(f"{g.namespace}/{g.name}" for g in fe.gateways), tuple(sorted({str(src) for src, _ in fe.owners})),
        fe.reject_all) for fe in (tls.frontends if tls is not None else ()))
    tcp_fronts = tuple(TCPFrontendFacts(fe.name, fe.port, fe.backend, f"TCPRoute {fe.route.namespace}/{fe.route.name}")
                       for fe in (tcp.frontends if tcp is not None else ()))
    backends = tuple(L4BackendFacts(b.name, b.route.kind, f"{b.route.namespace}/{b.route.name}", b.rule_index,
                                    tuple((r.service, r.weight, not r.problem) for r in b.refs))
                     for model in (tls, tcp) if model is not None for b in model.backends)
    crds = tuple(CrdRouteFacts(r.backend, f"{r.ref.namespace}/{r.ref.name}", f"{r.server.address}:{r.server.port}")
                 for r in (crd.routes if crd is not None else ()))
    return tls_fronts, tcp_fronts, backends, crds


def shared_with_others(routing: RoutingFacts, kind: str, namespace: str, name: str) -> bool:
    """Whether the object enters traffic through an entry point (a frontend, or a public port several
    Gateways share) that serves another owner's route or belongs to another owner's Gateway."""
    me = f"{kind} {namespace}/{name}"
    mine = [fe for fe in routing.frontends
            if me in fe.routes or (kind == "Gateway" and fe.gateway == f"{namespace}/{name}")
            or any(lst.source == me for lst in fe.listeners)]
    if _l4_shared(routing, kind, namespace, f"{namespace}/{name}", me):
        return True
    ports = {fe.public_port for fe in mine}
    for fe in routing.frontends:
        if fe in mine or fe.public_port in ports:
            if fe.gateway.split("/", 1)[0] != namespace:
                return True
            if any(r.split(" ", 1)[1].split("/", 1)[0] != namespace for r in fe.routes):
                return True
    return False


def _l4_shared(routing: RoutingFacts, kind: str, namespace: str, name: str, me: str) -> bool:
    """The same for the TLS/TCP entry points of the render (a closure): the object has a rule backend or
    a listener there, and another owner has a Gateway, a listener or a route there."""
    mine = any(b.kind == kind and b.route == name for b in routing.l4_backends) or (
        kind == "Gateway" and any(name in fe.gateways for fe in routing.tls)) or any(
        me in fe.listeners for fe in routing.tls)
    if not mine:
        return False
    return (any(g.split("/", 1)[0] != namespace for fe in routing.tls for g in fe.gateways)
            or any(s.split(" ", 1)[1].split("/", 1)[0] != namespace for fe in routing.tls for s in fe.listeners)
            or any(b.route.split("/", 1)[0] != namespace for b in routing.l4_backends))
