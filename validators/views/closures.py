"""The closure of a change: the sub-state whose render holds everything a change can alter or depend on.

The gate renders and ``haproxy -c``s ``Overlay(closure, change)`` instead of the whole cluster, and
compares it with the render of the closure itself (the baseline: the same objects, without the change).
A closure is a read-only ``State``: it *lists* only its members of the kinds that add sections, lines,
map entries or index entries to a render (``LISTED_KINDS``), and *gets* every object from the whole
state (Services, Secrets, ConfigMaps and Namespaces are only ever looked up by name, so a member's
output is the same as in the full render).

Members of the closure of a change to X (old and new version of X both count, so the baseline and the
proposed state render the same object set):
- X itself;
- the routes X affects: X (a route); the routes whose parentRefs name X or X's ListenerSets (a
  Gateway/ListenerSet), and every route of every Gateway/ListenerSet on a port whose listener
  protocols the change alters; the routes whose references cross into X's namespace (a
  ReferenceGrant); the routes referencing a Service X targets (a BackendTLSPolicy);
- their competitors: routes that claim the same (port, hostname) of the same engine, where the oldest
  route or the best precedence wins (HTTP path maps are deduplicated per host, TLS server names and
  TCP ports are owned by the oldest route, custom Routes by the first name);
- the Gateways/ListenerSets those routes attach to, each with its Gateway and the Gateway's other
  ListenerSets (a frontend is one Gateway's listeners on one port), and, on a port several Gateways
  render together (TLS/TCP listeners, SSLPassthrough, a port the change alters), transitively every
  Gateway/ListenerSet with a listener there; the addresses the other Gateways decide (who owns
  ``:<port>``, pod ports) are computed from the whole state (``Closure.outside_listeners``);
- every Gateway/ListenerSet with an HTTP/HTTPS listener when a custom Route is included (custom Routes
  are selected inside every HTTP frontend, or get a frontend of their own when there is none);
- the EndpointSlices and BackendTLSPolicies of every Service a member route references, and the
  ReferenceGrants of every namespace a member references across.

All of it is read from ``ClosureIndex``, built once per state version (``validators.views.indexes``); the work
per review is proportional to the closure, not to the cluster. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from validators.changes import Change, Operation
from validators.objects import GATEWAY_GROUP, Obj, Ref, as_list, dig, kind_of, namespace_of, ref_of
from validators.states import Overlay, State
from validators.views import attachments, indexes

ROUTE_KINDS = attachments.ROUTE_KINDS
SOURCE_KINDS = ("Gateway", "ListenerSet")
CRD_ROUTE = "Route"
LISTED_KINDS = frozenset({*SOURCE_KINDS, *ROUTE_KINDS, CRD_ROUTE, "EndpointSlice", "ReferenceGrant",
                          "BackendTLSPolicy"})
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # as haproxy_check.render.endpoints groups slices

Key = tuple[Any, ...]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ---------------------------------------------------------------- what one object names


def parent_refs(route: Obj) -> list[Ref]:
    """The Gateways/ListenerSets a route's spec.parentRefs name (whether or not they exist)."""
    out: list[Ref] = []
    for raw in as_list(dig(route, "spec", "parentRefs")):
        kind = _str(dig(raw, "kind")) or "Gateway"
        if dig(raw, "group", default=GATEWAY_GROUP) == GATEWAY_GROUP and kind in SOURCE_KINDS:
            out.append(Ref(kind, _str(dig(raw, "namespace")) or namespace_of(route), _str(dig(raw, "name"))))
    return out


def _backend_ref_nodes(node: Any) -> Iterator[Mapping[str, Any]]:
    """Every ``backendRef``/``backendRefs[]`` mapping anywhere under a route's rules (rule backendRefs,
    backendRef-level filters, mirror and ExternalAuth filters): new filter kinds are covered without a
    list to keep up."""
    if type(node) is dict or isinstance(node, Mapping):
        for key, value in node.items():
            if key == "backendRef" and isinstance(value, Mapping):
                yield value
            elif key == "backendRefs":
                yield from (x for x in as_list(value) if isinstance(x, Mapping))
            if type(value) in (dict, list) or isinstance(value, Mapping | list):
                yield from _backend_ref_nodes(value)
    elif isinstance(node, list):
        for value in node:
            if type(value) in (dict, list) or isinstance(value, Mapping | list):
                yield from _backend_ref_nodes(value)


