"""The routing table of a render: what the HTTP frontends do with a request, as a value.

Built from a render's description (its map files and the routing facts the render recorded,
``facts``), never from haproxy.cfg text. ``RoutingTable.resolve`` answers one request the way the
shipped ``400-http-frontends`` template does, step for step:

1. the frontend bound on the request's port (an entry point: one Gateway's listeners on it);
2. the vhost: ``host.map`` (exact ``host:token``), else the first ``host-wildcard.map`` suffix (longest
   first), else ``*:token``;
3. the path-only candidate for ``vhost + path``: ``path-exact.map``, else the first ``path-regex.map``
   entry (every entry, in file order: a regex anchored on another vhost's text can match too), else
   ``path-prefix-exact.map``, else the longest ``path-prefix.map`` key;
4. the first advanced line (method/header/query) of the frontend whose vhosts include the vhost,
   whose score is at least the candidate's, and whose matchers all match, else the candidate;
5. the rule's answer: ``gw-redirect.map`` (a redirect), ``gw-extauth.map`` ``@500``, else
   ``rule-backend.map`` (a backend, ``@weighted``: the weight slots' backends, ``@500``).

6. no rule selected: the custom Routes (seed 000) of ``route-crd-exact.map``/``route-crd-prefix.map``,
   host+path then ``*``+path, else 404.

``rows`` lists every request class (entry point, host pattern, path match, matchers) with the route,
rule and backends that serve it and their owners, in match order; then each custom Route key and each
TLS/TCP entry point's server-name classes (``connections``: what a connection by server name gets).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from haproxy_check.descriptions import Description
from haproxy_check.traffic import connections, regexes
from haproxy_check.traffic.destinations import (
    BACKEND,
    ERROR,
    FAIL,
    NO_LISTENER,
    NOT_FOUND,
    PROBE,
    REDIRECT,
    REJECTED,
    WEIGHTED,
    Backend,
    Destination,
    Request,
    RequestClass,
)
from haproxy_check.traffic.facts import FrontendFacts, MatchFacts, RoutingFacts


@dataclass(frozen=True, slots=True)
class Row:
    cls: RequestClass
    destination: Destination
    sample: Request | None  # a request of the class (None: none could be made, e.g. an unusual regex)
    gateway: str  # the entry point's Gateway, "ns/name"
    listener: str  # the listener that admits the host: "Gateway ns/gw listener http"
    connection: Any = None  # a TLS/TCP class's sample (``connections.Connection``; ``sample`` is None)


@dataclass(slots=True)
class _VHost:
    exact: dict[str, str] = field(default_factory=dict)  # path -> selection value
    prefix_exact: dict[str, str] = field(default_factory=dict)
    prefix: dict[str, str] = field(default_factory=dict)  # "/p/" -> value
    regex: list[tuple[str, str]] = field(default_factory=list)  # (the regex after the vhost, value)
    advanced: list[MatchFacts] = field(default_factory=list)


@dataclass(slots=True)
class _Frontend:
    facts: FrontendFacts
    hosts: dict[str, str] = field(default_factory=dict)  # host -> vhost
    wildcards: list[tuple[str, str]] = field(default_factory=list)  # (".suffix", vhost), map order
    vhosts: dict[str, _VHost] = field(default_factory=dict)  # vhost -> its entries

    @property
    def entry(self) -> str:
        return f"{self.facts.protocol} :{self.facts.port}"

    def vhost(self, vh: str) -> _VHost:
        got = self.vhosts.get(vh)
        if got is None:
            got = self.vhosts[vh] = _VHost()
        return got


def _entries(description: Description) -> dict[str, tuple[str, ...]]:
    return {m.path.rsplit("/", 1)[-1]: m.entries for m in description.maps}


def _pairs(entries: Iterable[str]) -> Iterator[tuple[str, str]]:
    for line in entries:
        key, _, value = line.rpartition(" ")
        if key:
            yield key, value


# The parsed form of a map's entries, cached by content (``functools.lru_cache`` keys on the entries tuple:
# hashed and compared in C): a review's table before the change and the one after share every map the
# change left alone, and reviews against one cluster version share the table before. Read-only values.
# A few versions of each map are kept: the grouping holds the map's own lines (pointers, no copies).
_CACHED = 16


@functools.lru_cache(maxsize=_CACHED)
def _grouped(entries: tuple[str, ...], path_keys: bool) -> dict[str, tuple[str, ...]]:
    """The map's lines by the frontend token of their key, in map order: ``host:token`` keys, or
    (``path_keys``) ``host:token/path`` keys."""
    out: dict[str, list[str]] = {}
    for line in entries:
        key = line.rpartition(" ")[0]
        if not key:
            continue
        vh = key[:key.find("/")] if path_keys else key
        out.setdefault(vh.rpartition(":")[2], []).append(line)
    return {token: tuple(lines) for token, lines in out.items()}


@functools.lru_cache(maxsize=_CACHED // 2)
def _regex_entries(entries: tuple[str, ...]) -> tuple[tuple[tuple[str, str, str], ...],
                                                      dict[str, list[tuple[int, str, str]]],
                                                      dict[str, tuple[tuple[str, str, str], ...]]]:
    """Every regex in file order with the vhost text it is anchored on (HAProxy tries them all); the
    same by that vhost text (with its order); and by frontend token."""
    found: list[tuple[str, str, str]] = []  # (vhost literal, whole key, value)
    at: dict[str, list[tuple[int, str, str]]] = {}
    by_token: dict[str, list[tuple[str, str, str]]] = {}
    for key, value in _pairs(entries):
        cut = key.find("(?:")
        if key.startswith("^") and cut > 0:
            # pcre_escape's backslashes (a host has none of its own), without the path-start anchor
            vh = key[1:cut].removesuffix("(?=/)").replace("\\", "")
            found.append((vh, key, value))
            at.setdefault(vh, []).append((len(found), key, value))
            by_token.setdefault(vh.rpartition(":")[2], []).append((vh, key, value))
    return tuple(found), at, {token: tuple(rows) for token, rows in by_token.items()}


@functools.lru_cache(maxsize=_CACHED // 2)
def _pair_dict(entries: tuple[str, ...]) -> dict[str, str]:
    return dict(_pairs(entries))


_PATH_MAPS = (("path-exact.map", "exact"), ("path-prefix-exact.map", "prefix_exact"), ("path-prefix.map", "prefix"))


class _Frontends(Mapping[int, _Frontend]):
    """Port -> the frontend bound there, each built from its token's map entries on first use: a diff
    reads only the ports whose entries differ."""

    def __init__(self, facts: dict[int, FrontendFacts], build: Callable[[FrontendFacts], _Frontend]) -> None:
        self.facts, self._build = facts, build
        self._built: dict[int, _Frontend] = {}

    def __getitem__(self, port: int) -> _Frontend:
        got: _Frontend | None = self._built.get(port)
        if got is None:
            got = self._built[port] = self._build(self.facts[port])
        return got

    def __contains__(self, port: object) -> bool:
        return port in self.facts

    def __iter__(self) -> Iterator[int]:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


class RoutingTable:
    """What a render's HTTP frontends do with a request (module docstring). Immutable once built."""

    def __init__(self, description: Description) -> None:
        routing: RoutingFacts = description.routing
        maps = _entries(description)
        self.description_routing = routing
        self._maps = maps
        facts = {f.port: f for f in routing.frontends}
        if routing.crd_port is not None and routing.crd_port not in facts:
            # the custom Routes' own frontend: no Gateway HTTP listener, no vhost, every request to them
            facts[routing.crd_port] = FrontendFacts("routes-crd", "", "HTTP", routing.crd_port, routing.crd_port,
                                                    "", (), ())
        self.frontends = _Frontends(facts, self._frontend)
        self.rules = {r.rid: r for r in routing.rules}
        self.services = dict(routing.services)
        self.regexes, self._regex_at, self._regex_by_token = _regex_entries(maps.get("path-regex.map", ()))
        self.targets = _pair_dict(maps.get("rule-backend.map", ()))
        # "<slot>:<rule id> <backend>", 100 lines per weighted rule (most of a render's map lines): read
        # when a weighted rule's answer is asked for (``weighted``), compared as text until then
        self.weighted_lines: tuple[str, ...] = tuple(maps.get("weighted-multi-backend.map", ()))
        self._weighted: dict[str, Counter[str]] | None = None
        self.redirects = {k: v.split("|", 1)[0] for k, v in _pair_dict(maps.get("gw-redirect.map", ())).items()}
        self.auth_fail = {k for k, v in _pair_dict(maps.get("gw-extauth.map", ())).items() if v == FAIL}
        # custom Routes (seed 000): host+path keys tried where no Gateway rule matched, then "*"+path
        self.crd_routes = {r.backend: r for r in routing.crd_routes}
        self.crd_exact = dict(_pairs(maps.get("route-crd-exact.map", ()))) if self.crd_routes else {}
        self.crd_prefix = tuple(_pairs(maps.get("route-crd-prefix.map", ()))) if self.crd_routes else ()
        self.unmodelled: tuple[str, ...] = ()
        self._destinations: dict[str, Destination] = {}
        self._rule_keys: dict[str, tuple[Any, ...]] = {}

    def entries_of(self, token: str) -> tuple[Any, ...]:
        """The map entries of the frontend with ``token`` (compared between tables: equal entries and
        facts, equal answers on that frontend)."""
        maps = self._maps
        return (_grouped(maps.get("host.map", ()), False).get(token),
                _grouped(maps.get("host-wildcard.map", ()), False).get(token),
                *(_grouped(maps.get(name, ()), True).get(token) for name, _ in _PATH_MAPS),
                self._regex_by_token.get(token))

    def _frontend(self, facts: FrontendFacts) -> _Frontend:
        fe = _Frontend(facts)
        token, maps = facts.token, self._maps
        for adv in facts.advanced:
            for vh in adv.vhosts:
                fe.vhost(vh).advanced.append(adv)
        for key, vh in _pairs(_grouped(maps.get("host.map", ()), False).get(token, ())):
            fe.hosts[key.rpartition(":")[0]] = vh
        for key, vh in _pairs(_grouped(maps.get("host-wildcard.map", ()), False).get(token, ())):
            fe.wildcards.append((key.rpartition(":")[0], vh))
        for name, attr in _PATH_MAPS:
            for key, value in _pairs(_grouped(maps.get(name, ()), True).get(token, ())):
                cut = key.find("/")
                if cut > 0:
                    getattr(fe.vhost(key[:cut]), attr)[key[cut:]] = value
        for vh, key, value in self._regex_by_token.get(token, ()):
            fe.vhost(vh).regex.append((key[key.find("(?:"):], value))
        return fe

    @property
    def weighted(self) -> dict[str, Counter[str]]:
        """Rule id -> how many of its 100 weight slots each backend has (counted in one pass)."""
        if self._weighted is None:
            counted = Counter(line.partition(":")[2] for line in self.weighted_lines)
            slots: dict[str, Counter[str]] = {}
            for pair, n in counted.items():
                rid, _, backend = pair.rpartition(" ")
                if rid not in slots:
                    slots[rid] = Counter()
                slots[rid][backend] += n
            self._weighted = slots
        return self._weighted

    # ------------------------------------------------------------------ answering one request

    def vhost_of(self, port: int, host: str) -> str | None:
        """The vhost a Host header selects on the frontend at ``port`` (None: no frontend there)."""
        fe = self.frontends.get(port)
        if fe is None:
            return None
        return _vhost(fe, host.split(":", 1)[0].lower())

    def resolve(self, request: Request) -> Destination:
        fe = self.frontends.get(request.port)
        if fe is None:
            return Destination(NO_LISTENER)
        if fe.facts.reject_all:
            return Destination(REJECTED)
        vh = _vhost(fe, request.host.split(":", 1)[0].lower())
        found = fe.vhosts.get(vh)
        candidate = self._candidate(vh, found, request.path)
        selected = None
        if found is not None:
            score = int(candidate.split("|", 1)[0]) if candidate else None
            for adv in found.advanced:
                if (score is None or score <= adv.score) and _matches(adv, request):
                    selected = adv.value
                    break
        selected = selected or candidate
        if not selected:
            return self._crd(request) if self.crd_routes else Destination(NOT_FOUND)
        return self.destination(selected.split("|")[1])

    def _crd(self, request: Request) -> Destination:
        """A custom Route's answer to a request no Gateway rule selected (route-crd-exact/-prefix maps)."""
        host = request.host.split(":", 1)[0].lower()
        for key in (host + request.path, "*" + request.path):
            backend = self.crd_exact.get(key)
            if backend is None:
                backend = next((be for prefix, be in self.crd_prefix if key.startswith(prefix)), None)
            if backend is not None:
                return self.crd_destination(backend)
        return Destination(NOT_FOUND)

    def crd_destination(self, backend: str) -> Destination:
        route = self.crd_routes.get(backend)
        if route is None:
            return Destination(NOT_FOUND, detail=backend)
        owner = route.route.split("/", 1)[0]
        return Destination(BACKEND, f"Route {route.route}", owner, (Backend(backend, "", 100, route.address),))

    def crd_classes(self, port: int) -> list[tuple[RequestClass, Request]]:
        """One request class per custom Route key, on the HTTP frontend at ``port``: exact keys, then
        prefixes (longest first), each with a sample request."""
        fe = self.frontends.get(port)
        if fe is None or not self.crd_routes:
            return []
        out = []
        keys = [(k, "") for k in self.crd_exact] + [(k, "*") for k, _ in self.crd_prefix]
        for key, star in keys:
            cut = key.find("/")
            host, path = key[:cut], key[cut:]
            sample = f"{PROBE}-crd.invalid" if host == "*" else host
            out.append((RequestClass(f"{fe.entry} (custom Routes)", host, path + star),
                        Request(port, sample, path + (PROBE if star else ""))))
        return out

    @functools.cached_property
    def l4(self) -> connections.L4Table:
        """The TLS/TCP entry points (``connections.L4Table``), read on first use."""
        return connections.L4Table(self.description_routing, self.frontends, self._maps)

    def _candidate(self, vh: str, found: _VHost | None, path: str) -> str | None:
        if found is not None:
            got = found.exact.get(path)
            if got is not None:
                return got
        pk = vh + path
        # a regex is anchored on its vhost's text: only those whose text begins this vhost can match
        # (``a.com:80`` begins ``a.com:8080``), tried in file order
        colon = vh.rfind(":")
        tried = sorted(item for k in range(colon + 1, len(vh) + 1) for item in self._regex_at.get(vh[:k], ()))
        for _, key, value in tried:
            regex = regexes.compiled(key)
            if regex is not None and regex.match(pk):
                return value
        if found is None:
            return None
        got = found.prefix_exact.get(path)
        if got is not None:
            return got
        best = ""
        for prefix in found.prefix:
            if len(prefix) > len(best) and path.startswith(prefix):
                best = prefix
        return found.prefix[best] if best else None

    def destination(self, rid: str) -> Destination:
        """What rule ``rid`` does with the requests it is selected for."""
        got = self._destinations.get(rid)
        if got is None:
            got = self._destinations[rid] = self._destination(rid)
        return got

    def _destination(self, rid: str) -> Destination:
        rule = self.rules.get(rid)
        label = f"{rule.kind} {rule.route} rule {rule.index}" if rule is not None else rid
        owner = rule.route.split("/", 1)[0] if rule is not None else ""
        if rid in self.redirects:
            return Destination(REDIRECT, label, owner, detail=self.redirects[rid])
        if rid in self.auth_fail:
            return Destination(ERROR, label, owner, detail="500")
        target = self.targets.get(rid)
        if target is None:
            return Destination(NOT_FOUND, label, owner)
        if target == WEIGHTED:
            shares = self.weighted.get(rid, Counter())
            backends = tuple(sorted(Backend(b, self.services.get(b, ""), n) for b, n in shares.items()))
            return Destination(BACKEND, label, owner, backends)
        if target == FAIL:
            return Destination(ERROR, label, owner, detail="500")
        return Destination(BACKEND, label, owner, (Backend(target, self.services.get(target, "")),))

    # ------------------------------------------------------------------ the request classes

    def ports(self) -> list[int]:
        return sorted(self.frontends)

    def patterns(self, port: int) -> list[str]:
        """The host patterns of the frontend at ``port``, in the order its host selection tries them."""
        fe = self.frontends.get(port)
        if fe is None:
            return []
        seen = {_pattern(vh) for vh in fe.vhosts}
        exact = sorted(h for h in seen if not h.startswith("*"))
        wild = [_pattern(vh) for _, vh in fe.wildcards if _pattern(vh) in seen]
        return [*exact, *dict.fromkeys(wild), *(["*"] if "*" in seen else [])]

    def vhost_key(self, port: int, pattern: str) -> str:
        fe = self.frontends[port]
        return f"{pattern}:{fe.facts.token}"

    def host_sample(self, port: int, pattern: str, taken: Container[str] = ()) -> str | None:
        """A Host that selects ``pattern`` on the frontend at ``port`` and is none of ``taken``."""
        if not pattern.startswith("*"):
            return pattern
        want = self.vhost_key(port, pattern)
        for n in range(4):
            label = PROBE if n == 0 else f"{PROBE}-{n}"
            host = f"{label}.invalid" if pattern == "*" else f"{label}{pattern[1:]}"
            if host not in taken and self.vhost_of(port, host) == want:
                return host
        return None

    def classes(self, port: int, pattern: str, host: str) -> list[tuple[RequestClass, Request | None, int]]:
        """The request classes of ``pattern`` on the frontend at ``port`` with a sample request each
        (sent with Host ``host``), and each one's place in match order (higher first)."""
        fe = self.frontends.get(port)
        if fe is None:
            return []
        vh = self.vhost_key(port, pattern)
        found = fe.vhosts.get(vh)
        if found is None:
            return []
        entry = fe.entry
        out: list[tuple[RequestClass, Request | None, int]] = []

        def add(path_text: str, path: str | None, value: str, rank: int, matchers: tuple[str, ...] = (),
                extra: dict[str, Any] | None = None) -> None:
            request = Request(port, host, path, **(extra or {})) if path is not None else None
            out.append((RequestClass(entry, pattern, path_text, matchers), request,
                        int(value.split("|", 1)[0]) * 10 + rank))

        for adv in found.advanced:
            request = _advanced_sample(adv)
            add(_path_text(adv.path_type, adv.path_value), request[0] if request else None, adv.value, 5,
                _matcher_texts(adv), request[1] if request else None)
        for path, value in found.exact.items():
            add(path, path, value, 4)
        for body, value in found.regex:
            sample = regexes.example(f"^{body}")
            add(f"~{body[3:-1]}", sample if sample and sample.startswith("/") else None, value, 3)
        for path, value in found.prefix_exact.items():
            add(f"{path} (prefix)", path, value, 2)
        for prefix, value in found.prefix.items():
            add(f"{prefix}*", f"{prefix}{PROBE}", value, 1)
        return out

    def rows(self) -> list[Row]:
        """Every request class with what serves it, entry points by port, each in match order."""
        out: list[Row] = []
        for port in self.ports():
            fe = self.frontends[port]
            taken = set(fe.hosts)
            for pattern in self.patterns(port):
                host = self.host_sample(port, pattern, taken) or pattern
                listener = _listener(fe.facts, pattern)
                ranked = sorted(self.classes(port, pattern, host), key=lambda c: -c[2])
                for cls, request, _ in ranked:
                    dest = self.resolve(request) if request is not None else Destination(NOT_FOUND)
                    out.append(Row(cls, dest, request, fe.facts.gateway, listener))
            for cls, request in self.crd_classes(port):
                out.append(Row(cls, self.resolve(request), request, fe.facts.gateway, ""))
        l4 = self.l4
        for port in l4.ports():
            gateways, listeners = l4.owners_of(port)
            taken = set(l4.patterns(port))
            for pattern in l4.patterns(port):
                conn = l4.sample(port, pattern, taken)
                dest = l4.resolve(conn) if conn is not None else Destination(NOT_FOUND)
                out.append(Row(l4.cls(port, pattern), dest, None, ", ".join(gateways), ", ".join(listeners), conn))
        return out

    def fingerprint(self, port: int, pattern: str) -> tuple[Any, ...] | None:
        """What decides the answers to ``pattern``'s requests on the frontend at ``port``, without the
        frontend's token: equal fingerprints in two tables answer those requests alike (``diffs``)."""
        fe = self.frontends.get(port)
        if fe is None:
            return None
        found = fe.vhosts.get(self.vhost_key(port, pattern))
        if found is None:
            return None

        key = self._rule_key
        return (fe.facts.protocol, fe.facts.reject_all,
                tuple(sorted((p, v, key(v)) for p, v in found.exact.items())),
                tuple((b, v, key(v)) for b, v in found.regex),
                tuple(sorted((p, v, key(v)) for p, v in found.prefix_exact.items())),
                tuple(sorted((p, v, key(v)) for p, v in found.prefix.items())),
                tuple((a.score, a.path_type, a.path_value, a.matchers, a.value, key(a.value)) for a in found.advanced))

    def _rule_key(self, value: str) -> tuple[Any, ...]:
        """What decides the answer of the rule a selection value names, as plain values (its map
        entries, its route, its backends' Services): equal keys, equal destinations."""
        rid = value.split("|", 2)[1]
        got = self._rule_keys.get(rid)
        if got is None:
            target = self.targets.get(rid)
            shares = self.weighted.get(rid) if target == WEIGHTED else None
            got = self._rule_keys[rid] = (
                target, self.redirects.get(rid), rid in self.auth_fail, self.rules.get(rid),
                self.services.get(target or ""), tuple(sorted((b, n, self.services.get(b)) for b, n in shares.items()))
                if shares is not None and target == WEIGHTED else ())
        return got


