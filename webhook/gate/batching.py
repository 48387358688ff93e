"""Concurrent reviews judged together: which pending route changes may share one render and one
``haproxy -c``, and the state that render sees.

Each concurrent review is judged against the same stored state ``S`` *without* the other pending
changes (none of them is stored yet). Checking several together is only equivalent when no change
can alter what another one's own review renders. The rule (argued in docs/DELTA-CHECK.md, "Reviews
checked together"): only route changes are batched (a route's CREATE/UPDATE attached to a listener, a
route's DELETE whose stored version is attached, a custom Route's CREATE/UPDATE/DELETE), and two of
them go into one batch only when

- they are of one sort: Gateway API routes with Gateway API routes, custom Routes with custom Routes,
  and a custom Route claiming the any-host ``*`` with none (custom Routes answer what no Gateway rule
  selected and fall back to ``*``: routes no custom Route's closure lists);
- they are different objects;
- neither object is a member of the other's closure (so every member a review renders is in its
  stored version in the combined render too);
- they claim no common competitor key (a CREATE is in no index of ``S``, so its closure cannot list
  a new competitor: the keys of both versions are compared directly);
- the route members of their closures are disjoint (a route shared by two closures could be rendered
  differently next to both changes than next to either one);
- custom Routes: no request header name (any spelling) set by one's closure is set by the other's
  (one ``set-header`` line per name for all custom Routes, spelled as the first Route spells it).

A DELETE claims what its stored version reaches: its closure over ``S`` and its competitor keys. A
custom Route's DELETE whose closure holds no HTTP Gateway goes alone (its lone closure may bind nothing,
and then the whole state decides its review: docs/DELTA-CHECK.md, rule 11).

Shared members are then only Gateways, ListenerSets, EndpointSlices, ReferenceGrants and
BackendTLSPolicies that no change in the batch alters, read the same way by every render.
Pure: no I/O, no rendering.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from validators.changes import Change, Operation
from validators.objects import Obj, Ref, dig, name_of, namespace_of
from validators.states import State
from validators.views import attachments, closures

ROUTE_KINDS = frozenset(attachments.ROUTE_KINDS)
CUSTOM_ROUTE = closures.CRD_ROUTE  # routegate.io Route: no attachment, selected in every HTTP frontend
CLAIMED_ROUTES = ROUTE_KINDS | {CUSTOM_ROUTE}  # the routes two closures may not share


@dataclass(frozen=True, slots=True)
class Claim:
    """What a pending route change reaches: its object, its closure's members, its competitor keys."""

    ref: Ref
    members: frozenset[Ref]
    keys: frozenset[closures.Key]
    sort: str = "route"  # only claims of one sort go together; "alone": with none

    def goes_with(self, sort: str) -> bool:
        return self.sort == sort and sort != "alone"

    @property
    def routes(self) -> frozenset[Ref]:
        return frozenset(m for m in self.members if m.kind in CLAIMED_ROUTES)


def batchable(change: Change) -> bool:
    """A change that may be checked together with others (attachment is checked by the gate): a route's
    or a custom Route's CREATE, UPDATE or DELETE (a DELETE's claim is its stored version's: its closure
    and keys)."""
    return change.ref.kind in CLAIMED_ROUTES


def http_sources_among(members: Iterable[Ref], state: State) -> set[Ref]:
    """The Gateways of ``members`` with an HTTP or HTTPS listener: the HTTP engine always binds their ports,
    so a closure holding one binds something (a ListenerSet binds only through its Gateway, so it does not
    count on its own)."""
    idx = closures.index_of(state)
    return {m for m in members if m.kind == "Gateway" and m in idx.http_sources}


def _header_keys(route: Obj) -> set[closures.Key]:
    """A custom Route's request header names, lower-cased: the render writes one ``set-header`` line per
    name for all custom Routes, spelled as the first Route (by namespace/name) spells it, so two changes
    setting one header name could each be rendered with the other's spelling."""
    headers = dig(route, "spec", "requestHeaders")
    names = [dig(h, "name") for h in headers] if isinstance(headers, list) else []
    return {("crd-header", n.lower()) for n in names if isinstance(n, str)}


