"""The routing table of a render's TLS and TCP entry points: what the data plane does with a connection.

Read from the render's recorded facts (``facts.TLSFrontendFacts``, ``TCPFrontendFacts``,
``L4BackendFacts``) and its SNI map files, never from haproxy.cfg text. ``L4Table.resolve`` answers one
connection the way the shipped ``450-tls-frontends``/``460-tcp-frontends`` templates do:

1. a TCPRoute port: every connection goes to the claiming route's backend;
2. a TLS port (the outer frontend bound on ``:<port>``): the server name, lower-cased, in
   ``tls-sni-<port>.map`` (exact), else the first ``tls-sni-wild-<port>.map`` suffix (file order, longest
   first); no entry: the HTTP engine's HTTPS frontend of the port when it shares the port
   (``shared_https``), else the connection is rejected;
3. an entry naming the hop of the port's Terminate frontend: that frontend decrypts and looks the name up
   again in its own maps; an entry naming the HTTP engine's hop: the HTTPS listeners of the port;
4. a rule backend: its backendRefs' Services by weight (a ref that cannot serve: its share is rejected).

A port bound only by the HTTP engine's HTTPS frontend hands every TLS connection to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from haproxy_check.traffic.destinations import (
    BACKEND,
    HTTPS_ENGINE,
    NO_LISTENER,
    PROBE,
    REJECTED,
    Backend,
    Destination,
    RequestClass,
)
from haproxy_check.traffic.facts import FrontendFacts, L4BackendFacts, RoutingFacts, TCPFrontendFacts, TLSFrontendFacts


class HttpFrontend(Protocol):
    """What the TLS entry points read of the HTTP engine's frontend on a port (``tables``' frontends)."""

    @property
    def facts(self) -> FrontendFacts: ...


ANY_NAME = "*"  # the class of server names no entry names


@dataclass(frozen=True, slots=True, order=True)
class Connection:
    """One TLS connection with a server name (``sni``; None: a plain TCP connection), as a probe opens it."""

    port: int
    sni: str | None = None


@dataclass(frozen=True, slots=True)
class _Sni:
    facts: TLSFrontendFacts
    exact: dict[str, str]  # server name -> backend
    wild: tuple[tuple[str, str], ...]  # (".suffix", backend), in map (match) order

    def lookup(self, name: str) -> str | None:
        got = self.exact.get(name)
        if got is not None:
            return got
        for suffix, backend in self.wild:
            if name.endswith(suffix):
                return backend
        return None

    def patterns(self) -> list[str]:
        """Its entries as host patterns: exact names, ``*.suffix`` wildcards."""
        return [*sorted(self.exact), *(f"*{suffix}" for suffix, _ in self.wild)]


def _pairs(entries: Any) -> list[tuple[str, str]]:
    out = []
    for line in entries:
        key, _, value = line.rpartition(" ")
        if key:
            out.append((key, value))
    return out


class L4Table:
    """What a render's TLS and TCP frontends do with a connection (module docstring). Immutable."""

    def __init__(self, routing: RoutingFacts, http_frontends: Mapping[int, HttpFrontend],
                 maps: dict[str, tuple[str, ...]]) -> None:
        self._http = http_frontends
        self.outer: dict[int, _Sni] = {}
        self.inner: dict[int, _Sni] = {}
        for fe in routing.tls:
            sni = _Sni(fe, dict(_pairs(maps.get(fe.exact_map, ()))), tuple(_pairs(maps.get(fe.wild_map, ()))))
            (self.inner if fe.inner else self.outer)[fe.port] = sni
        self.tcp: dict[int, TCPFrontendFacts] = {fe.port: fe for fe in routing.tcp}
        self.backends: dict[str, L4BackendFacts] = {b.name: b for b in routing.l4_backends}
        self.key = (routing.tls, routing.tcp, routing.l4_backends, tuple(
            (m, maps.get(m)) for fe in routing.tls for m in (fe.exact_map, fe.wild_map)))

    def ports(self) -> list[int]:
        return sorted({*self.outer, *self.tcp})

    def entry(self, port: int) -> str:
        return f"TCP :{port}" if port in self.tcp else f"TLS :{port}"

    def resolve(self, conn: Connection) -> Destination:
        tcp = self.tcp.get(conn.port)
        if tcp is not None:
            return self.destination(tcp.backend)
        outer = self.outer.get(conn.port)
        if outer is None:
            http = self._http.get(conn.port)
            if http is not None and http.facts.protocol == "HTTPS" and not http.facts.behind_split:
                return self._engine(conn.port)
            return Destination(NO_LISTENER)
        if conn.sni is None or (outer.facts.mode != "Passthrough" and outer.facts.reject_all):
            return Destination(REJECTED)
        name = conn.sni.lower()
        backend = outer.lookup(name)
        if backend is None:
            return self._engine(conn.port) if outer.facts.shared_https else Destination(REJECTED)
        inner = self.inner.get(conn.port)
        if inner is not None and backend == inner.facts.hop:
            if inner.facts.reject_all:
                return Destination(REJECTED)
            backend = inner.lookup(name)
            if backend is None:
                return Destination(REJECTED)
        elif outer.facts.shared_https and backend == f"routegate_https_{conn.port}":
            return self._engine(conn.port)
        return self.destination(backend)

    def _engine(self, port: int) -> Destination:
        """Handed to the HTTP engine's HTTPS frontend on ``port`` (its Gateway owns the listeners)."""
        http = self._http.get(port)
        if http is None:
            return Destination(NO_LISTENER)
        gateway = http.facts.gateway
        return Destination(HTTPS_ENGINE, f"HTTPS listeners of Gateway {gateway}", gateway.split("/", 1)[0])

    def destination(self, backend: str) -> Destination:
        b = self.backends.get(backend)
        if b is None:
            return Destination(REJECTED, detail=backend)
        label, owner = f"{b.kind} {b.route} rule {b.index}", b.route.split("/", 1)[0]
        total = sum(w for _, w, _ in b.refs)
        serving = [(svc, w) for svc, w, ok in b.refs if ok and w > 0]
        if not serving or total <= 0:
            return Destination(REJECTED, label, owner)
        return Destination(BACKEND, label, owner, tuple(sorted(
            Backend(b.name, svc, round(100 * w / total)) for svc, w in serving)))

    # ------------------------------------------------------------------ the connection classes

    def patterns(self, port: int) -> list[str]:
        """The server-name patterns of the TLS port (its entries, then any other name); ``*`` on a TCP port."""
        outer = self.outer.get(port)
        if outer is None:
            return [ANY_NAME] if port in self.tcp else []
        return [*outer.patterns(), ANY_NAME]

    def sample(self, port: int, pattern: str, taken: set[str]) -> Connection | None:
        """A connection whose server name selects ``pattern`` on ``port``."""
        if port in self.tcp:
            return Connection(port)
        outer = self.outer.get(port)
        if outer is None:
            return None
        if not pattern.startswith("*"):
            return Connection(port, pattern)
        want = outer.lookup(f"{PROBE}.invalid") if pattern == ANY_NAME else next(
            (be for sfx, be in outer.wild if f"*{sfx}" == pattern), None)
        for n in range(4):
            label = PROBE if n == 0 else f"{PROBE}-{n}"
            name = f"{label}.invalid" if pattern == ANY_NAME else f"{label}{pattern[1:]}"
            if name not in taken and name not in outer.exact and outer.lookup(name) == want:
                return Connection(port, name)
        return None

    def cls(self, port: int, pattern: str) -> RequestClass:
        return RequestClass(self.entry(port), pattern, "")

    def owners_of(self, port: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The Gateways and the listeners' declaring objects of the port's entry point."""
        fes = [x.facts for x in (self.outer.get(port), self.inner.get(port)) if x is not None]
        return (tuple(g for fe in fes for g in fe.gateways), tuple(s for fe in fes for s in fe.listeners))
