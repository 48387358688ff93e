"""Atomic promotion of a checked render into the directory a data plane reads.

The layout is a Kubernetes ConfigMap volume's (``..data`` swapped by rename(2)), so a reader never sees
a half-written set:

    OUTPUT/
      ..v000042-1a2b3c4d5e6f/      one complete, fsynced version (haproxy.cfg, maps/, certs/, spoe/)
      ..data -> ..v000042-1a2b3c4d5e6f
      haproxy.cfg -> ..data/haproxy.cfg     stable names, made once
      maps -> ..data/maps
      certs -> ..data/certs
      spoe -> ..data/spoe
      last-known-good.json         content hash, time and state version of the live version

A version is written under a temporary name, every file and directory fsynced, renamed to its final
name, then a new symlink ``..data_tmp`` is renamed over ``..data`` (atomic on POSIX) and OUTPUT fsynced.
Private keys (files holding a PEM private key) are 0600, everything else 0644. The oldest versions
beyond ``keep`` are removed after the swap, never the live one.

Only the files whose bytes changed are written: a file whose sha256 equals the one this Promoter wrote
into the live version is a hard link to that file (versions are never written in place, so the link
is the very bytes, fsynced already, with the mode its content gives). The version directory is still
complete before its rename and the ``..data`` swap, so a reader sees one version or the other, never a
mix; pruning an old version removes only its names. A change of one route in a 10,000-route state
writes haproxy.cfg and the few files it touched, not every map (``tests/reconcile/test_promoted_files.py``
proves the directory byte for byte equal to a from-scratch promotion).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from haproxy_check.check import scratches

DATA = "..data"
RECORD = "last-known-good.json"
STABLE = ("haproxy.cfg", "maps", "certs", "spoe")  # spoe: the ExternalAuth SPOE config (extauth.py)
_VERSION = re.compile(r"^\.\.v(\d{6,})-[0-9a-f]{12}$")
_PRIVATE_KEY = b"PRIVATE KEY-----"


@dataclass(frozen=True, slots=True)
class Promoted:
    version: str  # the directory name under OUTPUT
    content_hash: str  # sha256 over sorted (path, length, sha256 of the content) of the files
    state_version: str  # the State.version the files were rendered from
    promoted_at: float  # unix time
    files: int


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(files: Mapping[str, bytes], digests: Mapping[str, str] | None = None) -> str:
    """sha256 over sorted (path, length, sha256 of the content): each file's own digest may come from a
    cache (``FileDigests``), so a version that changed a few files hashes those few, not every byte."""
    digest = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        own = digests[name] if digests is not None else file_digest(data)
        digest.update(f"{name}\0{len(data)}\0{own}\0".encode())
    return digest.hexdigest()


class FileDigests:
    """Each file's sha256, computed again only for bytes not seen under that path last time: the patched
    render hands an unchanged file on as the very same ``bytes`` object (immutable, and held here so its
    identity cannot be reused), so a run hashes only what changed."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[bytes, str]] = {}

    def of(self, files: Mapping[str, bytes]) -> dict[str, str]:
        known: dict[str, tuple[bytes, str]] = {}
        for name, data in files.items():
            seen = self._known.get(name)
            known[name] = seen if seen is not None and seen[0] is data else (data, file_digest(data))
        self._known = known
        return {name: digest for name, (_, digest) in known.items()}


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable: fsync the directory itself."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    mode = 0o600 if _PRIVATE_KEY in data else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        _write_all(fd, data)
        os.fchmod(fd, mode)  # not subject to the umask
        os.fsync(fd)
    finally:
        os.close(fd)