def _pattern(vh: str) -> str:
    return vh.rpartition(":")[0]


def _vhost(fe: _Frontend, host: str) -> str:
    got = fe.hosts.get(host)
    if got is not None:
        return got
    for suffix, vh in fe.wildcards:
        if host.endswith(suffix):
            return vh
    return f"*:{fe.facts.token}"


def _listener(facts: FrontendFacts, pattern: str) -> str:
    """The listener that admits the host pattern: the most specific hostname that covers it."""
    best: tuple[int, str] | None = None
    for lst in facts.listeners:
        name = lst.hostname
        if name is None:
            rank = 0
        elif name == pattern:
            rank = 1000
        elif name.startswith("*.") and (pattern.endswith(name[1:])):
            rank = len(name)
        else:
            continue
        if best is None or rank > best[0]:
            best = (rank, f"{lst.source} listener {lst.name}")
    return best[1] if best else ""


def _path_text(path_type: str, value: str) -> str:
    if path_type == "Exact":
        return value
    if path_type == "PathPrefix":
        return f"{value}/*" if value else "/*"
    return f"~{value}"


def _matcher_texts(adv: MatchFacts) -> tuple[str, ...]:
    out = []
    for m in adv.matchers:
        op = "=" if m.type == "Exact" else "~"
        out.append(f"method {m.value}" if m.kind == "method" else f"{m.kind} {m.name}{op}{m.value}")
    return tuple(out)