def referenced(obj: Obj) -> tuple[set[tuple[str, str]], set[str]]:
    """(Services a route names as (namespace, name), namespaces it or a listener reference across)."""
    own = namespace_of(obj)
    services: set[tuple[str, str]] = set()
    spaces: set[str] = set()
    if kind_of(obj) in SOURCE_KINDS:
        for lst in as_list(dig(obj, "spec", "listeners")):
            for cert in as_list(dig(lst, "tls", "certificateRefs")):
                spaces.add(_str(dig(cert, "namespace")) or own)
        spaces |= _client_ca_spaces(obj, own)
    else:
        for raw in _backend_ref_nodes(dig(obj, "spec", "rules")):
            ns = _str(dig(raw, "namespace")) or own
            spaces.add(ns)
            if _str(dig(raw, "group")) == "" and (_str(dig(raw, "kind")) or "Service") == "Service":
                services.add((ns, _str(dig(raw, "name"))))
    spaces.discard(own)
    return services, spaces


def _client_ca_spaces(gateway: Obj, own: str) -> set[str]:
    """Namespaces of the frontend mTLS CAs (spec.tls.frontend default and perPort): a ReferenceGrant
    there decides whether the Gateway's port accepts traffic."""
    frontend = dig(gateway, "spec", "tls", "frontend")
    blocks = [dig(frontend, "default", "validation"),
              *(dig(p, "tls", "validation") for p in as_list(dig(frontend, "perPort")))]
    return {_str(dig(ref, "namespace")) or own for block in blocks
            for ref in as_list(dig(block, "caCertificateRefs"))}


def listener_ports(source: Obj) -> set[int]:
    return {p for lst in as_list(dig(source, "spec", "listeners"))
            if isinstance(p := dig(lst, "port"), int) and not isinstance(p, bool)}


def _http_source(source: Obj) -> bool:
    return any(dig(lst, "protocol") in ("HTTP", "HTTPS") for lst in as_list(dig(source, "spec", "listeners")))


def _binds(source: Obj) -> bool:
    return any(dig(lst, "protocol") in ("HTTP", "HTTPS", "TLS") for lst in as_list(dig(source, "spec", "listeners")))


def competitor_keys(route: Obj, state: State) -> set[Key]:
    """What a route claims where another route could win instead: (engine, port, host) per attachment
    for Gateway API routes, the host for custom Routes. An unattached route claims nothing."""
    kind = kind_of(route)
    if kind == CRD_ROUTE:
        hosts = [h.lower() for h in as_list(dig(route, "spec", "hostnames")) if isinstance(h, str)]
        return {("crd", h) for h in hosts or ["*"]}
    if kind not in ROUTE_KINDS:
        return set()
    engine = {"HTTPRoute": "http", "GRPCRoute": "http", "TLSRoute": "tls"}.get(kind, "l4")
    atts, _ = attachments.attach(route, state)
    if engine == "l4":
        return {(kind, a.listener.port) for a in atts}
    return {(engine, a.listener.port, h) for a in atts for h in (a.hostnames or ("*",))}


def shadowed_keys(key: Key) -> list[Key]:
    """The HTTP claims a more specific host takes requests from: an exact host or a wildcard is chosen
    before every wildcard that covers it and before the any-host ``*`` (``a.b.c``: ``*.b.c``, ``*.c``,
    ``*``). Their routes are members too, so that the closure's routing tables show what such a host's
    requests did before and after (haproxy_check.traffic)."""
    if len(key) != 3 or key[0] != "http" or key[2] == "*":
        return []
    labels = str(key[2]).removeprefix("*.").split(".")
    start = 0 if str(key[2]).startswith("*.") else 1
    out: list[Key] = [(key[0], key[1], "*." + ".".join(labels[n:])) for n in range(start, len(labels))]
    return [k for k in out if k != key] + [(key[0], key[1], "*")]


def port_signature(state: State, ports: Iterable[int]) -> dict[int, tuple[Any, ...]]:
    """Per port, what decides which listeners there are rendered and how (protocols, TLS modes)."""
    wanted = set(ports)
    out: dict[int, list[Any]] = {p: [] for p in wanted}
    for lst in attachments.declared_listeners(state):
        if lst.port in wanted:
            out[lst.port].append((lst.protocol, lst.tls_mode, lst.conflicted, bool(lst.dropped), lst.source))
    return {p: tuple(sorted(v, key=repr)) for p, v in out.items()}


# ---------------------------------------------------------------- the per-version index


