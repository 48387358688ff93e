"""The indexed split of a batch's traffic diff (``trafficdiffs.attributed``) gives exactly what its
definition does (``_attributed_by_scan``: each move against each change), on random diffs shaped like a
batch's: route rules named before and after, Gateways and ListenerSets named by entry point, loose moves
that name no change, refs listed twice."""

from __future__ import annotations

import random

import pytest

from haproxy_check.traffic.destinations import Destination, RequestClass
from haproxy_check.traffic.diffs import Move, TrafficDiff
from validators.objects import Ref
from webhook.gate import trafficdiffs

KINDS = ("HTTPRoute", "GRPCRoute", "Gateway", "ListenerSet")


def _refs(rnd: random.Random) -> list[Ref]:
    refs = [Ref(rnd.choice(KINDS), f"ns{rnd.randrange(3)}", f"r{rnd.randrange(6)}") for _ in range(rnd.randrange(1, 9))]
    return refs + rnd.sample(refs, k=min(len(refs), rnd.randrange(2)))  # sometimes one listed twice


def _rule(rnd: random.Random) -> str:
    if rnd.random() < 0.3:
        return ""
    kind = rnd.choice(("HTTPRoute", "GRPCRoute", "TLSRoute"))
    return f"{kind} ns{rnd.randrange(3)}/r{rnd.randrange(6)} rule {rnd.randrange(3)}"


def _move(rnd: random.Random) -> Move:
    cls = RequestClass(f"HTTP :{rnd.choice((80, 443, 8080))}", rnd.choice(("a.com", "*.a.com", "*")), "/x")
    listeners = tuple(f"{rnd.choice(('Gateway', 'ListenerSet'))} ns{rnd.randrange(3)}/r{rnd.randrange(6)}"
                      for _ in range(rnd.randrange(3)))
    gateways = tuple(f"ns{rnd.randrange(3)}/r{rnd.randrange(6)}" for _ in range(rnd.randrange(3)))
    return Move(cls, Destination("backend", rule=_rule(rnd)), Destination("backend", rule=_rule(rnd)), None,
                gateways=gateways, listeners=listeners)


@pytest.mark.parametrize("seed", range(300))
def test_the_indexed_split_equals_the_scan(seed: int) -> None:
    rnd = random.Random(seed)
    diff = TrafficDiff(moves=tuple(_move(rnd) for _ in range(rnd.randrange(0, 40))))
    refs = _refs(rnd)
    fast, plain = trafficdiffs.attributed(diff, refs), trafficdiffs._attributed_by_scan(diff, refs)
    assert list(fast) == list(plain)
    assert all(fast[ref].moves == plain[ref].moves for ref in plain)