def claim_of(change: Change, state: State) -> Claim:
    """The claim of ``change`` over ``state`` (the stored state, scoped as reviews see it)."""
    stored = state.get(change.ref.kind, change.ref.namespace, change.ref.name)
    keys: set[closures.Key] = set()
    for version in (stored, change.obj):
        if version is not None:
            keys |= closures.competitor_keys(version, state)
            if change.ref.kind == CUSTOM_ROUTE:
                keys |= _header_keys(version)
    members = frozenset(closures.members(state, change))
    sort = "route"
    if change.ref.kind == CUSTOM_ROUTE:
        for member in members:  # the stored custom Routes of its closure spell header names too
            obj = state.get(member.kind, member.namespace, member.name) if member.kind == CUSTOM_ROUTE else None
            if obj is not None:
                keys |= _header_keys(obj)
        # Custom Routes answer only what no Gateway rule selected, and a host of theirs that has no key
        # falls back to the any-host ``*`` keys: a closure lists neither the Gateway routes nor the ``*``
        # Routes that take a custom Route's requests, so custom Routes go only with custom Routes, and
        # one claiming ``*`` with none.
        sort = "alone" if ("crd", "*") in keys else "custom"
        if change.operation is Operation.DELETE and not http_sources_among(members, state):
            # Without an HTTP listener in its closure, the closure without the Route may bind nothing, and
            # then the whole state decides its lone review: a verdict no combined render of closures gives.
            sort = "alone"
    return Claim(change.ref, members, frozenset(keys), sort)


def independent(a: Claim, b: Claim) -> bool:
    return (a.goes_with(b.sort) and a.ref != b.ref and a.ref not in b.members and b.ref not in a.members
            and not a.keys & b.keys and not a.routes & b.routes)


def groups(claims: Sequence[Claim]) -> list[list[int]]:
    """Indexes of ``claims`` split into groups of pairwise independent changes, first fit in order.

    Kept per group: the union of its members, refs and keys, so placing a claim costs one test per
    group, not one per change already placed."""
    out: list[list[int]] = []
    unions: list[tuple[set[Ref], set[Ref], set[Ref], set[closures.Key]]] = []  # refs, members, routes, keys
    for i, claim in enumerate(claims):
        for group, (refs, members, routes, keys) in zip(out, unions, strict=True):
            if (claim.goes_with(claims[group[0]].sort) and claim.ref not in refs and claim.ref not in members
                    and not refs & claim.members and not keys & claim.keys and not routes & claim.routes):
                group.append(i)
                refs.add(claim.ref)
                members |= claim.members
                routes |= claim.routes
                keys |= claim.keys
                break
        else:
            out.append([i])
            unions.append(({claim.ref}, set(claim.members), set(claim.routes), set(claim.keys)))
    return out


def _key(obj: Obj) -> tuple[str, str]:
    return namespace_of(obj), name_of(obj)


class Changed:
    """A read-only State: ``base`` with several changes applied (CREATE/UPDATE: the new object takes
    the stored one's place); the lists of the changed kinds are spliced once, lookups are one dict
    hit, whatever the number of changes (a chain of ``Overlay``s costs one hop per change)."""

    def __init__(self, base: State, changes: Iterable[Change]) -> None:
        self._base = base
        self._objects: dict[Ref, Obj | None] = {}
        for change in changes:
            self._objects[change.ref] = None if change.operation is Operation.DELETE else change.obj
        digest = hashlib.sha256("\n".join(sorted(map(str, self._objects))).encode()).hexdigest()[:16]
        self._version = f"{base.version}+together:{digest}"
        self._kinds = {ref.kind for ref in self._objects}
        self._lists: dict[str, list[Obj]] = {}

    @property
    def base(self) -> State:
        return self._base

    @property
    def version(self) -> str:
        return self._version

    def list(self, kind: str) -> Sequence[Obj]:
        if kind not in self._kinds:
            return self._base.list(kind)
        got = self._lists.get(kind)
        if got is None:
            changed = {(r.namespace, r.name): o for r, o in self._objects.items() if r.kind == kind}
            got = [o for o in self._base.list(kind) if _key(o) not in changed]
            for obj in changed.values():
                if obj is not None:
                    bisect.insort(got, obj, key=_key)
            self._lists[kind] = got
        return got

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        ref = Ref(kind, namespace, name)
        if ref in self._objects:
            return self._objects[ref]
        return self._base.get(kind, namespace, name)