@dataclass(slots=True)
class ClosureIndex:
    """Reverse lookups over one state version, each built in one pass over the objects."""

    ports: MutableMapping[Ref, set[int]] = field(default_factory=dict)  # listener ports of a Gateway/ListenerSet
    on_port: MutableMapping[int, set[Ref]] = field(default_factory=dict)
    listener_sets: MutableMapping[Ref, set[Ref]] = field(default_factory=dict)  # Gateway -> ListenerSets naming it
    children: MutableMapping[Ref, set[Ref]] = field(default_factory=dict)  # Gateway/ListenerSet -> routes naming it
    keys: MutableMapping[Ref, set[Key]] = field(default_factory=dict)  # route -> its competitor keys
    claimants: MutableMapping[Key, set[Ref]] = field(default_factory=dict)
    users: MutableMapping[tuple[str, str], set[Ref]] = field(default_factory=dict)  # Service -> routes naming it
    across: MutableMapping[tuple[str, str], set[Ref]] = field(default_factory=dict)  # (from ns, to ns) -> objects
    slices: MutableMapping[tuple[str, str], set[Ref]] = field(default_factory=dict)  # Service -> EndpointSlices
    policies: MutableMapping[tuple[str, str], set[Ref]] = field(default_factory=dict)  # Service -> BackendTLSPolicies
    grants: MutableMapping[str, set[Ref]] = field(default_factory=dict)  # namespace -> ReferenceGrants
    http_sources: set[Ref] = field(default_factory=set)
    bind_sources: set[Ref] = field(default_factory=set)  # with an HTTP/HTTPS/TLS listener: a frontend bind
    # routes whose parents have a Selector listener: their keys also read Namespace labels
    selector_routes: set[Ref] = field(default_factory=set)


def _add(table: MutableMapping[Any, set[Ref]], key: Any, ref: Ref) -> None:
    table.setdefault(key, set()).add(ref)


@dataclass(frozen=True, slots=True)
class _RouteFacts:
    """What the index needs from one route object, apart from its attachment."""

    ref: Ref
    parents: tuple[Ref, ...]
    services: frozenset[tuple[str, str]]
    spaces: frozenset[str]


# Per object identity: the cluster snapshot shares unchanged objects between state versions, so a new
# version recomputes only what changed. Entries hold the object (a hit is checked with ``is``) and are
# replaced by each build's set, so deleted objects are not kept alive.
_FACTS: dict[int, tuple[Obj, _RouteFacts]] = {}
_KEYS: dict[int, tuple[Obj, tuple[Any, ...], set[Key]]] = {}


def _facts(route: Obj, seen: dict[int, tuple[Obj, _RouteFacts]]) -> _RouteFacts:
    hit = _FACTS.get(id(route))
    if hit is None or hit[0] is not route:
        services, spaces = referenced(route)
        hit = (route, _RouteFacts(ref_of(route), tuple(parent_refs(route)), frozenset(services), frozenset(spaces)))
    seen[id(route)] = hit
    return hit[1]


def _inputs(facts: _RouteFacts, by_source: Mapping[Ref, tuple[attachments.Listener, ...]],
            ) -> tuple[tuple[attachments.Listener, ...], ...]:
    """What a route's attachment reads besides the route: the listeners of the parents it names."""
    return tuple(by_source.get(p, ()) for p in facts.parents)


def _reads_labels(inputs: tuple[tuple[attachments.Listener, ...], ...]) -> bool:
    return any(x.namespaces_from == "Selector" for group in inputs for x in group)


def _keys(route: Obj, state: State, seen: dict[int, tuple[Obj, tuple[Any, ...], set[Key]]],
          inputs: tuple[tuple[attachments.Listener, ...], ...]) -> set[Key]:
    """``competitor_keys``, reused while the listeners of the route's parents are equal (attachment
    reads nothing else, except namespace labels for Selector listeners: those are never reused).
    ``inputs`` come from ``attachments.listeners_by_source(state)``, looked up once per build rather
    than once per route (10,000 index lookups cost more than the keys they guard)."""
    hit = _KEYS.get(id(route))
    if hit is None or hit[0] is not route or hit[1] != inputs:
        hit = (route, inputs, competitor_keys(route, state))
    if not _reads_labels(inputs):
        seen[id(route)] = hit
    return hit[2]


def build_index(state: State) -> ClosureIndex:
    """The index of ``state``: patched from the previous version's when ``state`` links to it (a
    ``webhook.cluster`` snapshot names the snapshot before it and the objects changed since) and that
    one is still cached, in O(changed objects); scanned from scratch otherwise."""
    if isinstance(state, Overlay):
        # A review's proposed state, or a ``routegate check`` input against all the others: the base's
        # index with one object's contribution replaced, layered over the base's tables (O(change) in
        # time and memory, however many overlays of one base are alive at once).
        return patch_index(index_of(state.base), state.base, state, [state.change.ref], layered=True)
    link = indexes.prior_link(state)
    if link is not None:
        before, changed = link
        prior = indexes.peek(before, "closure")
        if isinstance(prior, ClosureIndex):
            return patch_index(prior, before, state, changed)
    return scan_index(state)


