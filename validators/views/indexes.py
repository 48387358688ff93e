"""Lookup indexes over a State, built once per state version and shared by every caller.

Rendering asks "which ReferenceGrants are in namespace X", "which BackendTLSPolicies target Service Y",
"which EndpointSlices belong to Service Z" once per backendRef; scanning the whole kind each time makes
a render quadratic. ``index(state, name, build)`` builds ``build(state)`` on first use and keeps it
while ``state.version`` is unchanged (weakly keyed: a State's indexes go away with it). Pure: no I/O.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from validators.changes import Operation
from validators.objects import Obj, Ref, identity, ref_of
from validators.states import Overlay, State

T = TypeVar("T")

_CACHE: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, Any]]] = weakref.WeakKeyDictionary()
_BUILDING: dict[tuple[int, str], threading.Lock] = {}  # the builds under way, per (state object, index)
_GUARD = threading.Lock()


def _tables(state: State) -> dict[str, tuple[str, Any]] | None:
    """The indexes built for ``state``: its own ``index_memo`` dict when it carries one (the states of
    ``validators.states``: no weak reference to make per lookup), else its entry in ``_CACHE``. Raises
    TypeError for a state that cannot be weakly referenced."""
    own = getattr(state, "index_memo", None)
    return own if type(own) is dict else _CACHE.get(state)


def index(state: State, name: str, build: Callable[[State], T], *, cheap: bool = False) -> T:
    """``build(state)``, cached per (state object, ``name``) until ``state.version`` changes.

    ``cheap``: a build of O(1) work (an empty memo, a view over another index) runs without the
    per-build lock: threads racing on it build equal values, and the first one stored is kept."""
    recorded = getattr(state, "recorded_index", None)
    if recorded is not None:  # a validators.views.reads.Recording view: the base's index, its lookups logged
        return recorded(name, build)  # type: ignore[no-any-return]
    try:
        per_state = _tables(state)
    except TypeError:  # a State that cannot be weakly referenced: build every time
        return build(state)
    version = state.version
    if per_state is not None:
        hit = per_state.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]  # type: ignore[no-any-return]
        if cheap:
            value = build(state)
            hit = per_state.setdefault(name, (version, value))
            if hit[0] != version:  # an older version's entry
                per_state[name] = hit = (version, value)
            return hit[1]
    # One build per (state, index) at a time: reviews of a new state version arriving together (in
    # worker threads) wait for the first one's build instead of each building the same index at once.
    key = (id(state), name)
    with _GUARD:
        lock = _BUILDING.setdefault(key, threading.Lock())
    try:
        with lock:
            per_state = _tables(state)
            hit = per_state.get(name) if per_state is not None else None
            if hit is not None and hit[0] == version:
                return hit[1]  # type: ignore[no-any-return]
            value = build(state)
            if per_state is None:
                per_state = {}
                with contextlib.suppress(TypeError):
                    _CACHE[state] = per_state
            per_state[name] = (version, value)
            return value
    finally:
        with _GUARD:
            if _BUILDING.get(key) is lock:
                del _BUILDING[key]


def _unchanged_base(state: State, reads: frozenset[str]) -> State:
    """The deepest state under ``state`` that holds the same objects of the kinds in ``reads``.

    A review's proposed state is an Overlay of one change on the cluster state; ``routegate check``
    stacks two (each input against all the others). An index that reads none of the changed kind is
    the base's index: built once for the base, not once per overlay."""
    while isinstance(state, Overlay) and state.changed.kind not in reads:
        state = state.base
    return state


unchanged_base = _unchanged_base


def index_reading(state: State, name: str, reads: frozenset[str], build: Callable[[State], T]) -> T:
    """``index(state, name, build)`` for a ``build`` that reads only objects of the kinds ``reads``."""
    return index(_unchanged_base(state, reads), name, build)


