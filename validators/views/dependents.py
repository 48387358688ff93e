"""Per-object results over successive States, recomputed only for the objects whose inputs changed.

``Dependents(compute, kinds)`` keeps, for every object of ``kinds``, ``compute(obj, state)`` together
with everything that computation read (``validators.views.reads``: gets, listings, index lookups) and
the inverse of those reads: which objects' results read object X, listed kind K, or looked up key Y
of index Z. ``update(state)`` then needs only what changed since the previous state:

- the refs whose objects differ (``changed_refs``): from the state's own link to its predecessor
  (``webhook.cluster`` snapshots name the refs written since; Overlays, Withouts and scoped views
  differ from their base at known refs), else a walk of the kinds read, comparing identity first;
- the index keys whose answer differs, per index the results looked up (an index patched from its
  predecessor shares every unchanged answer, so this is a pointer comparison per key looked up).

Every result whose reads include one of those is computed again, through a fresh recording; every
other result is the one a from-scratch computation would give, because ``compute`` is a pure function
of what it read and none of it changed. Entries go with their objects, so the cache holds one entry
per object of ``kinds`` in the last state: bounded by the state, never by its history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from validators.objects import Obj, Ref, kind_of, name_of, namespace_of, new_ref, ref_of
from validators.states import Overlay, State, Without
from validators.views import indexes
from validators.views.foreign import is_foreign
from validators.views.reads import _MISSING, _WHOLE, FrozenReads, Recording, _Get, _same
from validators.views.scopes import SOURCE_KINDS, ScopedState

R = TypeVar("R")


def changed_refs(before: State, after: State, kinds: Iterable[str]) -> set[Ref]:
    """A superset of the refs of ``kinds`` whose object differs between ``before`` and ``after``
    (extra refs only cost a recomputation; a missing one would be a wrong result)."""
    wanted = frozenset(kinds)
    return {r for r in _changed(before, after, wanted) if r.kind in wanted}


_SCOPE_READS = frozenset({*SOURCE_KINDS, "GatewayClass"})


def _changed(before: State, after: State, wanted: frozenset[str]) -> set[Ref]:
    if before is after:
        return set()
    extra: set[Ref] = set()
    after, before = _unwrapped(after, extra), _unwrapped(before, extra)
    if before is after:
        return extra
    if isinstance(before, ScopedState) and isinstance(after, ScopedState):
        # the view hides other controllers' Gateways and ListenerSets from its lists (its get shows a stub):
        # compare the states under it, and when a Gateway, ListenerSet or class changed, take every one of
        # them (which are shown depends on their classes and parents; few: one per tenant, not per route)
        below = _changed(before.base, after.base, wanted | _SCOPE_READS)
        if any(r.kind in _SCOPE_READS for r in below):
            for state in (before.base, after.base):
                for kind in SOURCE_KINDS:
                    below.update(ref_of(o) for o in state.list(kind))
        return below | extra
    link = indexes.prior_link(after)
    if link is not None and link[0] is before:
        return set(link[1]) | extra  # a watch snapshot names the refs written since its predecessor
    return _walk(before, after, wanted) | extra


def _unwrapped(state: State, into: set[Ref]) -> State:
    """The state under Overlays and Withouts, which differ from their base at known refs (added to ``into``)."""
    while True:
        if isinstance(state, Overlay):
            into.add(state.changed)
            state = state.base
        elif isinstance(state, Without):
            into.update(state.hidden)
            state = state.base
        else:
            return state


def _walk(before: State, after: State, wanted: frozenset[str]) -> set[Ref]:
    """The refs that differ, found by listing each kind: identity first, content where objects differ."""
    found: set[Ref] = set()
    for kind in sorted(wanted):
        old, new = before.list(kind), after.list(kind)
        if old is new:
            continue
        if len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True)):
            continue
        was = {(namespace_of(o), name_of(o)): o for o in old}
        now = {(namespace_of(o), name_of(o)): o for o in new}
        for key in was.keys() | now.keys():
            a, b = was.get(key), now.get(key)
            if a is b or (a is not None and b is not None and a == b):
                continue
            found.add(new_ref(kind, key[0], key[1]))
    return found


class Dependents(Generic[R]):
    """``compute(obj, state)`` for every object of ``kinds``, kept across states (module docstring).
    Calls of ``update`` must be serialized (the reconcile loop runs one at a time)."""

    def __init__(self, compute: Callable[[Obj, State], R], kinds: Sequence[str]) -> None:
        self._compute = compute
        self.kinds = tuple(kinds)
        self._state: State | None = None
        self._results: dict[Ref, R] = {}
        self._reads: dict[Ref, FrozenReads] = {}
        self._by_get: dict[tuple[str, str, str], set[Ref]] = {}
        self._get_kinds: dict[str, int] = {}  # kind -> how many (kind, namespace, name) keys are read
        self._by_list: dict[str, set[Ref]] = {}
        self._by_key: dict[tuple[str, Any], set[Ref]] = {}  # (index, key) -> readers
        self._seen: dict[tuple[str, Any], Any] = {}  # (index, key) -> its answer in the last state
        self._builds: dict[str, Callable[[State], Any]] = {}
        self._keys: dict[str, set[Any]] = {}  # index -> keys looked up
        self._indexes: dict[str, Any] = {}  # index -> the index object of the last state
        self.computed = 0  # results computed (not reused) by the last update
        self.reused = 0

    @property
    def results(self) -> dict[Ref, R]:
        """Every object's result in the last state (read-only: the cache's own table)."""
        return self._results

    def update(self, state: State, also: Iterable[Ref] = (), *, everything: bool = False) -> set[Ref]:
        """Bring every result up to ``state``; the refs whose result was computed again or dropped.
        ``also``: refs to compute again for inputs the state does not hold (the caller tracks those);
        ``everything``: compute every result again (an input every result reads changed)."""
        dirty = self._dirty(state) if self._state is not None and not everything else None
        if dirty is not None:
            dirty.update(also)
        self._state = state
        touched: set[Ref] = set()
        if dirty is None:  # the first state: everything
            for ref in list(self._results):
                self._forget(ref)
            candidates: Iterable[Ref] = (ref_of(o) for kind in self.kinds for o in state.list(kind)
                                         if kind_of(o) == kind)
        else:
            candidates = dirty
        for ref in candidates:
            touched.add(ref)
            obj = state.get(ref.kind, ref.namespace, ref.name) if ref.kind in self.kinds else None
            if ref in self._results:
                self._forget(ref)
            if obj is None or is_foreign(obj) or kind_of(obj) != ref.kind:
                continue  # gone, or another controller's that a scoped view lists not (its get shows a stub)
            recording = Recording(state)
            self._results[ref] = self._compute(obj, recording)
            self._remember(ref, recording.reads.frozen(), state)
        self.computed = len([r for r in touched if r in self._results])
        self.reused = len(self._results) - self.computed
        return touched

    def _dirty(self, state: State) -> set[Ref]:
        before = self._state
        assert before is not None
        kinds = {*self.kinds, *self._by_list, *self._get_kinds}
        dirty: set[Ref] = set()
        for ref in changed_refs(before, state, kinds):
            if ref.kind in self.kinds:
                dirty.add(ref)
            dirty |= self._by_get.get((ref.kind, ref.namespace, ref.name), set())
            dirty |= self._by_list.get(ref.kind, set())
        for name, keys in self._keys.items():
            index = indexes.index(state, name, self._builds[name])
            prior = self._indexes.get(name)
            if index is prior:
                continue
            self._indexes[name] = index
            touched = indexes.touched_since(index, prior)
            if touched is not None:  # patched from the last state's: only the keys it re-keyed can differ
                asked = [k for k in (_WHOLE, *map(_Get, touched)) if k in keys]
                keys = set(asked)
            for key in keys:
                now = _answer(index, key)
                if not _same(now, self._seen[(name, key)]):
                    self._seen[(name, key)] = now
                    dirty |= self._by_key[(name, key)]
        return dirty

    def _remember(self, ref: Ref, reads: FrozenReads, state: State) -> None:
        self._reads[ref] = reads
        for key, _ in reads.gets:
            readers = self._by_get.setdefault(key, set())
            if not readers:
                self._get_kinds[key[0]] = self._get_kinds.get(key[0], 0) + 1
            readers.add(ref)
        for kind, _ in reads.lists:
            self._by_list.setdefault(kind, set()).add(ref)
        for (name, looked), (build, seen) in reads.lookups:
            self._by_key.setdefault((name, looked), set()).add(ref)
            self._seen[(name, looked)] = seen
            self._keys.setdefault(name, set()).add(looked)
            if name not in self._builds:
                self._builds[name] = build
                self._indexes[name] = indexes.index(state, name, build)

    def _forget(self, ref: Ref) -> None:
        del self._results[ref]
        reads = self._reads.pop(ref)
        for key, _ in reads.gets:
            if _drop(self._by_get, key, ref):
                left = self._get_kinds[key[0]] - 1
                if left:
                    self._get_kinds[key[0]] = left
                else:
                    del self._get_kinds[key[0]]
        for kind, _ in reads.lists:
            _drop(self._by_list, kind, ref)
        for (name, looked), _ in reads.lookups:
            if _drop(self._by_key, (name, looked), ref):
                del self._seen[(name, looked)]
                keys = self._keys[name]
                keys.discard(looked)
                if not keys:
                    del self._keys[name], self._builds[name], self._indexes[name]


def _answer(index: Any, key: Any) -> Any:
    """What ``index`` answers to a lookup ``key`` as ``reads.Recording`` logs it."""
    if key is _WHOLE:
        return index
    if isinstance(key, _Get):
        return index.get(key.key)
    return index.get(key, _MISSING)


def _drop(table: dict[Any, set[Ref]], key: Any, ref: Ref) -> bool:
    """Take ``ref`` off ``table[key]``; True when no reader of ``key`` is left."""
    readers = table.get(key)
    if readers is None:
        return False
    readers.discard(ref)
    if readers:
        return False
    del table[key]
    return True