def scan_index(state: State) -> ClosureIndex:
    """The index of ``state`` from all its objects (per-object facts reused by identity)."""
    global _FACTS, _KEYS
    idx = ClosureIndex()
    for kind in SOURCE_KINDS:
        for source in state.list(kind):
            ref = ref_of(source)
            idx.ports[ref] = listener_ports(source)
            for port in idx.ports[ref]:
                _add(idx.on_port, port, ref)
            if _http_source(source):
                idx.http_sources.add(ref)
            if _binds(source):
                idx.bind_sources.add(ref)
            for space in referenced(source)[1]:
                _add(idx.across, (ref.namespace, space), ref)
            if kind == "ListenerSet" and (parent := attachments.listener_set_parent(source)) is not None:
                _add(idx.listener_sets, parent, ref)
    facts_seen: dict[int, tuple[Obj, _RouteFacts]] = {}
    keys_seen: dict[int, tuple[Obj, tuple[Any, ...], set[Key]]] = {}
    by_source = attachments.listeners_by_source(state)
    for kind in (*ROUTE_KINDS, CRD_ROUTE):
        for route in state.list(kind):
            facts = _facts(route, facts_seen)
            ref = facts.ref
            for parent in facts.parents:
                _add(idx.children, parent, ref)
            inputs = _inputs(facts, by_source)
            keys = _keys(route, state, keys_seen, inputs)
            idx.keys[ref] = keys
            if _reads_labels(inputs):
                idx.selector_routes.add(ref)
            for key in keys:
                _add(idx.claimants, key, ref)
            for service in facts.services:
                _add(idx.users, service, ref)
            for space in facts.spaces:
                _add(idx.across, (ref.namespace, space), ref)
    _FACTS, _KEYS = facts_seen, keys_seen
    for eps in state.list("EndpointSlice"):
        owner = dig(eps, "metadata", "labels", SERVICE_NAME_LABEL)
        if isinstance(owner, str):
            _add(idx.slices, (namespace_of(eps), owner), ref_of(eps))
    for policy in state.list("BackendTLSPolicy"):
        for target in _policy_targets(policy):
            _add(idx.policies, target, ref_of(policy))
    for grant in state.list("ReferenceGrant"):
        _add(idx.grants, namespace_of(grant), ref_of(grant))
    return idx


_MISSING: Any = object()
_GONE: Any = object()


class _Layer(MutableMapping[Any, Any]):
    """A table read through to a base table except for the keys set or deleted on it: an Overlay's
    index costs the keys its one change touches, not a copy of every table."""

    __slots__ = ("_base", "_over")

    def __init__(self, base: Mapping[Any, Any]) -> None:
        self._base = base
        self._over: dict[Any, Any] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        got = self._over.get(key, _MISSING)
        if got is _MISSING:
            return self._base.get(key, default)
        return default if got is _GONE else got

    def __getitem__(self, key: Any) -> Any:
        got = self.get(key, _MISSING)
        if got is _MISSING:
            raise KeyError(key)
        return got

    def __setitem__(self, key: Any, value: Any) -> None:
        self._over[key] = value

    def __delitem__(self, key: Any) -> None:
        if self.get(key, _MISSING) is _MISSING:
            raise KeyError(key)
        self._over[key] = _GONE

    def __iter__(self) -> Iterator[Any]:
        over = self._over
        yield from (k for k in self._base if k not in over)
        yield from (k for k, v in over.items() if v is not _GONE)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Patch:
    """A copy of a predecessor's index that shares every set it does not change (copy on first write):
    the predecessor stays exactly as it was, for the reviews still reading it. ``layered``: the tables
    are layers over the predecessor's (for short-lived derived states) instead of shallow copies (for
    the next snapshot, which becomes the predecessor of the one after it)."""

    def __init__(self, prior: ClosureIndex, *, layered: bool = False) -> None:
        def table(of: MutableMapping[Any, Any]) -> MutableMapping[Any, Any]:
            return _Layer(of) if layered else dict(of)

        self.idx = ClosureIndex(
            ports=table(prior.ports), on_port=table(prior.on_port), listener_sets=table(prior.listener_sets),
            children=table(prior.children), keys=table(prior.keys), claimants=table(prior.claimants),
            users=table(prior.users), across=table(prior.across), slices=table(prior.slices),
            policies=table(prior.policies), grants=table(prior.grants), http_sources=set(prior.http_sources),
            bind_sources=set(prior.bind_sources), selector_routes=set(prior.selector_routes))
        self._owned: set[tuple[int, Any]] = set()

    def add(self, table: MutableMapping[Any, set[Ref]], key: Any, ref: Ref) -> None:
        owned = (id(table), key)
        if owned in self._owned:
            table.setdefault(key, set()).add(ref)
        else:
            table[key] = {*table.get(key, ()), ref}
            self._owned.add(owned)

    def discard(self, table: MutableMapping[Any, set[Ref]], key: Any, ref: Ref) -> None:
        got = table.get(key)
        if got is None or ref not in got:
            return
        owned = (id(table), key)
        if owned not in self._owned:
            got = table[key] = set(got)
            self._owned.add(owned)
        got.discard(ref)
        if not got:
            del table[key]  # a scan never holds an empty set

    def source(self, ref: Ref, obj: Obj, add: bool) -> None:
        """Add (or take out) what one Gateway/ListenerSet contributes."""
        idx, put = self.idx, self.add if add else self.discard
        ports = listener_ports(obj)
        for port in ports:
            put(idx.on_port, port, ref)
        if add:
            idx.ports[ref] = ports
            if _http_source(obj):
                idx.http_sources.add(ref)
            if _binds(obj):
                idx.bind_sources.add(ref)
        else:
            idx.ports.pop(ref, None)
            idx.http_sources.discard(ref)
            idx.bind_sources.discard(ref)
        for space in referenced(obj)[1]:
            put(idx.across, (ref.namespace, space), ref)
        if ref.kind == "ListenerSet" and (parent := attachments.listener_set_parent(obj)) is not None:
            put(idx.listener_sets, parent, ref)

    def route_facts(self, facts: _RouteFacts, add: bool) -> None:
        idx, put, ref = self.idx, self.add if add else self.discard, facts.ref
        for parent in facts.parents:
            put(idx.children, parent, ref)
        for service in facts.services:
            put(idx.users, service, ref)
        for space in facts.spaces:
            put(idx.across, (ref.namespace, space), ref)

    def route_keys(self, ref: Ref, route: Obj | None, facts: _RouteFacts | None, state: State,
                   by_source: Mapping[Ref, tuple[attachments.Listener, ...]]) -> None:
        """Replace a route's competitor keys with those it has in ``state`` (none when deleted)."""
        idx = self.idx
        for key in idx.keys.pop(ref, ()):
            self.discard(idx.claimants, key, ref)
        idx.selector_routes.discard(ref)
        if route is None or facts is None:
            return
        inputs = _inputs(facts, by_source)
        seen: dict[int, tuple[Obj, tuple[Any, ...], set[Key]]] = {}
        keys = idx.keys[facts.ref] = _keys(route, state, seen, inputs)
        _KEYS.update(seen)
        for key in keys:
            self.add(idx.claimants, key, facts.ref)
        if _reads_labels(inputs):
            idx.selector_routes.add(facts.ref)


