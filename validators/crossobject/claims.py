"""Who owns what when routes compete: TCP listener ports and HTTP host+path+matcher keys.

The oldest route wins (creationTimestamp, then namespace/name), as seed 004 states for both. Pure,
shared by the TCP renderer and the cross-object findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from validators.objects import Obj, Ref, as_list, dig, kind_of, namespace_of, ref_of
from validators.states import State
from validators.views import attachments, indexes
from validators.views.attachments import Listener


@dataclass(frozen=True, slots=True)
class PortClaim:
    """A TCP port won by one rule of one TCPRoute (its first rule)."""

    port: int
    route: Ref
    rule_index: int
    parent_index: int
    listeners: tuple[Listener, ...]
    obj: Obj = field(compare=False, hash=False, repr=False)


@dataclass(frozen=True, slots=True)
class LostClaim:
    """A route (or one of its match keys) that lost to an older route."""

    route: Ref
    winner: Ref
    path: tuple[str | int, ...]  # field path in the loser
    what: str  # "port 5432" or "host a.com PathPrefix /x ..."


def _parent_keys(route: Obj) -> list[tuple[str, str, str]]:
    rns = namespace_of(route)
    return [(str(dig(p, "kind", default="Gateway")), str(dig(p, "namespace", default=rns)),
             str(dig(p, "name", default=""))) for p in as_list(dig(route, "spec", "parentRefs"))]


def _sharing_ports(route: Obj, state: State, http_ports: Sequence[int]) -> list[Obj]:
    """The TCPRoutes that may attach to a port ``route`` attaches to: those naming a Gateway or
    ListenerSet that declares a TCP listener on one of those ports (ownership is decided per port)."""
    attached, _ = attachments.attach(route, state, http_ports=http_ports)
    ports = {a.listener.port for a in attached if a.listener.protocol == "TCP"}
    owners = {x.source for x in attachments.listeners(state, http_ports=http_ports)
              if x.protocol == "TCP" and x.port in ports}
    by_parent = indexes.refs_by_key(state, "tcp-routes-by-parent", ("TCPRoute",), _parent_keys)
    refs = {r: None for o in owners for r in by_parent.get((o.kind, o.namespace, o.name))}
    found = (state.get(r.kind, r.namespace, r.name) for r in sorted(refs, key=lambda r: (r.namespace, r.name)))
    return [r for r in found if r is not None]


def tcp_claims(state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
               only: Obj | None = None) -> tuple[dict[int, PortClaim], list[LostClaim]]:
    """Each TCP port -> its owning rule, and every losing claim, oldest route first.

    ``only``: just the ports this TCPRoute attaches to (what a review of it needs), from an index of
    TCPRoutes by parent instead of every TCPRoute."""
    won: dict[int, PortClaim] = {}
    lost: list[LostClaim] = []
    routes = state.list("TCPRoute") if only is None else _sharing_ports(only, state, http_ports)
    for route in sorted(routes, key=attachments.age_key):
        if not as_list(dig(route, "spec", "rules")):
            continue
        attached, _ = attachments.attach(route, state, http_ports=http_ports)
        ref = ref_of(route)
        by_port: dict[int, list[Listener]] = {}
        first_parent: dict[int, int] = {}
        for a in attached:
            if a.listener.protocol == "TCP":
                by_port.setdefault(a.listener.port, []).append(a.listener)
                first_parent.setdefault(a.listener.port, a.parent_index)
        for port, lst in sorted(by_port.items()):
            owner = won.get(port)
            if owner is None:
                won[port] = PortClaim(port, ref, 0, first_parent[port], tuple(lst), route)
            elif owner.route != ref:
                lost.append(LostClaim(ref, owner.route, ("spec", "parentRefs", first_parent[port]),
                                      f"port {port}"))
    return won, lost


def _match_keys(route: Obj, rule: Any) -> tuple[tuple[int, tuple[Any, ...]], ...]:
    """(match index, key) of each match of an HTTPRoute/GRPCRoute rule; defaults applied. The key holds
    everything a lost claim's message says of the match (``_words``): the message is made only for a
    claim that is lost, not kept for every match of every route."""
    matches = as_list(dig(rule, "matches")) or [{}]
    out: list[tuple[int, tuple[Any, ...]]] = []
    grpc = kind_of(route) == "GRPCRoute"
    for k, m in enumerate(matches):
        headers = tuple(sorted(
            (str(dig(h, "name", default="")).lower(), str(dig(h, "type", default="Exact")),
             str(dig(h, "value", default="")))
            for h in as_list(dig(m, "headers"))))
        if grpc:
            method = (str(dig(m, "method", "type", default="Exact")),
                      str(dig(m, "method", "service", default="")),
                      str(dig(m, "method", "method", default="")))
            key: tuple[Any, ...] = ("grpc", method, headers)
        else:
            ptype = str(dig(m, "path", "type", default="PathPrefix"))
            pvalue = str(dig(m, "path", "value", default="/"))
            query = tuple(sorted(
                (str(dig(q, "name", default="")), str(dig(q, "type", default="Exact")),
                 str(dig(q, "value", default="")))
                for q in as_list(dig(m, "queryParams"))))
            key = ("http", ptype, pvalue, str(dig(m, "method", default="")), headers, query)
        out.append((k, key))
    return tuple(out)


def _words(key: tuple[Any, ...]) -> str:
    """How a lost claim's message names the match of ``key`` (``_match_keys``)."""
    if key[0] == "grpc":
        _, method, headers = key
        words = f"gRPC method {'/'.join(x for x in method[1:] if x) or '*'}"
    else:
        _, ptype, pvalue, method_s, headers, _ = key
        words = f"{ptype} {pvalue}" + (f" method {method_s}" if method_s else "")
    if headers:
        words += f" with {len(headers)} header matcher(s)"
    return words


