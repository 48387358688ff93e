"""Where each Gateway's HTTP/HTTPS listeners on a port are reached: the port itself, or a dedicated pod port.

Seed 004: every HTTP/HTTPS Gateway gets its own Service, mapping its public ports to dedicated pod
ports that isolate its routes. The assignment is a function of the stored objects alone (``check``,
``serve`` and ``reconcile`` agree), built so that no newer object can move an existing Gateway's address:

- A *pair* is one Gateway's HTTP/HTTPS listeners on one port (its ListenerSets' count for it). Its age
  is the age of the oldest object declaring a listener of it: the Gateway, or a ListenerSet (so a
  tenant's new ListenerSet on an old Gateway makes a *new* pair, not an old one). Ages are
  ``creationTimestamp``, then namespace/name: the Gateway API resolves conflicts in favour of the
  older object (Route precedence "the oldest Route based on creation timestamp"; ListenerSet listeners
  merge "ordered by creation time (oldest first)").
- On each port the oldest pair keeps ``:<port>``; every other pair gets a pod port in
  ``[base, base + span)``: its hash slot ``crc32("<namespace>/<name>:<port>") % span``, or the next free
  one upwards (wrapping), taking pairs in age order across *all* ports. A pair therefore only ever
  yields to older pairs; what a newer object declares (its name, its ports) cannot take a slot first.
- Listeners may not declare a port in the pod-port range (rule RG0126; the render does not bind such a
  listener), so no declared port is an input of the assignment either.

What an update to an *older* object can still do (add a port whose slot an existing younger pair holds)
is denied at admission (RG0127, ``validators.crossobject.addressmoves``), comparing ``addresses`` before
and after the change.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

from validators.objects import Ref
from validators.podranges import PodRange
from validators.states import State
from validators.views.attachments import Listener, age_key

Pair = tuple[Ref, int]  # (Gateway, listener port)
Age = tuple[str, str, str]

__all__ = ["PodRange", "addresses", "assign", "assign_ages", "check_range", "pair_ages", "pod_port", "slot",
           "source_ages"]


def check_range(base: int, span: int) -> None:
    """The pod port range must be ports (a setting error, before any render)."""
    if not (isinstance(base, int) and isinstance(span, int) and base >= 1 and span >= 1
            and base + span - 1 <= 65535):
        raise ValueError(f"isolation pod ports {base}..{base + span - 1} are not within 1..65535")


def slot(gateway: Ref, port: int, span: int) -> int:
    return zlib.crc32(f"{gateway.namespace}/{gateway.name}:{port}".encode()) % span


def pod_port(gateway: Ref, port: int, *, base: int, span: int, taken: set[int]) -> int:
    """The first free port from the pair's hash slot (``taken`` gains it)."""
    first = slot(gateway, port, span)
    for step in range(span):
        candidate = base + (first + step) % span
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    raise ValueError(f"no free pod port in {base}..{base + span - 1} for {gateway} port {port}")


def source_ages(state: State, listeners: Sequence[Listener]) -> dict[Pair, dict[Ref, Age]]:
    """Each HTTP/HTTPS pair -> the objects declaring it, with their ages (a missing object counts as
    oldest, by name)."""
    ages: dict[Ref, Age] = {}
    out: dict[Pair, dict[Ref, Age]] = {}
    for lst in listeners:
        if lst.protocol not in ("HTTP", "HTTPS"):
            continue
        age = ages.get(lst.source)
        if age is None:
            obj = state.get(lst.source.kind, lst.source.namespace, lst.source.name)
            age = ages[lst.source] = age_key(obj) if obj is not None else ("", lst.source.namespace,
                                                                          lst.source.name)
        out.setdefault((lst.gateway, lst.port), {})[lst.source] = age
    return out


def pair_ages(state: State, listeners: Sequence[Listener]) -> dict[Pair, Age]:
    """Each HTTP/HTTPS pair's age: its oldest declaring object's."""
    return {pair: min(by.values()) for pair, by in source_ages(state, listeners).items()}


def _order(ages: Mapping[Pair, Age]) -> list[Pair]:
    return sorted(ages, key=lambda p: (ages[p], p[0].namespace, p[0].name, p[1]))


def assign(state: State, listeners: Sequence[Listener], *, base: int, span: int) -> dict[Pair, int]:
    """(Gateway, listener port) -> pod port, for every pair that does not own its port's address.

    ``listeners`` must be every listener of the state (a partial view adds what it leaves out:
    ``haproxy_check.render.isolation.outside_listeners``)."""
    return assign_ages(pair_ages(state, listeners), base=base, span=span)


def assign_ages(ages: Mapping[Pair, Age], *, base: int, span: int) -> dict[Pair, int]:
    """``assign`` from the pairs' ages (what a review recomputes for the few pairs a change touches)."""
    order = _order(ages)
    primary: dict[int, Pair] = {}
    for pair in order:
        primary.setdefault(pair[1], pair)
    taken: set[int] = set()
    out: dict[Pair, int] = {}
    for pair in order:
        if primary[pair[1]] != pair:
            out[pair] = pod_port(pair[0], pair[1], base=base, span=span, taken=taken)
    return out


def addresses(state: State, listeners: Sequence[Listener], *, base: int, span: int) -> dict[Pair, int]:
    """Every HTTP/HTTPS pair -> the port its traffic arrives on (its own port, or its pod port)."""
    pods = assign(state, listeners, base=base, span=span)
    return {pair: pods.get(pair, pair[1]) for pair in pair_ages(state, listeners)}
