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
    content_hash: str  # sha256 over sorted (path, content) of the files
    state_version: str  # the State.version the files were rendered from
    promoted_at: float  # unix time
    files: int


def content_hash(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Promoter:
    """Writes versions into ``output`` and swaps ``..data``; one Promoter per directory."""

    def __init__(self, output: Path, *, keep: int = 5) -> None:
        self.output = Path(output)
        self.keep = max(keep, 1)

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

    def promote(self, files: Mapping[str, bytes], *, state_version: str) -> Promoted:
        """Write ``files`` as a new version and make it live. Blocking I/O: run it off the event loop."""
        self.output.mkdir(parents=True, exist_ok=True)
        digest = content_hash(files)
        name = f"..v{self._next_number():06d}-{digest[:12]}"
        staging = self.output / f".tmp{name}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(mode=0o755)
        dirs = {staging}
        for sub in STABLE[1:]:  # present even when empty, so the stable links never dangle
            (staging / sub).mkdir(mode=0o755)
            dirs.add(staging / sub)
        for rel, data in sorted(files.items()):
            target = staging.joinpath(*scratches.safe_relative(rel).parts)
            for parent in reversed(target.relative_to(staging).parents[:-1]):
                made = staging / parent
                if made not in dirs:
                    made.mkdir(mode=0o755)
                    dirs.add(made)
            _write_file(target, data)
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
