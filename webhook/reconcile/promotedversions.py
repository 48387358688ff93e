"""Each object's last promoted version, kept on disk beside what is promoted, so holding back survives a restart.

Reconcile holds an object whose update breaks ``haproxy -c`` back at its last promoted version
(``webhook.reconcile.isolating``). That version is what the promoted view held; kept in memory only, a restart
forgot it, and the broken update of a live route was then left out (its route gone from traffic)
instead of held back. After each promotion the promoted view's objects are written here:

    OUTPUT/judged/
      objects/<sha256>.json   one object as it was judged, named by the sha256 of its canonical JSON
      view.json               which object (by hash) each ref had, the promoted version's content hash,
                              and the identity of the reconcile that judged them

Content addressing makes a promotion write only the objects that changed since the last one (and a state
hands an unchanged object on as the very same dict, so only the objects not seen last time are serialized
and hashed: O(change), ``save``), and lets a
reader check every file against its name. ``view.json`` is replaced atomically (written, fsynced, renamed),
after the object files it names; those are not fsynced one by one (a first record of 10,000 objects took
a minute of fsyncs on a busy disk): after a crash that cut one short, its hash does not match, the record
is not used, the file is removed, and the next promotion writes it again (a new process reuses a file
of the right size only).

Nothing read back is trusted as it is (``restore``):
- the file must be ours: same format, same identity (GatewayClass scope, render settings), and it must
  describe the version that is live in this output directory (``last-known-good.json``'s content hash);
  another reconcile's, an older promotion's, a copied directory's file is ignored;
- each object must hash to its name, be the ref it is filed under, and be an earlier version of the object
  stored now: the same ``metadata.uid`` (an object of another cluster, or one deleted and created again
  under the same name, is not the same object) and no later ``metadata.generation``;
- and the view it gives is judged again (rendered and ``haproxy -c``-checked with the objects stored now)
  before isolation may hold anything back at it; isolation then judges every view it promotes anyway.

Only the kinds a tenant edits into a broken state are kept (the reviewed kinds, GatewayClasses and
Services); Secrets are never written here (their keys are in the promoted files already), and endpoints
are taken as they are now.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from haproxy_check.runtime.promotion import fsync_dir
from validators.objects import REVIEWED_KINDS, Obj, Ref, dig, identity, ref_of
from validators.states import MemoryState, State, Without
from validators.views.scopes import Scope
from webhook.reconcile import leaveouts

log = structlog.get_logger("routegate.reconcile")

DIR = "judged"
OBJECTS = "objects"
VIEW = "view.json"
FORMAT = 1
KEPT_KINDS = REVIEWED_KINDS | {"GatewayClass", "Service"}


def canonical(obj: Obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _key(ref: Ref) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    os.rename(tmp, path)


class PromotedVersions:
    """The on-disk record of one output directory's promoted view (module docstring).

    ``identity``: what must match for a record to be read back (the scope and the render settings);
    values are compared as written, never interpreted."""

    def __init__(self, output: Path, identity: Mapping[str, str]) -> None:
        self.root = Path(output) / DIR
        self.identity = dict(identity)
        # per kept kind: the objects last recorded (held, so their ids stay theirs) and each one's entry;
        # a state keeps an unchanged object's very dict, so a save looks again only at objects it has not
        # seen: O(changed objects) hashing and writing, not a serialization of every object per promotion
        self._objects: dict[str, tuple[Sequence[Obj], dict[int, tuple[str, str]]]] = {}
        self._entries: dict[str, str] = {}  # key -> digest, for every kept object last recorded
        self._on_disk: set[str] | None = None  # object files known to exist (listed once, then kept)
        self._texts: dict[str, str] = {}  # per kind: its members of view.json's "objects", as JSON text
        self._saved: tuple[str, bytes] | None = None  # the record last written
        self.hashed = 0  # objects serialized and hashed by the last save

    @property
    def recorded(self) -> str | None:
        """The content hash this process last recorded a view for (None: none yet)."""
        return self._saved[0] if self._saved is not None else None

    def save(self, view: State, content_hash: str) -> None:
        """Record ``view``'s objects as the promoted version ``content_hash``. Blocking I/O."""
        objects = self.root / OBJECTS
        objects.mkdir(parents=True, exist_ok=True)
        listed: set[str] = set()
        if self._on_disk is None:  # a previous process's files: pruned below, reused only at the right size
            listed = {p.stem for p in objects.glob("*.json")}
            self._on_disk = set()
        self.hashed = 0
        changed = False
        for kind in sorted(KEPT_KINDS):
            now = view.list(kind)
            before, keyed = self._objects.get(kind, ((), {}))
            if now is before:
                continue
            gone, came = _difference(before, now, keyed)
            self._objects[kind] = (now, keyed)
            if not gone and not came:
                continue
            changed = True
            for key in gone:  # before the new ones: a key deleted and created again is the new object's
                self._entries.pop(key, None)
            for obj in came:
                key = "/".join(identity(obj))  # _key(ref_of(obj)), without a Ref per object
                data = canonical(obj)
                digest = hashlib.sha256(data).hexdigest()
                self.hashed += 1
                keyed[id(obj)] = (key, digest)
                self._entries[key] = digest
                if digest in self._on_disk:
                    continue
                path = objects / f"{digest}.json"
                if digest not in listed or _size(path) != len(data):
                    # not fsynced one by one (10,000 fsyncs took a minute on a busy disk): a file a crash
                    # cut short fails its hash on reading, and the record is not used (module docstring)
                    _write_atomically(path, data, durable=False)
                self._on_disk.add(digest)
            # this kind's members of view.json's "objects", sorted: a kind no object of which changed keeps its text
            self._texts[kind] = json.dumps(dict(keyed.values()), sort_keys=True)[1:-1]
        if not changed and self._saved is not None and self._saved[0] == content_hash:
            return  # an unchanged run: the record on disk says this already
        # json.dumps(record, sort_keys=True), with the objects as each kind's text: "Kind/namespace/name"
        # keys sort by kind first (a kind name is letters and digits, all after "/")
        head = json.dumps({"format": FORMAT, "identity": self.identity}, sort_keys=True)[:-1]
        objects_text = ", ".join(self._texts[k] for k in sorted(self._texts) if self._texts[k])
        data = f'{head}, "objects": {{{objects_text}}}, "promoted": {json.dumps(content_hash)}}}\n'.encode()
        if self._saved == (content_hash, data):
            return
        _write_atomically(self.root / VIEW, data)
        fsync_dir(self.root)
        used = set(self._entries.values())
        for stale in (self._on_disk | listed) - used:  # after the record that no longer names them is durable
            (objects / f"{stale}.json").unlink(missing_ok=True)
        self._on_disk &= used
        self._saved = (content_hash, data)

    def forget(self) -> None:
        """No record (no view is known good): a restart holds nothing back at recorded versions. Blocking."""
        (self.root / VIEW).unlink(missing_ok=True)
        if self.root.is_dir():
            fsync_dir(self.root)
        self._saved = None

    def load(self, live_hash: str | None) -> dict[Ref, Obj] | None:
        """The recorded objects of the live version, checked against their names; None (logged) when there
        is no usable record. Blocking I/O."""
        why = self._unusable(live_hash)
        if isinstance(why, str):
            log.info("promoted versions on disk not used", directory=str(self.root), why=why)
            return None
        return why

    def _unusable(self, live_hash: str | None) -> dict[Ref, Obj] | str:
        if live_hash is None:
            return "nothing is live in the output directory"
        try:
            record = json.loads((self.root / VIEW).read_bytes())
        except FileNotFoundError:
            return "no record"
        except (OSError, ValueError) as exc:
            return f"unreadable record: {exc}"
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            return "another format"
        if record.get("identity") != self.identity:
            return "written by a reconcile of another scope or render settings"
        if record.get("promoted") != live_hash:
            return "it describes another version than the live one"
        entries = record.get("objects")
        if not isinstance(entries, dict):
            return "no objects"
        out: dict[Ref, Obj] = {}
        for key, digest in entries.items():
            if not isinstance(key, str) or not isinstance(digest, str) or len(digest) != 64 or \
                    any(c not in "0123456789abcdef" for c in digest):
                return f"a malformed entry: {key!r}"
            try:
                data = (self.root / OBJECTS / f"{digest}.json").read_bytes()
            except OSError as exc:
                return f"{key}: {exc}"
            if hashlib.sha256(data).hexdigest() != digest:
                # cut short by a crash (they are not fsynced one by one): written again by the next promotion
                (self.root / OBJECTS / f"{digest}.json").unlink(missing_ok=True)
                if self._on_disk is not None:
                    self._on_disk.discard(digest)
                return f"{key}: its file does not match its hash"
            try:
                obj = json.loads(data)
            except ValueError as exc:
                return f"{key}: {exc}"
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
                return f"{key}: not an object"
            ref = ref_of(obj)
            if _key(ref) != key or ref.kind not in KEPT_KINDS:
                return f"{key}: its file holds {ref}"
            out[ref] = obj
        return out