K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class RefsByKey(Protocol[K_contra]):
    def get(self, key: K_contra) -> Sequence[Ref]:
        """The objects contributing ``key``, in the state's (kind, namespace, name) order."""
        ...


class _Built(Generic[K]):
    """Refs by key; ``get`` is its only read (``validators.views.reads`` records the keys asked)."""

    def __init__(self, found: dict[K, list[Ref]], since: tuple[_Built[K], set[K]] | None = None) -> None:
        self._found = found
        # patched from a predecessor: it (weakly: never a chain of versions) and the keys whose answer
        # may differ from its answer; every other key's answer is the predecessor's (``touched_since``)
        self._since = (weakref.ref(since[0]), frozenset(since[1])) if since is not None else None

    def get(self, key: K) -> Sequence[Ref]:
        return self._found.get(key, ())


def touched_since(lookup: Any, prior: Any) -> frozenset[Any] | None:
    """The keys whose answer may differ between ``prior`` and ``lookup``, when ``lookup`` is a lookup
    patched from ``prior`` itself (``refs_by_key`` on a linked state); None when that is not known."""
    since = getattr(lookup, "_since", None) if type(lookup) is _Built else None
    if since is None or since[0]() is not prior:
        return None
    return since[1]  # type: ignore[no-any-return]


KeyLookup = _Built  # the type ``validators.views.reads`` recognises to log lookups key by key


def _scan(state: State, kinds: Sequence[str], keys_of: Callable[[Obj], Iterable[K]]) -> _Built[K]:
    found: dict[K, list[Ref]] = {}
    for kind in kinds:
        for obj in state.list(kind):
            ref = ref_of(obj)
            for key in dict.fromkeys(keys_of(obj)):
                found.setdefault(key, []).append(ref)
    return _Built(found)


def _patch(prior: _Built[K], before: State, after: State, changed: Iterable[Ref], kinds: Sequence[str],
           keys_of: Callable[[Obj], Iterable[K]]) -> _Built[K]:
    """A predecessor version's lookup with the objects that changed since re-keyed: a shallow copy of
    its table (pointers; no object is read) plus O(changed objects) work, instead of a rescan."""
    rank = {kind: i for i, kind in enumerate(kinds)}

    def order(ref: Ref) -> tuple[int, str, str]:
        return rank[ref.kind], ref.namespace, ref.name

    found = dict(prior._found)
    touched: set[K] = set()
    for ref in changed:
        old, new = before.get(ref.kind, ref.namespace, ref.name), after.get(ref.kind, ref.namespace, ref.name)
        for key in dict.fromkeys(keys_of(old)) if old is not None else ():
            touched.add(key)
            kept = [r for r in found.get(key, ()) if r != ref]
            if kept:
                found[key] = kept
            else:
                found.pop(key, None)
        for key in dict.fromkeys(keys_of(new)) if new is not None else ():
            touched.add(key)
            refs = [r for r in found.get(key, ()) if r != ref]
            bisect.insort(refs, ref, key=order)
            found[key] = refs
    return _Built(found, (prior, touched))


def prior_link(state: State) -> tuple[State, frozenset[Ref]] | None:
    """The previous version of ``state`` and the refs whose objects changed since, when ``state`` says
    (``webhook.cluster`` snapshots link to the snapshot before them, one step back); else None."""
    prior = getattr(state, "prior", None)
    link = prior() if callable(prior) else None
    return link


def _built(state: State, name: str, kinds: Sequence[str], keys_of: Callable[[Obj], Iterable[K]]) -> _Built[K]:
    """The lookup of a base state: patched from its predecessor's when the state names one (``prior``:
    the previous version and the refs changed since, as ``webhook.cluster`` snapshots do) and that one
    is still cached; scanned from scratch otherwise."""
    link = prior_link(state)
    if link is not None:
        before, changed = link
        wanted = [r for r in changed if r.kind in kinds]
        cached = peek(before, name)
        if isinstance(cached, _Built):
            return cached if not wanted else _patch(cached, before, state, wanted, kinds, keys_of)
    return _scan(state, kinds, keys_of)


