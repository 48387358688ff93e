"""The traffic diff of a review (``haproxy_check.traffic``) made into part of its verdict.

The gate already renders a change's closure without the change (the baseline: the reload note's and a
failing check's) and with it; the difference between the routing tables of the two is the change's
traffic diff. It is computed under a budget: past it, a change that enters through a listener or a
port shared with another owner cannot be judged ("could not decide": a move of someone else's traffic
that nobody saw must not be allowed); any other change keeps its verdict, with a warning.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from haproxy_check.results import RenderResult
from haproxy_check.traffic import diffs, facts, tables
from haproxy_check.traffic.diffs import Move, TrafficDiff
from validators.objects import Ref
from webhook.gate.verdicts import Decision, Verdict

# Moves named in the admission warning: the apiserver keeps 4 KiB of warnings, the rest are counted.
SHOWN_MOVES = 3
SHOWN_OWNERS = 5


def compute(before: RenderResult, after: RenderResult, *, budget: float,
            clock: Callable[[], float] = time.perf_counter) -> TrafficDiff:
    """The diff of two renders' routing tables, or an incomplete one saying why (never raises for a
    diff that takes too long: ``budget`` seconds from now is its deadline)."""
    deadline = clock() + budget
    if before.description.maps == after.description.maps and before.description.routing == after.description.routing:
        return TrafficDiff()  # the same maps and facts: every request goes where it went (compared in C)
    try:
        return diffs.diff(tables.table(before.description), tables.table(after.description), deadline=deadline,
                          clock=clock)
    except diffs.OverBudget as exc:
        return diffs.timed_out(f"the traffic diff did not finish within {budget:g}s ({exc})")


def warning(diff: TrafficDiff, ref: Ref) -> list[str]:
    """The admission warning of the other owners whose requests the change moves (none: ``[]``): a line
    naming them, then the first moves one per line (the apiserver keeps 256 characters a warning and
    4 KiB in all), the rest counted. ``check`` shows the same lines."""
    owners = diff.affected(ref.namespace)
    if not owners:
        return []
    moved = [m for m in diff.moves if m.kind != "gained" and m.owners - {ref.namespace}]
    named = ", ".join(owners[:SHOWN_OWNERS]) + (f" and {len(owners) - SHOWN_OWNERS} more"
                                                if len(owners) > SHOWN_OWNERS else "")
    count = f"{len(moved)} request class{'es' if len(moved) != 1 else ''}"
    lines = [f"traffic: moves {count} of other owners ({named})"]
    lines += [f"traffic: {m.line()}" for m in moved[:SHOWN_MOVES]]
    if len(moved) > SHOWN_MOVES:
        lines.append(f"traffic: and {len(moved) - SHOWN_MOVES} more (routegate check --traffic lists them)")
    return lines


def judged(verdict: Verdict, diff: TrafficDiff | None, after: RenderResult) -> Verdict:
    """An allow with its traffic diff: a warning when other owners' requests move; when the diff did
    not finish, "could not decide" for a change on an entry point shared with another owner, a
    warning for any other."""
    if diff is None or verdict.decision is not Decision.ALLOW:
        return verdict
    ref = verdict.ref
    if not diff.complete:
        if facts.shared_with_others(after.description.routing, ref.kind, ref.namespace, ref.name):
            return replace(verdict, decision=Decision.ERROR, traffic=diff,
                           error=f"{diff.reason}; {ref} enters traffic through a listener or port another owner "
                                 "shares, so the requests it moves could not be checked")
        return replace(verdict, traffic=diff, notes=(*verdict.notes, f"traffic diff skipped: {diff.reason}"))
    return replace(verdict, traffic=diff, notes=(*verdict.notes, *warning(diff, ref)))


def attributed(diff: TrafficDiff, refs: Sequence[Ref]) -> dict[Ref, TrafficDiff]:
    """One diff of many changes applied together (``check -f DIR``, a batch of reviews) split by
    change: a move goes to the changes named in it (the route of its rule before or after, the Gateway
    or ListenerSet of its entry point); a move none of them is named in (a route shadowed by another's
    new host) goes to the changes with a named move on the same entry point and host, else to every
    change.

    Indexed (the route named by a rule, the entry point and host of each change's moves): a batch of
    hundreds of reviews whose diff has thousands of moves is split in one pass over the moves, not one
    per move and change. ``_attributed_by_scan`` is the plain definition it is tested against."""
    named: dict[Ref, list[Move]] = {ref: [] for ref in refs}
    position = {ref: i for i, ref in reversed(list(enumerate(refs)))}  # first position of each ref
    listed = Counter(refs)
    routes: dict[str, list[Ref]] = {}
    entries: dict[str, list[Ref]] = {}  # "Gateway ns/name" / "ListenerSet ns/name" -> refs
    gateways: dict[str, list[Ref]] = {}  # "ns/name" -> Gateway refs
    for ref in refs:
        routes.setdefault(f"{ref.kind} {ref.namespace}/{ref.name}", []).append(ref)
        if ref.kind in ("Gateway", "ListenerSet"):
            entries.setdefault(str(ref), []).append(ref)
        if ref.kind == "Gateway":
            gateways.setdefault(f"{ref.namespace}/{ref.name}", []).append(ref)
    holders: dict[tuple[str, str], set[Ref]] = {}  # (entry point, host) -> refs with a move on it
    loose: list[Move] = []
    for move in diff.moves:
        found: set[Ref] = set()
        for rule in (move.before.rule, move.after.rule):
            # "HTTPRoute ns/name rule 3"; a custom Route's answer is the whole Route: "Route ns/name"
            head = rule.partition(" rule ")[0]
            if head:
                found.update(routes.get(head, ()))
        for listener in move.listeners:
            found.update(entries.get(listener, ()))
        for gateway in move.gateways:
            found.update(gateways.get(gateway, ()))
        if not found:
            loose.append(move)
            continue
        for ref in found:
            named[ref].extend((move,) * listed[ref])  # as often as listed, as the scan does
            holders.setdefault((move.cls.entry, move.cls.host), set()).add(ref)
    for move in loose:
        key = (move.cls.entry, move.cls.host)
        near = sorted(holders.get(key, ()), key=position.__getitem__)
        for ref in near or refs:
            named[ref].append(move)
            holders.setdefault(key, set()).add(ref)
    return {ref: replace(diff, moves=tuple(moves)) for ref, moves in named.items()}


def _attributed_by_scan(diff: TrafficDiff, refs: Sequence[Ref]) -> dict[Ref, TrafficDiff]:
    """:func:`attributed` by its definition, each move against each change (the differential tests'
    reference)."""
    named: dict[Ref, list[Move]] = {ref: [] for ref in refs}
    loose: list[Move] = []
    for move in diff.moves:
        owners = [ref for ref in refs if _names(move, ref)]
        for ref in owners:
            named[ref].append(move)
        if not owners:
            loose.append(move)
    for move in loose:
        near = [ref for ref, moves in named.items()
                if any(m.cls.entry == move.cls.entry and m.cls.host == move.cls.host for m in moves)]
        for ref in near or refs:
            named[ref].append(move)
    return {ref: replace(diff, moves=tuple(moves)) for ref, moves in named.items()}


def _names(move: Move, ref: Ref) -> bool:
    route = f"{ref.kind} {ref.namespace}/{ref.name}"
    if any(rule == route or rule.startswith(f"{route} rule ") for rule in (move.before.rule, move.after.rule)):
        return True
    return (ref.kind in ("Gateway", "ListenerSet") and str(ref) in move.listeners) or (
        ref.kind == "Gateway" and f"{ref.namespace}/{ref.name}" in move.gateways)
