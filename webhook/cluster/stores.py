"""Per-kind object stores with copy-on-write views, and the snapshot that implements ``State``.

A review reads a snapshot while watch events keep arriving, and it may await ``haproxy -c`` for a
while; the snapshot must not change under it, yet copying 10k routes per request is out. So a store
hands out its current dict as a frozen ``KindView`` and copies the dict (pointers only, never the
objects) the next time an event arrives after a view was taken. A burst of events between two
reviews costs one copy; a review between no events costs nothing. Sorted lists are computed lazily
once per view and shared by every snapshot that holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from validators.objects import Obj, Ref

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped kinds


class KindView:
    """One kind's objects at one point in time. Never mutated once handed out."""

    __slots__ = ("_items", "_sorted")

    def __init__(self, items: Mapping[Key, Obj]) -> None:
        self._items = items
        self._sorted: tuple[Obj, ...] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Key) -> Obj | None:
        return self._items.get(key)

    def sorted(self) -> tuple[Obj, ...]:
        if self._sorted is None:
            self._sorted = tuple(self._items[k] for k in sorted(self._items))
        return self._sorted


EMPTY_VIEW = KindView({})


class Store:
    """The live objects of one kind, written only by reflectors (one event loop, no locks needed)."""

    def __init__(self, kind: str, on_change: Callable[[str], None] = lambda kind: None) -> None:
        self.kind = kind
        self._items: dict[Key, Obj] = {}
        self._view: KindView | None = None  # the view currently sharing self._items
        self._on_change = on_change
        # Keys written since take_changes() last ran (None: unknown, after a whole-store replace), so a
        # new snapshot can tell validators.views.indexes what changed since the previous one.
        self._changed: set[Key] | None = set()
        # Keys whose removal was seen as a watch DELETED event (and that have not come back since): the
        # deletions webhook.reconcile.shrinkguard trusts, unlike keys a re-list or a lost CRD made disappear
        self._tombstones: set[Key] = set()

    def __len__(self) -> int:
        return len(self._items)

    def view(self) -> KindView:
        if self._view is None:
            self._view = KindView(self._items)
        return self._view

    def _writable(self) -> dict[Key, Obj]:
        if self._view is not None:  # someone may still read the old dict: copy before writing
            self._items = dict(self._items)
            self._view = None
        return self._items

    def put(self, key: Key, obj: Obj) -> bool:
        self._tombstones.discard(key)
        if self._items.get(key) == obj:
            return False  # e.g. a status-only update: nothing rendering reads has changed
        self._writable()[key] = obj
        self._note(key)
        self._on_change(self.kind)
        return True

    def delete(self, key: Key) -> bool:
        if key not in self._items:
            return False
        del self._writable()[key]
        self._note(key)
        self._on_change(self.kind)
        return True

    def observed_delete(self, key: Key) -> bool:
        """A deletion the watch reported: remembered as one the source vouches for."""
        self._tombstones.add(key)
        return self.delete(key)

    def deleted_by_watch(self, key: Key) -> bool:
        return key in self._tombstones

    def replace(self, items: Mapping[Key, Obj], scope: Callable[[Key], bool] | None = None) -> bool:
        """Make the store hold exactly ``items`` (within ``scope``, when only part of it is re-listed).

        Done in one step, so readers see either the old or the new list, never a mix or an empty
        store; unchanged content keeps the version (and cached baselines) as they are.
        """
        self._tombstones.difference_update(items)
        if scope is None:
            if items == self._items:
                return False
            self._items = dict(items)
            self._view = None
            self._changed = None
        else:
            stale = [k for k in self._items if scope(k) and k not in items]
            if not stale and all(self._items.get(k) == v for k, v in items.items()):
                return False
            target = self._writable()
            for k in stale:
                del target[k]
                self._note(k)
            for k, v in items.items():
                if target.get(k) != v:
                    target[k] = v
                    self._note(k)
        self._on_change(self.kind)
        return True

    def clear(self) -> bool:
        return self.replace({})

    def _note(self, key: Key) -> None:
        if self._changed is not None:
            self._changed.add(key)

    def take_changes(self) -> set[Key] | None:
        """The keys written since the last call (None: unknown), and start recording afresh."""
        changed, self._changed = self._changed, set()
        return changed


class ClusterSnapshot:
    """A read-only ``validators.states.State`` over the views of every store at one instant.

    Weakly referenceable: ``validators.views.indexes`` keeps a render's lookup indexes per State object, and
    a State it cannot reference gets its indexes rebuilt on every lookup (a quadratic render)."""

    __slots__ = ("__weakref__", "_prior", "_version", "_views", "provenance")

    def __init__(self, views: Mapping[str, KindView], version: int,
                 prior: tuple[ClusterSnapshot, frozenset[Ref]] | None = None, provenance: Any = None) -> None:
        self._views = views
        self._version = str(version)
        self._prior = prior
        # what the source can say about how objects left it (webhook.reconcile.shrinkguard.Provenance), or None
        self.provenance = provenance

    def prior(self) -> tuple[ClusterSnapshot, frozenset[Ref]] | None:
        """The previous snapshot and the objects changed since it (``validators.views.indexes`` patches the
        previous version's lookups instead of rescanning), or None when that is not known."""
        return self._prior

    def forget_prior(self) -> None:
        """Drop the link to the previous snapshot: only one step back is kept, never a chain."""
        self._prior = None

    @property
    def version(self) -> str:
        return self._version

    def list(self, kind: str) -> Sequence[Obj]:
        return self._views.get(kind, EMPTY_VIEW).sorted()

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._views.get(kind, EMPTY_VIEW).get((namespace, name))


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ("", "")
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