def _forget(obj: Obj) -> None:
    """Drop a replaced object's per-identity entries (a scan would have dropped them)."""
    for cache in (_FACTS, _KEYS):
        hit = cache.get(id(obj))
        if hit is not None and hit[0] is obj:
            cache.pop(id(obj), None)


def patch_index(prior: ClosureIndex, before: State, after: State, changed: Iterable[Ref], *,
                layered: bool = False) -> ClosureIndex:
    """``scan_index(after)`` from ``prior = scan_index(before)`` and the refs whose objects differ
    between the two: each changed object's contribution is taken out and put back from its new version,
    and the competitor keys of the routes whose parents' listeners changed (or, after a Namespace
    change, that read namespace labels) are recomputed. O(changed objects and the routes they move)."""
    changed = [r for r in changed if r.kind in LISTED_KINDS or r.kind == "Namespace"]
    if not changed:
        return prior  # nothing the index reads changed
    patch = _Patch(prior, layered=layered)
    idx = patch.idx
    by_before = attachments.listeners_by_source(before)
    by_after = attachments.listeners_by_source(after)
    moved = {s for s in by_before.keys() | by_after.keys() if by_before.get(s) != by_after.get(s)}
    rekey: set[Ref] = set()
    for source in moved:
        rekey |= prior.children.get(source, set())
    if any(r.kind == "Namespace" for r in changed):
        rekey |= prior.selector_routes
    for ref in changed:
        old = before.get(ref.kind, ref.namespace, ref.name)
        new = after.get(ref.kind, ref.namespace, ref.name)
        if old is new:
            continue
        if ref.kind in SOURCE_KINDS:
            for obj, add in ((old, False), (new, True)):
                if obj is not None:
                    patch.source(ref_of(obj), obj, add)
        elif ref.kind in ROUTE_KINDS or ref.kind == CRD_ROUTE:
            rekey.discard(ref)
            facts = None
            if old is not None:
                patch.route_facts(_facts(old, {}), add=False)
                _forget(old)
            if new is not None:
                seen: dict[int, tuple[Obj, _RouteFacts]] = {}
                facts = _facts(new, seen)
                _FACTS.update(seen)
                patch.route_facts(facts, add=True)
            patch.route_keys(ref, new, facts, after, by_after)
        elif ref.kind == "EndpointSlice":
            for obj, put in ((old, patch.discard), (new, patch.add)):
                owner = dig(obj, "metadata", "labels", SERVICE_NAME_LABEL) if obj is not None else None
                if obj is not None and isinstance(owner, str):
                    put(idx.slices, (namespace_of(obj), owner), ref_of(obj))
        elif ref.kind == "BackendTLSPolicy":
            for obj, put in ((old, patch.discard), (new, patch.add)):
                for target in _policy_targets(obj) if obj is not None else ():
                    put(idx.policies, target, ref_of(obj))  # type: ignore[arg-type]
        elif ref.kind == "ReferenceGrant":
            for obj, put in ((old, patch.discard), (new, patch.add)):
                if obj is not None:
                    put(idx.grants, namespace_of(obj), ref_of(obj))
    for ref in rekey:
        route = after.get(ref.kind, ref.namespace, ref.name)
        patch.route_keys(ref, route, _facts(route, {}) if route is not None else None, after, by_after)
    return idx