def _linked(source: Path, target: Path, size: int) -> bool:
    """``target`` made a hard link to the live version's ``source`` (the same bytes, known by digest);
    False, and nothing made, when it cannot be (pruned by hand, another filesystem, another size)."""
    try:
        if source.stat().st_size != size:
            return False
        os.link(source, target)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Promoter:
    """Writes versions into ``output`` and swaps ``..data``; one Promoter per directory."""

    def __init__(self, output: Path, *, keep: int = 5) -> None:
        self.output = Path(output)
        self.keep = max(keep, 1)
        # the version this Promoter made live last, and each of its files' sha256: a file of the next
        # version with the same digest is linked, not written (module docstring)
        self._wrote: tuple[str, dict[str, str]] | None = None
        self.written = 0  # files written (not linked) by the last promotion

    def last_known_good(self) -> Promoted | None:
        try:
            data = json.loads((self.output / RECORD).read_text(encoding="utf-8"))
            return Promoted(**data)
        except (OSError, ValueError, TypeError):
            return None

    def live(self) -> Path | None:
        """The directory ``..data`` points at, or None before the first promotion."""
        link = self.output / DATA
        return self.output / os.readlink(link) if link.is_symlink() else None

    def versions(self) -> list[str]:
        """The version directories kept under ``output``, newest first."""
        try:
            found = [(int(m.group(1)), p.name) for p in self.output.iterdir() if (m := _VERSION.match(p.name))]
        except OSError:
            return []
        return [name for _, name in sorted(found, reverse=True)]

    def _next_number(self) -> int:
        numbers = [int(m.group(1)) for p in self.output.iterdir() if (m := _VERSION.match(p.name))]
        return max(numbers, default=0) + 1

    def _reusable(self) -> tuple[Path, dict[str, str]]:
        """The live version's directory and its files' digests, when this Promoter wrote it (else none)."""
        if self._wrote is None:
            return self.output, {}
        live = self.live()
        if live is None or live.name != self._wrote[0] or not live.is_dir():
            return self.output, {}
        return live, self._wrote[1]

    def promote(self, files: Mapping[str, bytes], *, state_version: str,
                digests: Mapping[str, str] | None = None) -> Promoted:
        """Write ``files`` as a new version and make it live. ``digests``: each file's sha256, when the
        caller knows them (``FileDigests``). Blocking I/O: run it off the event loop."""
        self.output.mkdir(parents=True, exist_ok=True)
        own = dict(digests) if digests is not None else {name: file_digest(data) for name, data in files.items()}
        digest = content_hash(files, own)
        live, reusable = self._reusable()
        name = f"..v{self._next_number():06d}-{digest[:12]}"
        staging = self.output / f".tmp{name}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(mode=0o755)
        dirs = {staging}
        written = 0
        for sub in STABLE[1:]:  # present even when empty, so the stable links never dangle
            (staging / sub).mkdir(mode=0o755)
            dirs.add(staging / sub)
        for rel, data in sorted(files.items()):
            parts = scratches.safe_relative(rel).parts
            target = staging.joinpath(*parts)
            for parent in reversed(target.relative_to(staging).parents[:-1]):
                made = staging / parent
                if made not in dirs:
                    made.mkdir(mode=0o755)
                    dirs.add(made)
            if reusable.get(rel) == own[rel] and _linked(live.joinpath(*parts), target, len(data)):
                continue
            _write_file(target, data)
            written += 1
        for directory in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
            fsync_dir(directory)
        os.rename(staging, self.output / name)
        tmp_link = self.output / f"{DATA}_tmp"
        if tmp_link.is_symlink() or tmp_link.exists():
            tmp_link.unlink()
        os.symlink(name, tmp_link)
        os.rename(tmp_link, self.output / DATA)  # the swap: atomic, readers see old or new
        for stable in STABLE:
            link = self.output / stable
            if not link.is_symlink():
                os.symlink(f"{DATA}/{stable}", link)
        self._wrote = (name, own)
        self.written = written
        record = Promoted(name, digest, state_version, time.time(), len(files))
        self._write_record(record)
        fsync_dir(self.output)
        self._prune(name)
        return record

    def _write_record(self, record: Promoted) -> None:
        tmp = self.output / f".{RECORD}.tmp"
        tmp.write_text(json.dumps(asdict(record), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.rename(tmp, self.output / RECORD)

    def _prune(self, live: str) -> None:
        versions = sorted((p for p in self.output.iterdir() if _VERSION.match(p.name)),
                          key=lambda p: int(_VERSION.match(p.name).group(1)))  # type: ignore[union-attr]
        for old in versions[:-self.keep]:
            if old.name != live:
                shutil.rmtree(old, ignore_errors=True)
        for stale in self.output.glob(".tmp..v*"):  # left by a promotion that crashed midway
            shutil.rmtree(stale, ignore_errors=True)
