"""The pod-port assignment (``podports.assign_ages``) as a value that changes by O(change) work.

``podports`` places pairs in age order: the oldest pair on a port keeps the port, every other pair takes
the first free pod port from its hash slot (linear probing, wrapping). Recomputing that for a review is
O(pairs); this module keeps the assignment of a base state (``Assignment``, built once per state version)
and applies a change's pair insertions and removals to a copy-on-write view of it (``Patched``), each in
work proportional to the pairs that actually move:

- inserting a pair of age ``t`` on a port whose primary is younger makes it the primary and gives the
  old primary a pod port; else the pair takes the first slot from its hash no *older* pair holds. A
  younger pair holding that slot is displaced and goes on probing from there (past the slots older pairs
  hold), which may displace a younger one still: at each step exactly one slot is taken that was free in
  the from-scratch run, so only the pair holding it can land elsewhere (a chain, not a re-run);
- removing a pair frees its slot at its time; the oldest younger pair whose probe path ran through the
  slot (its path lies in the run of held slots after it) moves down into it, freeing its own, and so on.
  Removing a port's primary makes the next oldest pair on the port the primary (leaving its pod port).

``tests/render/test_podports.py`` holds the result to ``podports.assign_ages`` of the whole proposed state
on random states and changes (a differential test).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from validators.views import podports

Pair = podports.Pair
Age = podports.Age
Key = tuple[Age, str, str, int]  # the placement order: age, then the Gateway's namespace/name, the port


def key_of(pair: Pair, age: Age) -> Key:
    return (age, pair[0].namespace, pair[0].name, pair[1])


class Assignment:
    """The assignment of a set of pairs (immutable once built): each port's primary, each other pair's
    slot (pod port - base) and each slot's holder, and every pair's placement key."""

    def __init__(self, ages: Mapping[Pair, Age], *, base: int, span: int) -> None:
        self.base, self.span = base, span
        self.keys: dict[Pair, Key] = {pair: key_of(pair, age) for pair, age in ages.items()}
        order = sorted(self.keys, key=self.keys.__getitem__)
        self.primary: dict[int, Pair] = {}
        self.by_port: dict[int, list[tuple[Key, Pair]]] = {}  # every pair of a port, oldest first
        for pair in order:
            self.primary.setdefault(pair[1], pair)
            self.by_port.setdefault(pair[1], []).append((self.keys[pair], pair))
        pods = podports.assign_ages(ages, base=base, span=span)
        self.slot: dict[Pair, int] = {pair: port - base for pair, port in pods.items()}
        self.holder: dict[int, Pair] = {s: pair for pair, s in self.slot.items()}

    def address(self, pair: Pair) -> int | None:
        if pair not in self.keys:
            return None
        s = self.slot.get(pair)
        return pair[1] if s is None else self.base + s


class Patched:
    """``assignment`` with pairs inserted and removed; reads fall through to it, writes stay here."""

    def __init__(self, assignment: Assignment) -> None:
        self.a = assignment
        self.keys: dict[Pair, Key | None] = {}  # None: removed
        self.primary: dict[int, Pair | None] = {}
        self.slot: dict[Pair, int | None] = {}
        self.holder: dict[int, Pair | None] = {}
        self.added_on: dict[int, list[tuple[Key, Pair]]] = {}  # pairs inserted per port, oldest first
        self.touched: set[Pair] = set()  # pairs whose address may differ from the assignment's

    # ------------------------------------------------------------------ reads through the overlay

    def key(self, pair: Pair) -> Key | None:
        return self.keys[pair] if pair in self.keys else self.a.keys.get(pair)

    def _primary(self, port: int) -> Pair | None:
        return self.primary[port] if port in self.primary else self.a.primary.get(port)

    def _slot(self, pair: Pair) -> int | None:
        return self.slot[pair] if pair in self.slot else self.a.slot.get(pair)

    def _holder(self, s: int) -> Pair | None:
        return self.holder[s] if s in self.holder else self.a.holder.get(s)

    def address(self, pair: Pair) -> int | None:
        if self.key(pair) is None:
            return None
        s = self._slot(pair)
        return pair[1] if s is None else self.a.base + s

    def holder_of(self, address: int) -> Pair | None:
        """The pair reached on ``address`` (a port's primary, or a pod port's holder)."""
        s = address - self.a.base
        if 0 <= s < self.a.span:
            got = self._holder(s)
            if got is not None:
                return got
        return self._primary(address)

    def _set_slot(self, pair: Pair, s: int | None) -> None:
        old = self._slot(pair)
        if old is not None and self._holder(old) == pair:
            self.holder[old] = None
        self.slot[pair] = s
        if s is not None:
            self.holder[s] = pair
        self.touched.add(pair)

    # ------------------------------------------------------------------ changes

    def insert(self, pair: Pair, age: Age) -> None:
        key = key_of(pair, age)
        self.keys[pair] = key
        self.touched.add(pair)
        bisect.insort(self.added_on.setdefault(pair[1], []), (key, pair))
        current = self._primary(pair[1])
        if current is None:
            self.primary[pair[1]] = pair
            return
        if key < self._must_key(current):
            self.primary[pair[1]] = pair
            self.touched.add(current)
            self._probe(current)
        else:
            self._probe(pair)

    def remove(self, pair: Pair) -> None:
        if self.key(pair) is None:
            return
        port = pair[1]
        self.touched.add(pair)
        if self._primary(port) == pair:
            self.keys[pair] = None
            successor = self._oldest_on(port)
            self.primary[port] = successor
            if successor is not None:
                self.touched.add(successor)
                self._vacate(successor)
            return
        self._vacate(pair)
        self.keys[pair] = None

    def _must_key(self, pair: Pair) -> Key:
        key = self.key(pair)
        assert key is not None
        return key

    def _oldest_on(self, port: int) -> Pair | None:
        """The oldest pair still present on ``port`` (the base's in order, skipping removed ones, and the
        inserted ones): O(removed + 1) per call."""
        best: tuple[Key, Pair] | None = None
        for key, pair in self.a.by_port.get(port, ()):
            if self.key(pair) == key:
                best = (key, pair)
                break
        for key, pair in self.added_on.get(port, ()):
            if self.key(pair) == key:  # the oldest inserted one still present
                if best is None or key < best[0]:
                    best = (key, pair)
                break
        return best[1] if best is not None else None

    def _probe(self, pair: Pair) -> None:
        """Give ``pair`` (just made a non-primary) its slot, displacing younger holders along a chain."""
        span = self.a.span
        mover: Pair | None = pair
        start = podports.slot(pair[0], pair[1], span)
        while mover is not None:
            key = self._must_key(mover)
            s = start
            for _ in range(span + 1):
                held = self._holder(s)
                if held is None or held == mover or self._must_key(held) > key:
                    break
                s = (s + 1) % span
            else:  # every slot held by older pairs: the range is full
                raise ValueError(f"no free pod port in {self.a.base}..{self.a.base + span - 1} for {mover[0]} "
                                     f"port {mover[1]}")
            displaced = self._holder(s)
            self._set_slot(mover, s)
            if displaced is None or displaced == mover:
                return
            mover, start = displaced, (s + 1) % span  # it already found the slots before s held

    def _vacate(self, pair: Pair) -> None:
        """Free ``pair``'s slot (it leaves the pod range) and let younger pairs whose probe ran through it
        move down, each into the slot the one before freed."""
        hole = self._slot(pair)
        if hole is None:
            return
        time = self._must_key(pair)
        self._set_slot(pair, None)
        span = self.a.span
        while True:
            best: tuple[Key, Pair, int] | None = None
            s = (hole + 1) % span
            for _ in range(span - 1):
                held = self._holder(s)
                if held is None:
                    break
                key = self._must_key(held)
                first = podports.slot(held[0], held[1], span)
                # its path ran from its hash slot to s; the hole lies on it when nearer to the start
                if key > time and (hole - first) % span < (s - first) % span and (best is None or key < best[0]):
                    best = (key, held, s)
                s = (s + 1) % span
            if best is None:
                return
            time, mover, freed = best
            self._set_slot(mover, hole)
            hole = freed

    def apply(self, removed: Iterable[Pair], inserted: Mapping[Pair, Age]) -> None:
        for pair in removed:
            self.remove(pair)
        for pair, age in inserted.items():
            self.insert(pair, age)

    def moved(self) -> dict[Pair, tuple[int, int | None]]:
        """Each pair of the base whose address differs now: (before, after; None when removed)."""
        out: dict[Pair, tuple[int, int | None]] = {}
        for pair in self.touched:
            was = self.a.address(pair)
            now = self.address(pair)
            if was is not None and was != now:
                out[pair] = (was, now)
        return out