def peek(state: State, name: str) -> Any:
    """The index ``name`` already built for ``state`` at its current version, or None (never builds)."""
    try:
        per_state = _tables(state)
    except TypeError:
        return None
    hit = per_state.get(name) if per_state is not None else None
    return hit[1] if hit is not None and hit[0] == state.version else None


class _Overlaid(Generic[K]):
    """The base's lookup with one object's contribution replaced: O(answer) per lookup, no rebuild."""

    def __init__(self, base: RefsByKey[K], ref: Ref, keys: frozenset[K], order: Callable[[Ref], Any]) -> None:
        self._base, self._ref, self._keys, self._order = base, ref, keys, order

    def get(self, key: K) -> Sequence[Ref]:
        refs = [r for r in self._base.get(key) if r != self._ref]
        if key in self._keys:
            bisect.insort(refs, self._ref, key=self._order)
        return refs


_ORDERS: dict[tuple[str, ...], tuple[frozenset[str], Callable[[Ref], tuple[int, str, str]]]] = {}


def _kinds_order(kinds: Sequence[str]) -> tuple[frozenset[str], Callable[[Ref], tuple[int, str, str]]]:
    """The kinds as a set, and the state order of refs of them (kinds in the given order, then namespace,
    name; another kind after them): made once per tuple of kinds, not per lookup."""
    key = tuple(kinds)
    got = _ORDERS.get(key)
    if got is None:
        rank = {kind: i for i, kind in enumerate(key)}

        def order(ref: Ref) -> tuple[int, str, str]:
            return rank.get(ref.kind, len(rank)), ref.namespace, ref.name

        got = _ORDERS[key] = (frozenset(key), order)
    return got


def refs_by_key(state: State, name: str, kinds: Sequence[str],
                keys_of: Callable[[Obj], Iterable[K]]) -> RefsByKey[K]:
    """Objects of ``kinds`` by each key ``keys_of(obj)`` yields (a function of the object alone).

    Built once per state version; an Overlay's lookup is derived from its base's by swapping the one
    changed object's keys, so a review or a ``routegate check`` input never rescans the kinds."""
    reads, order = _kinds_order(kinds)
    state = _unchanged_base(state, reads)
    if not isinstance(state, Overlay):
        return index(state, name, lambda s: _built(s, name, kinds, keys_of))

    def derive(s: State) -> RefsByKey[K]:
        assert isinstance(s, Overlay)
        change = s.change
        new = None if change.operation is Operation.DELETE else change.obj
        keys = frozenset(keys_of(new)) if new is not None else frozenset()
        return _Overlaid(refs_by_key(s.base, name, kinds, keys_of), change.ref, keys, order)

    return index(state, name, derive, cheap=True)


def _recording(state: State) -> bool:
    """Whether ``state`` is, or lies over, a ``validators.views.reads.Recording`` view: a computation on it
    must read through it (the reads are the point), so nothing read is served from a memo."""
    seen: State | None = state
    while seen is not None:
        if getattr(seen, "recorded_index", None) is not None:
            return True
        seen = getattr(seen, "base", None)
    return False


recording = _recording