def _policy_targets(policy: Obj) -> set[tuple[str, str]]:
    return {(namespace_of(policy), _str(dig(t, "name"))) for t in as_list(dig(policy, "spec", "targetRefs"))
            if _str(dig(t, "group")) == "" and _str(dig(t, "kind")) == "Service"}


def index_of(state: State) -> ClosureIndex:
    return indexes.index(state, "closure", build_index)


# ---------------------------------------------------------------- the closure view


class Closure:
    """A read-only State: the members of ``LISTED_KINDS`` among ``base``'s objects, every other kind
    (and every lookup by name) straight from ``base``."""

    def __init__(self, base: State, members: Iterable[Ref]) -> None:
        self._base = base
        by_kind: dict[str, list[Ref]] = {}
        for ref in set(members):
            if ref.kind in LISTED_KINDS:
                by_kind.setdefault(ref.kind, []).append(ref)
        self._refs = {kind: sorted(refs, key=lambda r: (r.namespace, r.name)) for kind, refs in by_kind.items()}
        self.members = frozenset(r for refs in self._refs.values() for r in refs)
        digest = hashlib.sha256("\n".join(sorted(map(str, self.members))).encode()).hexdigest()[:16]
        self._version = f"{base.version}#closure:{digest}"
        self._lists: dict[str, list[Obj]] = {}
        self._outside: dict[tuple[int, ...], tuple[attachments.Listener, ...]] = {}

    @property
    def base(self) -> State:
        return self._base

    @property
    def version(self) -> str:
        return self._version

    def list(self, kind: str) -> Sequence[Obj]:
        if kind not in LISTED_KINDS:
            return self._base.list(kind)
        got = self._lists.get(kind)
        if got is None:
            got = self._lists[kind] = [o for r in self._refs.get(kind, ())
                                       if (o := self._base.get(r.kind, r.namespace, r.name)) is not None]
        return got

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._base.get(kind, namespace, name)

    def outside_listeners(self, http_ports: Sequence[int]) -> tuple[attachments.Listener, ...]:
        """The listeners of the whole state's Gateways/ListenerSets that are not members: what the
        pod-port assignment (``haproxy_check.render.isolation``) counts besides the listeners a render
        of this view (or of a view over it that changes members only) lists, so that every member
        Gateway gets the address the full render gives it. A ListenerSet is a member whenever its
        parent Gateway is (``_frontend_sources``), so changing a member never changes an outsider's
        listeners."""
        ports = tuple(http_ports)
        got = self._outside.get(ports)
        if got is None:
            got = self._outside[ports] = tuple(x for x in attachments.listeners(self._base, http_ports=ports)
                                               if x.source not in self.members)
        return got

    def __len__(self) -> int:
        return len(self.members)


def closure(state: State, change: Change) -> Closure:
    """The closure of ``change`` over ``state`` (the state *without* the change: the baseline view).

    ``Overlay(closure(state, change), change)`` is the proposed view; both list the same objects."""
    return Closure(state, members(state, change))


