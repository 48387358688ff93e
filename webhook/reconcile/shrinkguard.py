"""The shrink guard: never promote a mass drop of routes or backends that the source cannot vouch for.

A state source can lose objects without anyone deleting them: a re-list that came back short, a kind
whose list is forbidden (403) or whose CRD went away (404), a first list of a process that never saw the
deletions. Rendered as they are, such gaps are promoted as deletions and take live traffic down. So
before a promotion the guard compares the live version's description (``description.json``: the routing
entries and backends ``RegisterMap()``/``Backend()`` recorded, ``Counts``) with the candidate's. When either
count drops by more than ``Limits.share`` of the live count and by at least ``Limits.minimum`` entries,
the drop is promoted only if every object that left the state since the version this process promoted
last was seen leaving as a watch DELETED event of a completed sync (``Provenance.deleted_by_watch``).
Otherwise the candidate is held: last-known-good stays live, the log names the counts and the causes,
and ``routegate_reconcile_shrink_held`` is 1. ``Limits.allow`` (``--allow-mass-delete``) is the
override for a deliberate mass delete.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from haproxy_check.descriptions import Description
from validators.objects import KINDS, Ref
from validators.states import State

DEFAULT_SHARE = 0.5
DEFAULT_MINIMUM = 10
EXAMPLES = 3  # objects named in a hold's cause


class Provenance(Protocol):
    """What a source knows about how objects left it (``webhook.cluster.ClusterState``)."""

    def deleted_by_watch(self, ref: Ref) -> bool: ...

    def source_problems(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Limits:
    share: float = DEFAULT_SHARE  # a drop of more than this share of the live count is a mass drop...
    minimum: int = DEFAULT_MINIMUM  # ...when it is also at least this many entries (tiny states never stick)
    allow: bool = False  # --allow-mass-delete: promote mass drops whatever their cause


def _routing(path: str) -> bool:
    """A map whose entries are routes: one per served HTTPRoute/GRPCRoute rule (rule-backend.map), per
    Route CRD match, per TLSRoute SNI name. Not the maps of filters, hosts or weights, whose sizes change
    with how routes are written rather than with how many there are."""
    name = path.rpartition("/")[2]
    return name == "rule-backend.map" or name.startswith(("route-crd-", "tls-sni-"))


@dataclass(frozen=True, slots=True)
class Counts:
    routes: int  # routing entries: served route rules, Route CRD matches, TLS SNI names
    backends: int

    @staticmethod
    def of(description: Description) -> Counts:
        return Counts(sum(len(m.entries) for m in description.maps if _routing(m.path)), len(description.backends))

    def __str__(self) -> str:
        return f"{self.routes} routing entries, {self.backends} backends"


@dataclass(frozen=True, slots=True)
class Held:
    live: Counts
    candidate: Counts
    causes: tuple[str, ...]

    @property
    def message(self) -> str:
        return (f"mass drop not promoted: live has {self.live}, the candidate {self.candidate}; "
                f"the source cannot vouch for it: {'; '.join(self.causes)}; last-known-good stays live "
                "(a deliberate mass delete: --allow-mass-delete)")


def mass_drop(live: Counts, candidate: Counts, limits: Limits) -> list[str]:
    """The counts that drop by more than the limits allow, in words; [] when none does."""
    drops = []
    for what, before, after in (("routing entries", live.routes, candidate.routes),
                                ("backends", live.backends, candidate.backends)):
        dropped = before - after
        if dropped >= max(limits.minimum, 1) and dropped > limits.share * before:
            drops.append(f"{what} {before} -> {after}")
    return drops


class ShrinkGuard:
    """Remembers the state this process last promoted (or found live), to tell which objects left since."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._promoted: State | None = None  # a snapshot is immutable: keeping it costs no copy

    def live_is(self, state: State) -> None:
        """``state`` is what the data plane's configuration was rendered from (promoted, or unchanged)."""
        self._promoted = state

    def judge(self, live: Description | None, candidate: Description, state: State,
              provenance: Provenance | None) -> Held | None:
        """None when ``candidate`` (rendered from ``state``) may replace ``live``; else why it is held.
        ``provenance`` is the source's account of ``state`` (None: a source that has none, e.g. files)."""
        if live is None or self.limits.allow:
            return None
        before, after = Counts.of(live), Counts.of(candidate)
        if not mass_drop(before, after, self.limits):
            return None
        causes = list(provenance.source_problems()) if provenance is not None else []
        if self._promoted is None:
            causes.append("no deletion was observed since the live version was promoted (before this process "
                          "started): what is missing may be missing from the source only")
            return Held(before, after, tuple(causes))
        unexplained = [ref for ref in _left(self._promoted, state)
                       if provenance is None or not provenance.deleted_by_watch(ref)]
        if not unexplained:
            return None  # every object that left was seen deleted: a drop someone made
        named = ", ".join(str(ref) for ref in unexplained[:EXAMPLES])
        more = f" and {len(unexplained) - EXAMPLES} more" if len(unexplained) > EXAMPLES else ""
        how = "without a watch DELETED event" if provenance is not None else "of a source without watches"
        causes.append(f"{len(unexplained)} objects left the state {how} ({named}{more})")
        return Held(before, after, tuple(causes))


def _left(before: State, after: State) -> Iterator[Ref]:
    """The objects of ``before`` that ``after`` does not hold, kind by kind in a stable order."""
    for kind in KINDS:
        for obj in before.list(kind):
            meta = obj.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            if after.get(kind, namespace, name) is None:
                yield Ref(kind, namespace, name)