def of_object(state: State, name: str, reads: frozenset[str], obj: Obj, compute: Callable[[], T]) -> T:
    """``compute()``, a pure function of ``obj`` and of the objects of the kinds ``reads`` in ``state``,
    memoized per state version for the objects of that state, and carried to the next version.

    The memo lives on the deepest state holding the same objects of those kinds (``_unchanged_base``:
    the base under a review's or ``routegate check``'s overlays) and keeps one value per object ref,
    valid while the state still holds that very object (objects of a State never change in place; a new
    version is a new memo; the entry holds the object, so its id names no other). An object only the
    overlays on top hold (a review's new object) is kept on ``state`` itself, gone with it; one no state
    holds is computed and not kept, so a memo never outgrows its state.

    A state linked to its predecessor (``prior_link``: the cluster's watch snapshots) starts with the
    predecessor's memo (``_carried``), less what the changes can affect. On a ``reads.Recording`` view
    (``validators.views.dependents`` judging an object) the entry keeps what ``compute`` read and a hit
    logs those reads into the view, as if it had computed them (``_recorded``): a Gateway judged again
    because one of its routes changed finds every other route's answer kept."""
    if getattr(state, "recorded_index", None) is not None:
        return _recorded(state, name, reads, obj, compute)
    base = _unchanged_base(state, reads)
    if getattr(base, "recorded_index", None) is not None:  # overlays of other kinds on a Recording view
        return _recorded(base, name, reads, obj, compute)
    if _recording(base):
        return compute()
    # Keyed by identity: an entry holds its object, so the id stays that object's while it lives.
    key = id(obj)
    memo: dict[int, _Entry] = index(base, name, _carried(name, reads), cheap=True)
    hit = memo.get(key)
    if hit is not None and hit[0] is obj and (hit[3] or _holds(memo, key, hit, base)):
        return hit[1]  # type: ignore[no-any-return]
    own: dict[int, _Entry] | None = None
    if state is not base:
        own = index(state, name, _new_memo, cheap=True)
        hit = own.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]  # type: ignore[no-any-return]
    value = compute()
    kind, namespace, name = identity(obj)
    if base.get(kind, namespace, name) is obj:
        memo[key] = (obj, value, None, True)
    elif own is not None and state.get(kind, namespace, name) is obj:
        own[key] = (obj, value, None, True)
    return value


# A memo entry: (the object, the value, what computing it read or None, whether it holds in the memo's
# state: False for an entry carried over a change of a kind it may read, until its reads are checked).
_Entry = tuple[Obj, Any, Any, bool]


def _recorded(view: Any, name: str, reads: frozenset[str], obj: Obj, compute: Callable[[], T]) -> T:
    """``of_object`` on a ``reads.Recording`` view: the memo of the state it records, whose entries keep
    what their computation read; a hit logs those reads into the view's log (the recorder sees every read
    the value depends on, as if computed), a miss computes through the view with a log of its own.

    Only for a view straight over a state whose memo this is (no overlay in between, no recording under
    it), and an object of that state; anything else is computed through the view, kept nowhere."""
    under = view.recorded_base
    if _unchanged_base(under, reads) is not under or _recording(under):
        return compute()
    key = id(obj)
    memo: dict[int, _Entry] = index(under, name, _carried(name, reads), cheap=True)
    hit = memo.get(key)
    # an entry's object is one of the memo's state (kept only for those; carried without the changed ones)
    if hit is not None and hit[0] is obj and hit[2] is not None and (hit[3] or _holds(memo, key, hit, under)):
        _replay(view.reads, hit[2])
        return hit[1]  # type: ignore[no-any-return]
    if under.get(*identity(obj)) is not obj:
        return compute()
    outer = view.reads
    view.reads = inner = type(outer)()
    try:
        value = compute()
    finally:
        view.reads = outer
    log = inner.frozen()
    _replay(outer, log)
    memo[key] = (obj, value, log, True)
    return value


def _replay(into: Any, log: Any) -> None:
    """Log a kept computation's reads (a ``reads.FrozenReads``) into a recorder's ``reads.Reads``."""
    into.gets.update(log.gets)
    into.lists.update(log.lists)
    into.lookups.update(log.lookups)


def _holds(memo: dict[int, _Entry], key: int, hit: _Entry, state: State) -> bool:
    """Whether a carried entry's value is still the one ``compute`` gives in ``state``: its reads (kept by
    ``_recorded``) answer as they did. Marked so once it is; dropped when it is not."""
    log = hit[2]
    if log is None or not log.hold(state):
        if memo.get(key) is hit:
            del memo[key]
        return False
    memo[key] = (hit[0], hit[1], log, True)
    return True


