"""Each object's last promoted version, kept on disk beside what is promoted, so holding back survives a restart.

Reconcile holds an object whose update breaks ``haproxy -c`` back at its last promoted version
(``webhook.reconcile.isolating``). That version is what the promoted view held; kept in memory only, a restart
forgot it, and the broken update of a live route was then left out (its route gone from traffic)
instead of held back. After each promotion the promoted view's objects are written here:

    OUTPUT/judged/
      objects/<sha256>.json   one object as it was judged, named by the sha256 of its canonical JSON
      view.json               which object (by hash) each ref had, the promoted version's content hash,
                              and the identity of the reconcile that judged them

Content addressing makes a promotion write only the objects that changed since the last one, and lets a
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
import json
import os
from collections.abc import Mapping
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
        self._hashes: dict[str, tuple[Obj, str]] = {}  # the object last hashed for a ref, and its hash
        self._on_disk: set[str] | None = None  # object files known to exist (listed once, then kept)
        self._saved: tuple[str, dict[str, str]] | None = None  # the record last written

    def _hash(self, ref: str, obj: Obj) -> tuple[str, bytes | None]:
        """The hash of ``obj``, and its bytes when it had to be serialized (not the object hashed last)."""
        known = self._hashes.get(ref)
        if known is not None and known[0] is obj:  # the state keeps an unchanged object's dict
            return known[1], None
        data = canonical(obj)
        digest = hashlib.sha256(data).hexdigest()
        self._hashes[ref] = (obj, digest)
        return digest, data

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
        entries: dict[str, str] = {}
        seen: set[str] = set()
        for kind in sorted(KEPT_KINDS):
            for obj in view.list(kind):
                key = "/".join(identity(obj))  # _key(ref_of(obj)), without a Ref per object per promotion
                seen.add(key)
                digest, data = self._hash(key, obj)
                entries[key] = digest
                if digest in self._on_disk:
                    continue
                payload = data if data is not None else canonical(obj)
                path = objects / f"{digest}.json"
                if digest not in listed or _size(path) != len(payload):
                    # not fsynced one by one (10,000 fsyncs took a minute on a busy disk): a file a crash
                    # cut short fails its hash on reading, and the record is not used (module docstring)
                    _write_atomically(path, payload, durable=False)
                self._on_disk.add(digest)
        for gone in self._hashes.keys() - seen:
            del self._hashes[gone]
        if self._saved == (content_hash, entries):
            return  # an unchanged run: the record on disk says this already
        record = {"format": FORMAT, "identity": self.identity, "promoted": content_hash, "objects": entries}
        _write_atomically(self.root / VIEW, (json.dumps(record, sort_keys=True) + "\n").encode())
        fsync_dir(self.root)
        used = set(entries.values())
        for stale in (self._on_disk | listed) - used:  # after the record that no longer names them is durable
            (objects / f"{stale}.json").unlink(missing_ok=True)
        self._on_disk &= used
        self._saved = (content_hash, entries)

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
