"""What a computation read from a State, so its result can be reused for another State.

``Recording(state)`` is a State view that logs every ``get``, every ``list`` and every lookup in a
per-state index (``validators.views.indexes``: the key looked up, not the whole index) together with what it
saw. ``Reads.frozen().hold(other)`` answers whether ``other`` gives the same answers to all of them: then a pure
function of the state that only read through the view returns the same result on ``other``.

"The same" is identity first (States share their unchanged objects: an Overlay hands out its base's
objects, a watch store keeps an object until it changes), then equality of content: an object
re-read from a snapshot or carried by an UPDATE review under its old resourceVersion is compared by
what it says, never by its resourceVersion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from validators.objects import Obj
from validators.states import State
from validators.views import indexes

_MISSING = object()  # an index lookup of a key the index does not hold
_WHOLE = object()  # the index was used as a whole (iterated, or it is not a mapping)


class _Get:
    """The key of a lookup made through a non-Mapping index's ``get(key)`` (``indexes.refs_by_key``)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Get) and self.key == other.key

    def __hash__(self) -> int:
        return hash(("get", self.key))


def _same(a: Any, b: Any) -> bool:
    return a is b or bool(a == b)


class Reads:
    """The log of one computation: (kind, namespace, name) gets, listed kinds, index lookups."""

    __slots__ = ("gets", "lists", "lookups")

    def __init__(self) -> None:
        self.gets: dict[tuple[str, str, str], Obj | None] = {}
        self.lists: dict[str, Sequence[Obj]] = {}
        self.lookups: dict[tuple[str, object], tuple[Callable[[State], Any], Any]] = {}

    def frozen(self) -> FrozenReads:
        """The log as it is now, compact (kept for as long as the result it describes)."""
        return FrozenReads(tuple(self.gets.items()), tuple(self.lists.items()), tuple(self.lookups.items()))

    def hold(self, state: State, indexed: dict[str, Any] | None = None) -> bool:
        return self.frozen().hold(state, indexed)

    def size(self) -> int:
        return len(self.gets) + len(self.lists) + len(self.lookups)


class FrozenReads:
    """A finished ``Reads``: tuples instead of dicts (one is kept per cached result)."""

    __slots__ = ("gets", "lists", "lookups")

    def __init__(self, gets: tuple[tuple[tuple[str, str, str], Obj | None], ...],
                 lists: tuple[tuple[str, Sequence[Obj]], ...],
                 lookups: tuple[tuple[tuple[str, object], tuple[Callable[[State], Any], Any]], ...]) -> None:
        self.gets, self.lists, self.lookups = gets, lists, lookups

    def hold(self, state: State, indexed: dict[str, Any] | None = None) -> bool:
        """True when ``state`` answers every logged read as it was answered then. ``indexed`` keeps the
        indexes of ``state`` looked up so far (name -> index), for many checks against one state."""
        if indexed is None:
            indexed = {}
        for (kind, ns, name), seen in self.gets:
            now = state.get(kind, ns, name)
            if now is not seen and now != seen:
                return False
        for kind, listed in self.lists:
            now_listed = state.list(kind)
            if now_listed is not listed and now_listed != listed:
                return False
        for (name, key), (build, seen) in self.lookups:
            value = indexed.get(name, _MISSING)
            if value is _MISSING:
                value = indexed[name] = indexes.index(state, name, build)
            if key is _WHOLE:
                if not _same(value, seen):
                    return False
            elif isinstance(key, _Get):
                if not _same(value.get(key.key), seen):
                    return False
            elif not _same(value.get(key, _MISSING), seen):
                return False
        return True


class _Watched(Mapping[Any, Any]):
    """An index handed to the computation: each key it looks up is logged with the value found."""

    __slots__ = ("_build", "_inner", "_name", "_reads")

    def __init__(self, inner: Mapping[Any, Any], name: str, build: Callable[[State], Any], reads: Reads) -> None:
        self._inner, self._name, self._build, self._reads = inner, name, build, reads

    def __getitem__(self, key: Any) -> Any:
        value = self._inner.get(key, _MISSING)
        self._reads.lookups[(self._name, key)] = (self._build, value)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        """``Mapping.get`` without raising KeyError for a key not held (most lookups of a sparse index)."""
        value = self._inner.get(key, _MISSING)
        self._reads.lookups[(self._name, key)] = (self._build, value)
        return default if value is _MISSING else value

    def _whole(self) -> None:
        self._reads.lookups[(self._name, _WHOLE)] = (self._build, self._inner)

    def __iter__(self) -> Iterator[Any]:
        self._whole()
        return iter(self._inner)

    def __len__(self) -> int:
        self._whole()
        return len(self._inner)


class _WatchedGets:
    """A non-Mapping index with a ``get(key)`` (a lookup table of refs): each key asked is logged with
    its answer, so a later version's index (a new object, patched from this one) is compared by the keys
    the computation asked, not by identity."""

    __slots__ = ("_build", "_inner", "_name", "_reads")

    def __init__(self, inner: Any, name: str, build: Callable[[State], Any], reads: Reads) -> None:
        self._inner, self._name, self._build, self._reads = inner, name, build, reads

    def get(self, key: Any) -> Any:
        value = self._inner.get(key)
        self._reads.lookups[(self._name, _Get(key))] = (self._build, value)
        return value


class Recording:
    """A State view of ``base`` that logs what is read through it into ``reads``."""

    __slots__ = ("_base", "reads")

    def __init__(self, base: State, reads: Reads | None = None) -> None:
        self._base = base
        self.reads = reads if reads is not None else Reads()

    @property
    def version(self) -> str:
        return self._base.version

    @property
    def recorded_base(self) -> State:
        """The state read through this view (``indexes.of_object`` keeps its answers there)."""
        return self._base

    def list(self, kind: str) -> Sequence[Obj]:
        listed = self._base.list(kind)
        self.reads.lists[kind] = listed
        return listed

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        obj = self._base.get(kind, namespace, name)
        self.reads.gets[(kind, namespace, name)] = obj
        return obj

    def recorded_index(self, name: str, build: Callable[[State], Any]) -> Any:
        """``indexes.index`` on the base State (built once per base version, not per view), watched."""
        value = indexes.index(self._base, name, build)
        if type(value) is dict or isinstance(value, Mapping):  # a dict without the Mapping ABC check
            return _Watched(value, name, build, self.reads)
        if isinstance(value, indexes.KeyLookup):
            return _WatchedGets(value, name, build, self.reads)
        self.reads.lookups[(name, _WHOLE)] = (build, value)
        return value
