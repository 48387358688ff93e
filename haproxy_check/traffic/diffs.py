"""The traffic diff of a change: which request classes gain, lose or change destination between the
routing tables of its closure before and after it, and whose they were.

Only the host patterns whose answers can differ are probed: per entry point (the bound port), a pattern
whose ``RoutingTable.fingerprint`` differs between the tables (entries, order, the rules' destinations,
the frontend itself) or that only one table has. Each such pattern's sample Host is sent, in both
tables, with a sample request of every class that either table selects for that Host: so a new exact
host that takes requests from a wildcard, or a Gateway that takes another's port, shows as the classes
it moves. The work is proportional to what the change touches, and bounded by a deadline
(``OverBudget``), never a hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from haproxy_check.traffic.connections import Connection
from haproxy_check.traffic.destinations import (
    NO_LISTENER,
    NOT_FOUND,
    PROBE,
    REJECTED,
    Destination,
    Request,
    RequestClass,
)
from haproxy_check.traffic.tables import RoutingTable

_NOTHING = (NOT_FOUND, NO_LISTENER, REJECTED)
_CHECK_EVERY = 32  # comparisons between two looks at the clock


class OverBudget(Exception):
    """The diff did not finish before its deadline."""


@dataclass(frozen=True, slots=True)
class Move:
    cls: RequestClass
    before: Destination
    after: Destination
    request: Request | None
    gateways: tuple[str, ...] = ()  # "ns/name" of the Gateways serving the entry point, before and after
    listeners: tuple[str, ...] = ()  # "Gateway ns/name" / "ListenerSet ns/name" declaring its listeners
    connection: Connection | None = None  # a TLS/TCP class's sample connection (``request`` is None)

    @property
    def kind(self) -> str:
        if self.before.outcome in _NOTHING:
            return "gained"
        if self.after.outcome in _NOTHING:
            return "lost"
        return "moved"

    @property
    def owners(self) -> frozenset[str]:
        return self.before.owners | self.after.owners

    def line(self) -> str:
        """``HTTP :80 a.com /api/* -> gw_h_a_r_svc_80 (a) => gw_h_b_r_svc_80 (b)``"""
        return f"{self.cls.entry} {self.cls.text()} -> {self.before.text()} => {self.after.text()}"

    def as_dict(self) -> dict[str, Any]:
        return {**self.cls.as_dict(), "change": self.kind, "before": self.before.as_dict(),
                "after": self.after.as_dict(), "gateways": list(self.gateways), "listeners": list(self.listeners),
                "connection": {"port": self.connection.port, "sni": self.connection.sni}
                if self.connection is not None else None}


@dataclass(frozen=True, slots=True)
class TrafficDiff:
    moves: tuple[Move, ...] = ()
    complete: bool = True  # False: the diff ran out of time (``reason``); ``moves`` is what it found
    reason: str = ""
    compared: int = 0  # sample requests answered by both tables
    unmodelled: tuple[str, ...] = ()  # what the tables do not model (custom Route CRDs)

    def affected(self, namespace: str) -> list[str]:
        """The owners (namespaces) other than ``namespace`` of requests that were served and now go
        elsewhere or nowhere (a request nobody served that is now served moves nobody's traffic), sorted."""
        return sorted({o for m in self.moves if m.kind != "gained" for o in m.owners} - {namespace})

    def moves_of(self, owner: str) -> list[Move]:
        return [m for m in self.moves if owner in m.owners]

    def as_dict(self) -> dict[str, Any]:
        return {"complete": self.complete, "reason": self.reason, "compared": self.compared,
                "unmodelled": list(self.unmodelled), "moves": [m.as_dict() for m in self.moves]}


def diff(before: RoutingTable, after: RoutingTable, *, deadline: float | None = None,
         clock: Callable[[], float] = time.perf_counter) -> TrafficDiff:
    """The moves from ``before`` to ``after``. Raises OverBudget once ``clock()`` passes ``deadline``."""
    moves: dict[RequestClass, Move] = {}
    compared = 0
    same_rules = _same_rules(before, after)
    for port in sorted(set(before.ports()) | set(after.ports())):
        if same_rules and _same_frontend(before, after, port):
            continue  # the same entries and the same rules: every answer on this port is the same
        taken = {*_hosts(before, port), *_hosts(after, port)}
        gateways = tuple(sorted({t.frontends[port].facts.gateway for t in (before, after) if port in t.frontends}))
        sources = tuple(sorted({lst.source for t in (before, after) if port in t.frontends
                                for lst in t.frontends[port].facts.listeners}))
        patterns = sorted(set(before.patterns(port)) | set(after.patterns(port)))
        changed = []
        for n, pattern in enumerate(patterns):
            if deadline is not None and n % _CHECK_EVERY == 0 and clock() > deadline:
                raise OverBudget(f"comparing the host patterns of port {port}")
            if before.fingerprint(port, pattern) != after.fingerprint(port, pattern):
                changed.append(pattern)
        for pattern in changed:
            hosts = {h for t in (before, after) if port in t.frontends
                     for h in [t.host_sample(port, pattern, taken)] if h is not None}
            for host in sorted(hosts):
                for cls, request in _samples(before, after, port, host):
                    compared += 1
                    if deadline is not None and compared % _CHECK_EVERY == 0 and clock() > deadline:
                        raise OverBudget(f"after {compared} requests")
                    if request is None or cls in moves:
                        continue
                    was, now = before.resolve(request), after.resolve(request)
                    if moved(was, now):
                        moves[cls] = Move(cls, was, now, request, gateways, sources)
    compared = _crd_moves(before, after, same_rules, moves, compared, deadline, clock)
    compared = _l4_moves(before, after, moves, compared, deadline, clock)
    unmodelled = tuple(sorted(set(before.unmodelled) | set(after.unmodelled)))
    return TrafficDiff(tuple(moves[c] for c in sorted(moves)), compared=compared, unmodelled=unmodelled)


def _crd_moves(before: RoutingTable, after: RoutingTable, same_rules: bool, moves: dict[RequestClass, Move],
               compared: int, deadline: float | None, clock: Callable[[], float]) -> int:
    """Custom Routes: when their maps, or the HTTP frontends or rules they fall back from, differ, a
    sample of every custom Route key of either table on every HTTP port (a Gateway route's new class
    that takes a custom Route's request is found by the host patterns already)."""
    if not (before.crd_routes or after.crd_routes):
        return compared
    if (before.crd_routes == after.crd_routes and before.crd_exact == after.crd_exact
            and before.crd_prefix == after.crd_prefix and same_rules and before.ports() == after.ports()
            and all(_same_frontend(before, after, port) for port in before.ports())):
        return compared
    for port in sorted(set(before.ports()) | set(after.ports())):
        samples = dict.fromkeys([*before.crd_classes(port), *after.crd_classes(port)])
        gateways = tuple(sorted({t.frontends[port].facts.gateway for t in (before, after)
                                 if port in t.frontends} - {""}))
        for cls, request in samples:
            compared += 1
            if deadline is not None and compared % _CHECK_EVERY == 0 and clock() > deadline:
                raise OverBudget(f"after {compared} requests")
            if cls in moves:
                continue
            was, now = before.resolve(request), after.resolve(request)
            if moved(was, now):
                moves[cls] = Move(cls, was, now, request, gateways)
    return compared


def _l4_moves(before: RoutingTable, after: RoutingTable, moves: dict[RequestClass, Move], compared: int,
              deadline: float | None, clock: Callable[[], float]) -> int:
    """TLS and TCP entry points: on a port whose frontends, SNI maps or rule backends differ, a
    connection for every server-name pattern of either table (and one for any other name)."""
    was_l4, now_l4 = before.l4, after.l4
    ports = sorted(set(was_l4.ports()) | set(now_l4.ports()))
    engines = [tuple(t.frontends[p].facts.gateway if p in t.frontends else "" for p in ports) for t in (before, after)]
    if was_l4.key == now_l4.key and engines[0] == engines[1]:
        return compared
    for port in ports:
        patterns = dict.fromkeys([*was_l4.patterns(port), *now_l4.patterns(port)])
        gateways = tuple(sorted({*was_l4.owners_of(port)[0], *now_l4.owners_of(port)[0]}))
        sources = tuple(sorted({*was_l4.owners_of(port)[1], *now_l4.owners_of(port)[1]}))
        taken = set(patterns)
        for pattern in patterns:
            conns = {c for t in (was_l4, now_l4) if (c := t.sample(port, pattern, taken)) is not None}
            cls = (was_l4 if port in was_l4.ports() else now_l4).cls(port, pattern)
            for conn in sorted(conns, key=lambda c: (c.port, c.sni or "")):
                compared += 1
                if deadline is not None and compared % _CHECK_EVERY == 0 and clock() > deadline:
                    raise OverBudget(f"after {compared} connections")
                if cls in moves:
                    continue
                was, now = was_l4.resolve(conn), now_l4.resolve(conn)
                if moved(was, now):
                    moves[cls] = Move(cls, was, now, None, gateways, sources, conn)
    return compared


def moved(was: Destination, now: Destination) -> bool:
    """Whether a request's answer changed; a port that stops listening or answers 404 serves nobody
    either way."""
    return was != now and not (was.outcome in _NOTHING and now.outcome in _NOTHING)


def _same_rules(before: RoutingTable, after: RoutingTable) -> bool:
    """Whether every rule answers alike in both tables (dictionaries compared in C; the maps a change
    left alone are the same parsed objects in both)."""
    return ((before.targets is after.targets or before.targets == after.targets)
            and before.weighted_lines == after.weighted_lines
            and before.redirects == after.redirects and before.auth_fail == after.auth_fail
            and before.description_routing.rules == after.description_routing.rules
            and before.services == after.services)


def _same_frontend(before: RoutingTable, after: RoutingTable, port: int) -> bool:
    """Whether the frontend at ``port`` has the same facts and map entries in both tables (compared as
    the tables' cached per-token groups, without building the frontend)."""
    was, now = before.frontends.facts.get(port), after.frontends.facts.get(port)
    return (was is not None and now is not None and was == now
            and (before.regexes is after.regexes or before.regexes == after.regexes)
            and before.entries_of(was.token) == after.entries_of(now.token))


def _hosts(table: RoutingTable, port: int) -> set[str]:
    fe = table.frontends.get(port)
    return set(fe.hosts) if fe is not None else set()


def _samples(before: RoutingTable, after: RoutingTable, port: int, host: str,
             ) -> list[tuple[RequestClass, Request | None]]:
    """A request of every class either table selects for ``host`` on ``port``."""
    out: dict[RequestClass, Request | None] = {}
    for table in (before, after):
        vh = table.vhost_of(port, host)
        if vh is None:
            continue
        for cls, request, _ in table.classes(port, vh.rpartition(":")[0], host):
            # a real host a wildcard served is named as itself: the class that moves is that host's
            out.setdefault(cls if host.startswith(PROBE) or cls.host == host
                           else RequestClass(cls.entry, host, cls.path, cls.matchers), request)
    return list(out.items())


def timed_out(reason: str) -> TrafficDiff:
    return TrafficDiff(complete=False, reason=reason)
