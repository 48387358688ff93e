"""Concurrent reviews of ReferenceGrants, BackendTLSPolicies, Gateways and ListenerSets judged together:
their claims, the grouping rule that keeps them apart when one could alter what another's own review
renders, and the split of a group's traffic diff.

Gateways and ListenerSets (CREATE/UPDATE/DELETE, docs/DELTA-CHECK.md rules 10 and 12) go in only when
their family (the Gateway and its ListenerSets) has its listener ports to itself in both versions, so no
pod port is assigned there and no other Gateway's address or port frontend depends on them, and (a
DELETE) when their closure keeps a Gateway that binds (:func:`_source_claim`); they touch their family
and the routes attached to it.

Route changes are grouped by ``webhook.gate.batching``. A grant or a policy renders nothing of its own: it
changes the render of the objects it reaches (a grant: the routes and Gateways whose references cross
from a ``from`` namespace into its namespace; a policy: the routes referencing a Service it targets;
both versions of the object count). Those are the change's *touched* objects, members of its closure
(``validators.views.closures.members``). The rule, argued in docs/DELTA-CHECK.md ("Reviews checked
together", rule 9): two such changes share a group only when

- they are of one kind (grants with grants, policies with policies; never with route changes, whose
  rule reads the grants and policies of the state as they are stored);
- what batching's rule asks of route changes: different objects, neither a member of the other's
  closure, no common competitor key, disjoint route members;
- no object one touches is a member of the other's closure (a Gateway a grant reaches, e.g. through a
  certificate in its namespace, is rendered with the grant changed in the combined render only);
- policies: no targeted Service in common (Gateway API's conflict resolution reads every policy of a
  Service, and the winner decides the Service's backends).

Every member a lone review renders is then rendered in the combined configuration as alone: the
members one change touches are in no other closure, and what several closures share is untouched.
Pure: no I/O, no rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from haproxy_check.traffic.diffs import Move, TrafficDiff
from validators.changes import Change, Operation
from validators.crossobject import statuses
from validators.objects import Obj, Ref, as_list, dig
from validators.states import Overlay, State
from validators.views import attachments, closures
from webhook.gate import batching, trafficdiffs

GRANT = "ReferenceGrant"
POLICY = "BackendTLSPolicy"
SOURCES = frozenset(closures.SOURCE_KINDS)  # Gateway, ListenerSet
KINDS = frozenset({GRANT, POLICY, *SOURCES})


@dataclass(frozen=True, slots=True)
class KindClaim(batching.Claim):
    """A grant's or a policy's claim: besides its closure and keys, the objects whose render it alters."""

    touched: frozenset[Ref] = frozenset()


def batchable(change: Change) -> bool:
    """A grant's, a policy's, a Gateway's or a ListenerSet's CREATE, UPDATE or DELETE (a DELETE's lone
    render is its closure without it, as the combined render has it; a Gateway's or ListenerSet's claim
    decides whether it may share a check: :func:`_source_claim`); a custom Route's DELETE (its claim is
    its stored version's, ``batching.claim_of``; its CREATE and UPDATE are ``batching.batchable``'s)."""
    if change.ref.kind == batching.CUSTOM_ROUTE:
        return change.operation is Operation.DELETE
    return change.ref.kind in KINDS and change.operation in (Operation.CREATE, Operation.UPDATE, Operation.DELETE)


def _versions(change: Change, state: State) -> list[Obj]:
    stored = state.get(change.ref.kind, change.ref.namespace, change.ref.name)
    new = None if change.operation is Operation.DELETE else change.obj
    return [o for o in (stored, new) if o is not None]


def _from_spaces(grant: Obj) -> set[str]:
    return {str(dig(f, "namespace", default="")) for f in as_list(dig(grant, "spec", "from"))}


def claim_of(change: Change, state: State) -> batching.Claim:
    """The claim of ``change`` over ``state``: ``batching.claim_of`` for the kinds batched there, a
    :class:`KindClaim` for a grant or a policy."""
    if change.ref.kind not in KINDS:
        return batching.claim_of(change, state)
    if change.ref.kind in SOURCES:
        return _source_claim(change, state)
    idx = closures.index_of(state)
    touched: set[Ref] = set()
    keys: set[closures.Key] = set()
    for version in _versions(change, state):
        if change.ref.kind == GRANT:
            for space in _from_spaces(version):
                touched |= idx.across.get((space, change.ref.namespace), set())
        else:
            for target in closures._policy_targets(version):
                touched |= idx.users.get(target, set())
                keys.add(("backendtls-service", *target))
    members = frozenset(closures.members(state, change))
    return KindClaim(change.ref, members, frozenset(keys), "grant" if change.ref.kind == GRANT else "backendtls",
                     frozenset(touched))


def _source_claim(change: Change, state: State) -> KindClaim:
    """A Gateway's or ListenerSet's claim. Its family (its Gateway and every ListenerSet of it: one
    frontend per port) must have its listener ports to itself, in the stored and the proposed version:
    then each of those ports is owned by the family (no pod port is assigned there, so the one pool of
    pod ports, assigned in age order, is the same with or without the change), and no other Gateway's
    frontend, TLS/TCP port frontend or address depends on it. Otherwise it goes alone. Its keys are
    those ports (two changes on one port are apart); it touches its family and the routes attached to
    it (all members of its closure)."""
    idx = closures.index_of(state)
    x = change.ref
    versions = _versions(change, state)
    gateways = {x} if x.kind == "Gateway" else {p for o in versions
                                                  if (p := attachments.listener_set_parent(o)) is not None}
    family = {x, *gateways}
    for gateway in gateways:
        family |= idx.listener_sets.get(gateway, set())
    ports: set[int] = set().union(*(closures.listener_ports(o) for o in versions))
    for source in family:
        ports |= idx.ports.get(source, set())
    exclusive = bool(ports) and all(idx.on_port.get(port, set()) <= family for port in ports)
    touched = set(family)
    for source in family:
        touched |= idx.children.get(source, set())
    members = frozenset(closures.members(state, change))
    if change.operation is Operation.DELETE and not _binds_without(members, x, state):
        # Its lone closure without it would bind nothing, and then the whole state decides (``Gate.review``):
        # a verdict of the whole state, which no combined render of closures gives.
        exclusive = False
    return KindClaim(x, members, frozenset(("port", p) for p in ports), "source" if exclusive else "alone",
                     frozenset(touched))


def _binds_without(members: frozenset[Ref], x: Ref, state: State) -> bool:
    """Whether a closure of ``members`` keeps a Gateway that binds once ``x`` is deleted: one with an HTTP
    or HTTPS listener (the HTTP engine always binds its ports) other than ``x``. A ListenerSet's delete
    leaves its Gateway; a Gateway's leaves its ListenerSets without a parent to render them, though the
    closure counts them as what binds (``closures.members``)."""
    return bool(batching.http_sources_among(members, state) - {x})


def http_ports_of(renderer: object) -> tuple[int, ...]:
    """The HTTP and HTTPS ports a renderer's statuses are computed with (its settings), as a lone render
    computes them."""
    settings = getattr(renderer, "settings", None)
    http, https = getattr(settings, "http_port", None), getattr(settings, "https_port", None)
    return (http, https) if isinstance(http, int) and isinstance(https, int) else tuple(attachments.DEFAULT_HTTP_PORTS)


def lone_status(change: Change, scope: State, http_ports: tuple[int, ...] = tuple(attachments.DEFAULT_HTTP_PORTS),
                ) -> dict[str, Any]:
    """The status a lone review reports for a grant, a policy, a Gateway or a ListenerSet: the renderer's,
    computed on what the lone review renders (the change over its own closure); a grant has none, nor
    has a deleted object."""
    proposed = Overlay(scope, change)
    obj = proposed.get(change.ref.kind, change.ref.namespace, change.ref.name)
    found = statuses.status_of(obj, proposed, http_ports=http_ports) if obj is not None else None
    return found or {}


def _touched(claim: batching.Claim) -> frozenset[Ref]:
    return claim.touched if isinstance(claim, KindClaim) else frozenset()


def independent(a: batching.Claim, b: batching.Claim) -> bool:
    """The pairwise rule: batching's, and nothing one touches is a member of the other's closure."""
    return (batching.independent(a, b) and not _touched(a) & b.members and not _touched(b) & a.members)


def groups(claims: Sequence[batching.Claim]) -> list[list[int]]:
    """Indexes of ``claims`` split into groups of pairwise independent changes: the route changes by
    ``batching.groups``, grants and policies first fit in order here (claims of different sorts never
    share a group, so the two splits are apart)."""
    mine = [i for i, c in enumerate(claims) if isinstance(c, KindClaim)]
    mine_set = set(mine)
    rest = [i for i in range(len(claims)) if i not in mine_set]
    out = [[rest[k] for k in group] for group in batching.groups([claims[i] for i in rest])]
    placed: list[list[int]] = []
    # per group: refs, members, route members, keys, touched: one test per group, not per change placed
    unions: list[tuple[set[Ref], set[Ref], set[Ref], set[closures.Key], set[Ref]]] = []
    for i in mine:
        claim = claims[i]
        touched = _touched(claim)
        for group, (refs, members, routes, keys, touching) in zip(placed, unions, strict=True):
            if (claim.goes_with(claims[group[0]].sort) and claim.ref not in refs and claim.ref not in members
                    and not refs & claim.members and not keys & claim.keys and not routes & claim.routes
                    and not touched & members and not touching & claim.members):
                group.append(i)
                refs.add(claim.ref)
                members |= claim.members
                routes |= claim.routes
                keys |= claim.keys
                touching |= touched
                break
        else:
            placed.append([i])
            unions.append(({claim.ref}, set(claim.members), set(claim.routes), set(claim.keys), set(touched)))
    return out + placed


def attributed(diff: TrafficDiff, claims: Sequence[batching.Claim]) -> dict[Ref, TrafficDiff]:
    """A group's traffic diff split by change. Route changes: ``trafficdiffs.attributed`` (a move names
    its route). A grant's or a policy's moves name the routes and Gateways it touches, never itself: a
    move goes to the change whose closure renders the route of its rule (route members are disjoint
    within a group) or touches the Gateway or ListenerSet of its entry point; any other to every change
    (as ``trafficdiffs.attributed`` does with a move no change is named in)."""
    refs = [c.ref for c in claims]
    if not any(isinstance(c, KindClaim) for c in claims):
        return trafficdiffs.attributed(diff, refs)
    owner: dict[str, Ref] = {}
    for claim in claims:
        for member in claim.routes:
            owner[str(member)] = claim.ref
        for member in _touched(claim):
            owner.setdefault(str(member), claim.ref)
            if member.kind == "Gateway":  # a move names the Gateways serving its entry point as "ns/name"
                owner.setdefault(f"{member.namespace}/{member.name}", claim.ref)
    named: dict[Ref, list[Move]] = {ref: [] for ref in refs}
    for move in diff.moves:
        found = {owner[head] for rule in (move.before.rule, move.after.rule)
                 if (head := rule.partition(" rule ")[0]) in owner}
        found |= {owner[name] for name in (*move.listeners, *move.gateways) if name in owner}
        for ref in found or refs:
            named[ref].append(move)
    return {ref: replace(diff, moves=tuple(moves)) for ref, moves in named.items()}