_CARRIERS: dict[tuple[str, frozenset[str]], Callable[[State], dict[int, _Entry]]] = {}


def _carried(name: str, reads: frozenset[str]) -> Callable[[State], dict[int, _Entry]]:
    got = _CARRIERS.get((name, reads))
    if got is None:
        got = _CARRIERS[(name, reads)] = _carrier(name, reads)
    return got


def _carrier(name: str, reads: frozenset[str]) -> Callable[[State], dict[int, _Entry]]:
    """The memo ``name`` of a state: its predecessor's (``prior_link``), when that one is still kept,
    without the entries of the objects that changed (their new versions are other objects), else empty.

    An entry is a pure function of its object and the objects of the kinds ``reads``: when no object of
    those kinds changed, every other entry holds as it is. When one did, an entry that kept its reads
    (``_recorded``) is carried unchecked and checked at its first use (``_holds``: only what it read
    decides), and one that did not is dropped. A copy: the predecessor's memo stays its own."""

    def build(state: State) -> dict[int, _Entry]:
        link = prior_link(state)
        if link is None:
            return {}
        before, changed = link
        prior = peek(before, name)
        if type(prior) is not dict or not prior:
            return {}
        if any(ref.kind in reads for ref in changed):
            memo = {k: (e[0], e[1], e[2], False) for k, e in prior.items() if e[2] is not None}
        else:
            memo = dict(prior)
        for ref in changed:
            old = before.get(ref.kind, ref.namespace, ref.name)
            if old is not None:
                hit = memo.get(id(old))
                if hit is not None and hit[0] is old:
                    del memo[id(old)]
        return memo

    return build


def _new_memo(state: State) -> dict[int, Any]:
    return {}


_LEAF_TYPES = frozenset({str, int, type(None)})


def exact_key(value: Any) -> bool:
    """Whether ``value`` is a key of exact ``str``/``int``/``None`` leaves in tuples, the only keys
    :func:`stored_twin` compares: ``==`` would take ``1`` for ``True`` and a ``str`` subclass for ``str``,
    which a message could print apart."""
    if type(value) is tuple and _LEAF_TYPES.issuperset(map(type, value)):
        return True  # a flat key (the key functions of attachments and backendrefs): judged at C speed
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is tuple:
            pending.extend(item)
        elif kind is not str and kind is not int and item is not None:
            return False
    return True


def stored_twin(state: State, reads: frozenset[str], obj: Obj, name: str,
                key_of: Callable[[Obj], Any]) -> tuple[State, Obj] | None:
    """The deepest state under ``state`` holding the same objects of the kinds ``reads``, and its own
    object of ``obj``'s ref, when that object is not ``obj`` but has the same ``key_of``; else None.

    For a computation that reads of ``obj`` only what ``key_of`` holds (values as the computation
    derives them, exact types: :func:`exact_key`) and of the state only the kinds ``reads``: its answer
    for the twin there is its answer for ``obj`` here, memoized for the state version with the twin's
    other askers (``routegate check`` asks of the defaulted copy of each input what its status asks of
    the stored one). ``key_of`` returns None when it cannot say; the twin's key is kept per state version."""
    base = _unchanged_base(state, reads)
    if base is state:
        return None
    stored = base.get(*identity(obj))
    if stored is None or stored is obj or _recording(base):
        return None
    key = key_of(obj)
    if key is None or not exact_key(key):
        return None
    # Keyed by identity: an entry holds the stored object, so the id stays that object's while it lives.
    keys: dict[int, tuple[Obj, Any]] = index(base, name, _new_memo, cheap=True)
    hit = keys.get(id(stored))
    if hit is not None and hit[0] is stored:
        twin_key = hit[1]
    else:
        twin_key = key_of(stored)
        if twin_key is not None and not exact_key(twin_key):
            twin_key = None
        keys[id(stored)] = (stored, twin_key)
    return (base, stored) if twin_key == key else None