HOST_ROUTE_KINDS = ("HTTPRoute", "GRPCRoute")


def _host_keys(route: Obj) -> list[tuple[str, ...]]:
    """Keys of the host-overlap index: each hostname, or "any" for a route that is hostless or uses a
    wildcard (it may share a host with every route; listener hostnames only narrow further)."""
    hosts = attachments.route_hostnames(route)
    if not hosts or any(h.startswith("*") for h in hosts):
        return [("any",)]
    return [("host", h) for h in hosts]


def may_overlap(route: Obj, state: State) -> list[Obj]:
    """The HTTP/GRPC routes of ``state`` that can share a host with ``route`` (itself included when it is
    in the state), in state order, from an index built once per state version.

    A route with a hostless or wildcard side overlaps every route: then every route is returned."""
    keys = _host_keys(route)
    if keys == [("any",)]:
        return [*state.list("HTTPRoute"), *state.list("GRPCRoute")]
    by_host = indexes.refs_by_key(state, "routes-by-host", HOST_ROUTE_KINDS, _host_keys)
    refs = {r: None for key in (("any",), *keys) for r in by_host.get(key)}
    found = (state.get(r.kind, r.namespace, r.name)
             for r in (refs if len(refs) < 2 else sorted(refs, key=_host_route_order)))
    return [r for r in found if r is not None]


_HOST_RANK = {kind: i for i, kind in enumerate(HOST_ROUTE_KINDS)}


def _host_route_order(ref: Ref) -> tuple[int, str, str]:
    return _HOST_RANK[ref.kind], ref.namespace, ref.name


def match_claims(state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
                 only: Obj | None = None) -> list[LostClaim]:
    """Matches (host + path + matchers on one Gateway's listener port: each Gateway has its own frontend,
    haproxy_check/render/isolation.py) already claimed by an older route.

    ``only``: consider just the routes that may overlap this one (what a review of it needs).
    """
    routes = [*state.list("HTTPRoute"), *state.list("GRPCRoute")] if only is None else may_overlap(only, state)
    if len(routes) < 2:
        return []  # a claim is lost only to another route
    return lost_claims(routes, state, http_ports=http_ports)


def lost_claims(routes: Sequence[Obj], state: State, *,
                http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> list[LostClaim]:
    """The claims of ``routes`` that an older one of them made first (``match_claims``)."""
    owners: dict[tuple[Any, ...], Ref] = {}
    lost: list[LostClaim] = []
    for route in sorted(routes, key=attachments.age_key):
        attached, _ = attachments.attach(route, state, http_ports=http_ports)
        ref = ref_of(route)
        seen: set[tuple[Any, ...]] = set()
        keyed = route_match_keys(route, state) if attached else ()
        for a in attached:
            hosts = a.hostnames or ("*",)
            for i, has_matches, keys in keyed:
                for k, key in keys:
                    for host in hosts:
                        full = (a.listener.gateway, a.listener.port, host, key)  # one frontend per Gateway port
                        owner = owners.setdefault(full, ref)
                        if owner != ref and (full, i, k) not in seen:
                            seen.add((full, i, k))
                            where: tuple[str | int, ...] = ("spec", "rules", i)
                            if has_matches:
                                where = (*where, "matches", k)
                            lost.append(LostClaim(ref, owner, where, f"host {host} {_words(key)}"))
    return lost


RuleKeys = tuple[int, bool, tuple[tuple[int, tuple[Any, ...]], ...]]


def route_match_keys(route: Obj, state: State) -> tuple[RuleKeys, ...]:
    """(rule index, whether it lists matches, ``_match_keys``) of every rule of a route: a function of
    the route alone, so once per state version for a route of the state (every review of a route that
    may share its hosts reads it)."""
    return indexes.of_object(state, "match-keys", frozenset(), route, lambda: tuple(
        (i, bool(as_list(dig(rule, "matches"))), _match_keys(route, rule))
        for i, rule in enumerate(as_list(dig(route, "spec", "rules")))))