def members(state: State, change: Change) -> set[Ref]:
    idx = index_of(state)
    x = change.ref
    versions = [o for o in (state.get(x.kind, x.namespace, x.name),
                            None if change.operation is Operation.DELETE else change.obj) if o is not None]
    proposed: State = Overlay(state, change)
    out: set[Ref] = {x}
    routes: set[Ref] = set()  # routes whose competitors count
    sources: set[Ref] = set()
    rekey: list[Obj] = []  # routes whose competitor keys the change may alter
    changed_ports: set[int] = set()  # ports where X changes what is rendered: every source there counts
    if x.kind in ROUTE_KINDS or x.kind == CRD_ROUTE:
        routes.add(x)
        rekey += versions
    elif x.kind in SOURCE_KINDS:
        sources.add(x)
        affected = set(idx.children.get(x, ()))
        for ls in idx.listener_sets.get(x, ()):
            sources.add(ls)
            affected |= idx.children.get(ls, set())
        for obj in versions:
            if x.kind == "ListenerSet" and (parent := attachments.listener_set_parent(obj)) is not None:
                sources.add(parent)
        ports = set().union(*(listener_ports(o) for o in versions), *(idx.ports.get(s, set()) for s in sources))
        before, after = port_signature(state, ports), port_signature(proposed, ports)
        if len({attachments.age_key(o) for o in versions}) > 1:
            changed_ports |= ports  # X's age moved: which Gateway owns each of its ports may change
        for port in ports:
            if before[port] != after[port]:  # listener protocols/modes changed: every route there may move
                changed_ports.add(port)
                for source in idx.on_port.get(port, ()):
                    sources.add(source)
                    affected |= idx.children.get(source, set())
        routes |= affected
        rekey += [o for r in affected if (o := state.get(r.kind, r.namespace, r.name)) is not None]
    elif x.kind == "ReferenceGrant":
        froms = {_str(dig(f, "namespace")) for o in versions for f in as_list(dig(o, "spec", "from"))}
        for space in froms:
            for ref in idx.across.get((space, x.namespace), ()):
                (sources if ref.kind in SOURCE_KINDS else routes).add(ref)
    elif x.kind == "BackendTLSPolicy":
        for obj in versions:
            for target in _policy_targets(obj):
                routes |= idx.users.get(target, set())
    competitors: set[Ref] = set()
    for ref in routes:
        for key in idx.keys.get(ref, ()):
            for claimed in (key, *shadowed_keys(key)):
                competitors |= idx.claimants.get(claimed, set())
    for obj in rekey:  # keys of the proposed versions: X's new hostnames, routes under new listeners
        for key in competitor_keys(obj, proposed if x.kind in SOURCE_KINDS else state):
            for claimed in (key, *shadowed_keys(key)):
                competitors |= idx.claimants.get(claimed, set())
    routes |= competitors
    passing_now, passing_then = passthrough_routes(state), _proposed_passthrough(state, proposed, change)
    shared = _shared(state, passing_now) | _shared(proposed, passing_then) | changed_ports
    passing: dict[int, set[Ref]] = {}
    for found in (passing_now, passing_then):
        for port, refs in found.items():
            passing.setdefault(port, set()).update(refs)
    while True:
        route_objs = _objects(state, routes, versions, x)
        for obj in route_objs:
            for parent in parent_refs(obj):
                sources.add(parent)
        if any(kind_of(o) == CRD_ROUTE for o in route_objs):
            sources |= idx.http_sources
        sources = _frontend_sources(sources, idx, state, versions, x, shared)
        if not any(s in idx.http_sources for s in sources - {x}):
            # haproxy -c refuses a configuration without any listener ("will not start", exit 2): unless
            # a Gateway/ListenerSet other than X (which the change may remove) has an HTTP/HTTPS listener
            # (the HTTP engine always binds its ports), an unrelated one from the cluster keeps a bind in
            # both the baseline and the proposed closure, as the full render has.
            anchors = sorted(idx.http_sources - sources - {x}) or sorted(idx.bind_sources - sources - {x})
            if anchors:
                sources = _frontend_sources(sources | {anchors[0]}, idx, state, versions, x, shared)
        # An SSLPassthrough HTTPRoute on a port the closure renders decides who binds the port
        # (``tlsroutes.passthrough_on``) and claims server names there: a member, with its competitors.
        extra = {r for p in _source_ports(sources, idx, versions, x) for r in passing.get(p, ())} - routes
        if not extra:
            break
        routes |= extra
        for ref in extra:
            for key in idx.keys.get(ref, ()):
                routes |= idx.claimants.get(key, set())
    out |= routes | sources
    spaces: set[str] = set()
    for obj in [*route_objs, *_objects(state, sources, versions, x)]:
        services, across = referenced(obj)
        spaces |= across
        for service in services:
            out |= idx.slices.get(service, set()) | idx.policies.get(service, set())
    for space in spaces:
        out |= idx.grants.get(space, set())
    if x.kind == "ReferenceGrant":
        out |= idx.grants.get(x.namespace, set())
    return out


def _objects(state: State, refs: Iterable[Ref], versions: Sequence[Obj], x: Ref) -> list[Obj]:
    """The objects behind refs, with both versions of the changed object."""
    refs = set(refs)
    out = [o for r in refs if r != x and (o := state.get(r.kind, r.namespace, r.name)) is not None]
    return [*out, *versions] if x in refs else out


def _gateway_of(ref: Ref, state: State, versions: Sequence[Obj], x: Ref) -> set[Ref]:
    """The Gateway(s) whose frontends a Gateway/ListenerSet's listeners are rendered in: itself, or the
    parent a ListenerSet names (both versions' parents for the changed one)."""
    if ref.kind == "Gateway":
        return {ref}
    objs = list(versions) if ref == x else [o for o in (state.get(ref.kind, ref.namespace, ref.name),) if o is not None]
    return {p for o in objs if (p := attachments.listener_set_parent(o)) is not None}


