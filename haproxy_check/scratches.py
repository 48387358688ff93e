"""Private scratch directories for one check: created 0700, files 0600, removed afterwards.

Every rendered file name is checked to stay inside the directory (no absolute paths, no ``..``): a
template or an object must never make the gate write elsewhere.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath


class UnsafePath(ValueError):
    """A rendered file name that would leave the scratch directory."""


def safe_relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(part in ("..", "") for part in path.parts) or "\x00" in name:
        raise UnsafePath(f"rendered file name {name!r} is not a plain relative path")
    return path


def write_tree(root: Path, files: Mapping[str, bytes]) -> None:
    for name, content in sorted(files.items()):
        relative = safe_relative(name)
        target = root.joinpath(*relative.parts)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(content)


@contextmanager
def scratch_dir(base: Path | None = None, *, keep: bool = False) -> Iterator[Path]:
    """A fresh private directory under ``base`` (default: the system temp dir)."""
    if base is not None:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="routegate-", dir=base))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
