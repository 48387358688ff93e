"""RG0127: a Gateway/ListenerSet change may not move another Gateway's listener address.

An isolated Gateway's traffic arrives on the address its own Service targets: its listener port when it
is the port's oldest pair, else its pod port (``validators.views.podports``). The assignment lets no
*newer* object take an address; what remains is an update to an older object (a Gateway, or a
ListenerSet of an older Gateway, that adds a port whose pod port or primary place an existing pair
holds). Such a change would hand the other Gateway's public traffic to a frontend its owner does not
own, so it is denied, naming the moved listeners and their owner. A Gateway's owner may move its own
Gateway's pairs, a ListenerSet's owner the pairs only its listeners make. A deletion cannot be refused
for what it frees, nor the removal of one's own listeners: a pair that moves *down* into a freed address
is a warning (the Services of the Gateways it names must follow).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from validators import codes
from validators.findings import Finding, Severity
from validators.objects import Obj, Ref, as_list, dig, ref_of
from validators.states import State
from validators.views import attachments, indexes, podassignments, podports

Pair = podports.Pair


def _listeners(state: State, http_ports: tuple[int, ...], pods: podports.PodRange) -> list[attachments.Listener]:
    return [x for x in attachments.listeners(state, http_ports=http_ports)
            if x.protocol in ("HTTP", "HTTPS") and x.port not in pods]


Sources = dict[Pair, dict[Ref, podports.Age]]


def _sources(state: State, http_ports: tuple[int, ...], pods: podports.PodRange) -> Sources:
    """Pair -> its declaring objects and their ages; once per state version."""
    return indexes.index_reading(state, f"pod-pair-sources{http_ports}{pods}", attachments.LISTENER_KINDS,
                                 lambda s: podports.source_ages(s, _listeners(s, http_ports, pods)))


def _proposed_sources(before: Sources, me: Ref, obj: Obj | None, proposed: State, http_ports: tuple[int, ...],
                      pods: podports.PodRange) -> Sources:
    """``_sources(proposed)`` from the stored state's, with only the changed object's listeners redone (its
    ListenerSets' admission is unchanged: ``_placing`` sends a change to ``allowedListeners`` the whole way)."""
    out = {pair: by for pair, by in before.items() if me not in by}
    for pair, by in before.items():
        if me in by and len(by) > 1:
            out[pair] = {ref: age for ref, age in by.items() if ref != me}
    if obj is None:
        return out
    gateway = me if me.kind == "Gateway" else attachments.listener_set_parent(obj)
    if me.kind == "ListenerSet" and not attachments.listener_set_status(obj, proposed).accepted:
        return out
    if gateway is None:
        return out
    age = attachments.age_key(obj)
    for raw in as_list(dig(obj, "spec", "listeners")):
        port = dig(raw, "port")
        if dig(raw, "protocol") in ("HTTP", "HTTPS") and isinstance(port, int) and port not in pods:
            pair = (gateway, port)
            out[pair] = {**out.get(pair, {}), me: age}
    return out


def _addresses(sources: Sources, pods: podports.PodRange) -> dict[Pair, int]:
    ages = {pair: min(by.values()) for pair, by in sources.items()}
    pod = podports.assign_ages(ages, base=pods.base, span=pods.span)
    return {pair: pod.get(pair, pair[1]) for pair in ages}


def _placing(obj: Obj) -> tuple[object, ...]:
    """What of a Gateway/ListenerSet the assignment reads: its HTTP/HTTPS ports, its age, its parent, and
    which ListenerSets a Gateway admits."""
    ports = sorted({p for x in as_list(dig(obj, "spec", "listeners")) if dig(x, "protocol") in ("HTTP", "HTTPS")
                    and isinstance(p := dig(x, "port"), int)})
    return (ports, dig(obj, "metadata", "creationTimestamp"), repr(dig(obj, "spec", "parentRef")),
            repr(dig(obj, "spec", "allowedListeners")))


def _owns(me: Ref, pair: Pair, sources: set[Ref]) -> bool:
    if me.kind == "Gateway":
        return pair[0] == me
    return sources <= {me}


def _assignment(base: State, ports: tuple[int, ...], pods: podports.PodRange,
                sources: Sources) -> podassignments.Assignment:
    """The base state's pod-port assignment, with each object's pairs: once per state version."""
    def build(_: State) -> podassignments.Assignment:
        done = podassignments.Assignment({pair: min(by.values()) for pair, by in sources.items()},
                                         base=pods.base, span=pods.span)
        return done

    return indexes.index_reading(base, f"pod-assignment{ports}{pods}", attachments.LISTENER_KINDS, build)


def _pairs_of(base: State, ports: tuple[int, ...], pods: podports.PodRange, sources: Sources) -> dict[Ref, list[Pair]]:
    """Each declaring object -> the pairs it declares listeners of: once per state version."""
    def build(_: State) -> dict[Ref, list[Pair]]:
        out: dict[Ref, list[Pair]] = {}
        for pair, by in sources.items():
            for ref in by:
                out.setdefault(ref, []).append(pair)
        return out

    return indexes.index_reading(base, f"pod-pairs-by-source{ports}{pods}", attachments.LISTENER_KINDS, build)


def _changed_sources(me: Ref, obj: Obj | None, proposed: State, before: Sources, mine: Sequence[Pair],
                     pods: podports.PodRange) -> Sources:
    """The sources, after the change, of the pairs it touches (``{}``: the pair is gone): the pairs the
    changed object declared and declares; ``_proposed_sources`` restricted to them, O(its listeners)."""
    out: Sources = {pair: {ref: age for ref, age in before[pair].items() if ref != me} for pair in mine}
    if obj is None:
        return out
    gateway = me if me.kind == "Gateway" else attachments.listener_set_parent(obj)
    if gateway is None or (me.kind == "ListenerSet" and not attachments.listener_set_status(obj, proposed).accepted):
        return out
    age = attachments.age_key(obj)
    for raw in as_list(dig(obj, "spec", "listeners")):
        port = dig(raw, "port")
        if dig(raw, "protocol") in ("HTTP", "HTTPS") and isinstance(port, int) and port not in pods:
            pair = (gateway, port)
            if pair not in out:
                out[pair] = dict(before.get(pair, {}))
            out[pair][me] = age
    return out


def _patched(assignment: podassignments.Assignment, before: Sources, changed: Sources) -> podassignments.Patched:
    """``assignment`` (of ``before``) with the pairs whose sources ``changed`` removed and re-inserted at
    their new ages (a pair is as old as its oldest declaring object)."""
    patched = podassignments.Patched(assignment)
    removed = [pair for pair, by in changed.items() if pair in before
               and (not by or min(by.values()) != min(before[pair].values()))]
    inserted = {pair: min(by.values()) for pair, by in changed.items() if by
                and (pair not in before or min(by.values()) != min(before[pair].values()))}
    patched.apply(removed, inserted)
    return patched


def findings(obj: Obj, base: State, proposed: State, *, http_ports: Sequence[int],
             pods: podports.PodRange) -> Iterator[Finding]:
    """RG0127 for the change of ``obj`` from ``base`` (the state before) to ``proposed``."""
    me = ref_of(obj)
    if me.kind not in ("Gateway", "ListenerSet"):
        return
    stored = base.get(me.kind, me.namespace, me.name)
    now_obj = proposed.get(me.kind, me.namespace, me.name)
    if stored is None or (now_obj is not None and _placing(stored) == _placing(now_obj)):
        # A new object's pairs are the youngest (no address moves by design: podports), and an update that
        # keeps what places pairs (most: hostnames, certificates, routes' rules) moves none: no O(listeners) pass.
        return
    ports = tuple(http_ports)
    before_sources = _sources(base, ports, pods)
    if me.kind == "Gateway" and (now_obj is None or repr(dig(stored, "spec", "allowedListeners")) != repr(
            dig(now_obj, "spec", "allowedListeners"))):
        # which ListenerSets count may change: all of them (rare: a Gateway's deletion or admission change)
        whole = _sources(proposed, ports, pods)
        changed = {pair: whole.get(pair, {}) for pair in {*before_sources, *whole}
                   if whole.get(pair) != before_sources.get(pair)}
    else:  # the common case, and every port-adding update: O(the object's pairs) plus the moves it causes
        mine = _pairs_of(base, ports, pods, before_sources).get(me, [])
        changed = _changed_sources(me, now_obj, proposed, before_sources, mine, pods)
    patched = _patched(_assignment(base, ports, pods, before_sources), before_sources, changed)
    deleted = now_obj is None
    for pair, (was, now) in sorted(patched.moved().items(), key=lambda kv: (kv[0][0].namespace, kv[0][0].name,
                                                                            kv[0][1])):
        after_by = changed.get(pair, before_sources[pair])
        if now is None or _owns(me, pair, {*before_sources[pair], *after_by}):
            continue
        gateway, port = pair
        taker = patched.holder_of(was)
        took = (f"; {was} would be bound by the listeners of {taker[0]} on port {taker[1]}, so that traffic would "
                f"reach a frontend namespace {taker[0].namespace!r} owns") if taker is not None else ""
        where = "port" if was == port else "pod port"
        message = (f"this change moves the address of {gateway}'s HTTP/HTTPS listeners on port {port} (owner: "
                   f"namespace {gateway.namespace!r}) from {where} {was} to {now}: its Service targets {was}{took}")
        path = _responsible(obj, taker, me)
        if deleted or not _pushed(pair, was, now, pods):
            yield Finding(codes.ADDRESS_MOVED, f"{message}; the change frees that address, so the Gateway moves "
                          f"to {now}: its Service must follow", path, Severity.WARN, subject=False,
                          about=str(gateway))
        else:
            yield Finding(codes.ADDRESS_MOVED, f"{message}. A change may move only its own Gateway's "
                          "addresses; use another port, or ask the owner of " f"{gateway} to move first",
                          path, Severity.DENY)


def _pushed(pair: Pair, was: int, now: int, pods: podports.PodRange) -> bool:
    """Whether the pair was pushed off its address (lost its port, or moved further along its probe
    sequence) rather than moved down into an address the change freed (a removed listener or object)."""
    gateway, port = pair
    if was == port or now == port:
        return was == port
    first = podports.slot(gateway, port, pods.span)
    return (now - pods.base - first) % pods.span > (was - pods.base - first) % pods.span


def _responsible(obj: Obj, taker: Pair | None, me: Ref) -> tuple[str | int, ...]:
    """The changed object's listener on the port whose pair takes the address, else its listeners."""
    if taker is not None:
        gateway = me if me.kind == "Gateway" else attachments.listener_set_parent(obj)
        if taker[0] == gateway:
            for i, raw in enumerate(as_list(dig(obj, "spec", "listeners"))):
                if dig(raw, "port") == taker[1]:
                    return ("spec", "listeners", i, "port")
    return ("spec", "listeners")