def _difference(before: Sequence[Obj], now: Sequence[Obj],
                keyed: dict[int, tuple[str, str]]) -> tuple[list[str], list[Obj]]:
    """The keys of the objects of ``before`` not in ``now``, and the objects of ``now`` not recorded
    (``keyed``: id -> (key, digest) of ``before``'s objects, updated in place). Objects are compared by
    identity; a list of the same length is compared position by position in C (a change replaces an
    object where it stood), else by sets of ids."""
    if len(before) == len(now):
        at = list(itertools.compress(range(len(now)), map(operator.is_not, before, now)))
        if len(at) <= len(now) // 8:
            came_ids = {id(now[i]) for i in at}
            gone = [keyed.pop(id(before[i]))[0] for i in at if id(before[i]) not in came_ids]
            return gone, [obj for i in at if id(obj := now[i]) not in keyed]
    ids = {id(obj) for obj in now}
    gone = [keyed.pop(ident)[0] for ident in [ident for ident in keyed if ident not in ids]]
    return gone, [obj for obj in now if id(obj) not in keyed]


def same_objects(recorded: Mapping[Ref, Obj], state: State) -> dict[Ref, Obj]:
    """The recorded versions that are earlier versions of objects stored in ``state`` (module docstring)."""
    out: dict[Ref, Obj] = {}
    for ref, old in recorded.items():
        now = state.get(ref.kind, ref.namespace, ref.name)
        if now is None:
            continue  # deleted since: nothing to hold back
        if dig(old, "metadata", "uid") != dig(now, "metadata", "uid"):
            continue  # another object under the same name (another cluster, or deleted and created again)
        was, is_ = dig(old, "metadata", "generation"), dig(now, "metadata", "generation")
        if isinstance(was, int) and isinstance(is_, int) and was > is_:
            continue  # a later version than the stored one cannot have been promoted before it
        out[ref] = old
    return out


def view_with(state: State, recorded: Mapping[Ref, Obj]) -> State:
    """``state`` as the recorded versions had it: each kept kind's object at its recorded version, hidden
    when none is recorded (new since that promotion); other kinds as stored now."""
    replaced: dict[Ref, Obj] = {}
    hidden: set[Ref] = set()
    for kind in KEPT_KINDS:
        for obj in state.list(kind):
            ref = ref_of(obj)
            old = recorded.get(ref)
            if old is None:
                hidden.add(ref)
            elif old != obj:
                replaced[ref] = old
    view = leaveouts.replacing(state, replaced) if replaced else state
    return Without(view, frozenset(hidden)) if hidden else view


def as_state(recorded: Mapping[Ref, Obj], version: str) -> State:
    return MemoryState.keyed(dict(recorded), version=version)


def identity_of(scope: Scope, settings: object) -> dict[str, str]:
    """What a record must have been written under to be read back: the scope and a digest of the render
    settings (they hold the cookie key, which is not written out)."""
    return {"classes": ",".join(sorted(scope.classes)), "controllers": ",".join(sorted(scope.controllers)),
            "render": hashlib.sha256(repr(settings).encode()).hexdigest()}