def _frontend_sources(sources: set[Ref], idx: ClosureIndex, state: State, versions: Sequence[Obj], x: Ref,
                      shared: Set[int]) -> set[Ref]:
    """What renders the frontends of ``sources`` as the full render does (DELTA-CHECK.md, rule 4).

    A frontend is one Gateway's listeners on one port: the Gateway's own and those of every ListenerSet
    of it, so each source brings its Gateway and all the Gateway's ListenerSets. What else a frontend
    reads of the other Gateways on its port (which one owns ``:<port>``, the pod ports) is computed from
    the whole state (``Closure.outside_listeners``). On a ``shared`` port the other sources matter
    themselves (TLS/TCP listeners, passthrough sharing, a port X changes): there every source on the
    port is a member, transitively, as for one frontend per port."""
    out: set[Ref] = set()
    todo = list(sources)
    while todo:
        ref = todo.pop()
        if ref in out:
            continue
        out.add(ref)
        for gateway in _gateway_of(ref, state, versions, x):
            todo.append(gateway)
            todo.extend(idx.listener_sets.get(gateway, ()))
        ports = set(idx.ports.get(ref, set()))
        if ref == x:
            for obj in versions:
                ports |= listener_ports(obj)
        for port in ports & shared:
            todo.extend(idx.on_port.get(port, ()))
    return out


def shared_ports(state: State) -> frozenset[int]:
    """Ports whose rendering the Gateways there decide together: a listener other than HTTP/HTTPS (the
    TLS and TCP engines build one frontend per port across all Gateways, and decide whether the HTTP
    engine keeps the port), or an SSLPassthrough HTTPRoute attached there (the port's bind moves to a
    TLS frontend). Per state version; an Overlay of a route reuses its base's listener part."""
    return _shared(state, passthrough_routes(state))


def _shared(state: State, passing: Mapping[int, frozenset[Ref]]) -> frozenset[int]:
    listed = indexes.index_reading(state, "closure-shared-ports", attachments.LISTENER_KINDS, _non_http_ports)
    return listed | frozenset(passing) if passing else listed


def passthrough_routes(state: State) -> Mapping[int, frozenset[Ref]]:
    """Listener port -> the HTTPRoutes with an SSLPassthrough rule attached there, once per state version."""
    return indexes.index(state, "ssl-passthrough-ports", _passthrough_ports)


def _passthrough_ports(state: State) -> dict[int, frozenset[Ref]]:
    out: dict[int, set[Ref]] = {}
    for ref in indexes.refs_by_key(state, "ssl-passthrough-routes", ("HTTPRoute",), _passes_through).get(True):
        route = state.get(ref.kind, ref.namespace, ref.name)
        if route is not None:
            _add_passthrough(out, ref, route, state)
    return {port: frozenset(refs) for port, refs in out.items()}


def _add_passthrough(out: dict[int, set[Ref]], ref: Ref, route: Obj, state: State) -> None:
    for a in attachments.attach(route, state)[0]:
        out.setdefault(a.listener.port, set()).add(ref)


def _proposed_passthrough(state: State, proposed: State, change: Change) -> Mapping[int, frozenset[Ref]]:
    """``passthrough_routes(proposed)``. For a route change it is the stored state's with X's entries
    redone (a route attaches by its own parentRefs and the listeners, never by another route), so a
    review does not attach every SSLPassthrough route of the cluster again; any other change may move
    the listeners, and is asked of the proposed state itself."""
    x = change.ref
    if not (x.kind in ROUTE_KINDS or x.kind == CRD_ROUTE):
        return passthrough_routes(proposed)
    out = {port: set(refs) - {x} for port, refs in passthrough_routes(state).items()}
    new = None if change.operation is Operation.DELETE else change.obj
    if new is not None and x.kind == "HTTPRoute" and _passes_through(new):
        _add_passthrough(out, x, new, proposed)
    return {port: frozenset(refs) for port, refs in out.items() if refs}


def _source_ports(sources: Iterable[Ref], idx: ClosureIndex, versions: Sequence[Obj], x: Ref) -> set[int]:
    ports: set[int] = set()
    for ref in sources:
        ports |= idx.ports.get(ref, set())
        if ref == x:
            for obj in versions:
                ports |= listener_ports(obj)
    return ports


def _non_http_ports(state: State) -> frozenset[int]:
    return frozenset(x.port for x in attachments.declared_listeners(state) if x.protocol not in ("HTTP", "HTTPS"))


def _passes_through(route: Obj) -> tuple[bool, ...]:
    """``(True,)`` for an HTTPRoute with an SSLPassthrough ExtensionRef filter (as
    ``haproxy_check.render.l4.tlsroutes.ssl_passthrough_rules`` finds them)."""
    found = any(dig(f, "type") == "ExtensionRef" and dig(f, "extensionRef", "kind") == "SSLPassthrough"
                for rule in as_list(dig(route, "spec", "rules")) for f in as_list(dig(rule, "filters")))
    return (True,) if found else ()