def _advanced_sample(adv: MatchFacts) -> tuple[str, dict[str, Any]] | None:
    """A request an advanced line matches: (path, Request keywords), or None."""
    if adv.path_type == "Exact":
        path: str | None = adv.path_value
    elif adv.path_type == "PathPrefix":
        path = f"{adv.path_value}/{PROBE}"
    else:
        body = adv.path_value[1:] if adv.path_value.startswith("^") else adv.path_value
        path = regexes.example(f"^(?:{body})")
    if path is None or not path.startswith("/"):
        return None
    extra: dict[str, Any] = {}
    headers: list[tuple[str, str]] = []
    query: list[str] = []
    for m in adv.matchers:
        value = m.value if m.type == "Exact" else regexes.example(m.value)
        if value is None:
            return None
        if m.kind == "method":
            extra["method"] = value
        elif m.kind == "header":
            headers.append((m.name, value))
        else:
            query.append(f"{m.name}={value}")
    if headers:
        extra["headers"] = tuple(headers)
    if query:
        extra["query"] = "&".join(query)
    return path, extra


def _matches(adv: MatchFacts, request: Request) -> bool:
    path = request.path
    if adv.path_type == "Exact":
        if path != adv.path_value:
            return False
    elif adv.path_type == "PathPrefix":
        prefix = adv.path_value
        if prefix and path != prefix and not path.startswith(prefix + "/"):
            return False
    else:
        body = adv.path_value[1:] if adv.path_value.startswith("^") else adv.path_value
        regex = regexes.compiled(f"^(?:{body})")
        if regex is None or not regex.match(path):
            return False
    for m in adv.matchers:
        if m.kind == "method":
            if request.method != m.value:
                return False
        elif m.kind == "header":
            # req.hdr() in an ACL: every occurrence, each split at its commas
            values = [v.strip() for name, raw in request.headers if name.lower() == m.name for v in raw.split(",")]
            if not any(_value_matches(m.type, m.value, v) for v in values):
                return False
        else:
            value = _query_value(request.query, m.name)
            if value is None or not _value_matches(m.type, m.value, value):
                return False
    return True


def _value_matches(kind: str, want: str, got: str) -> bool:
    if kind == "Exact":
        return got == want
    regex = regexes.compiled(want)
    return regex is not None and regex.search(got) is not None


def _query_value(query: str, name: str) -> str | None:
    """``urlp(name)``: the first occurrence's value, as sent (not decoded)."""
    for part in query.split("&"):
        key, eq, value = part.partition("=")
        if key == name and eq:
            return value
    return None


def table(description: Description) -> RoutingTable:
    return RoutingTable(description)
