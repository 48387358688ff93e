"""Writing certificate files so that a reader never sees half a file or a mismatched pair.

Single files are written to a temporary name and renamed. A set of files that must change together
(certificate + key) is written the way kubelet writes Secret volumes: into a fresh `..<stamp>` directory,
then one `..data` symlink is swapped atomically, and the public names are symlinks through `..data`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

KEY_MODE = 0o600
PUBLIC_MODE = 0o644
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) so that only the owner can enter it. An existing directory is left
    as it is: `--out .` must not change the mode of the user's cwd, and a pod's emptyDir is not ours."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        path.chmod(DIR_MODE)
    return path


def write_atomic(path: Path, data: bytes, *, mode: int) -> None:
    """Write `data` to `path` with `mode` from the first byte on (never briefly world-readable)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # the umask may have narrowed it; never widened
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_together(directory: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    """Replace every file in `files` (name -> (content, mode)) in one atomic step, kubelet style."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / f"..{secrets.token_hex(6)}"
    stamp.mkdir(mode=0o755)
    for name, (data, mode) in files.items():
        write_atomic(stamp / name, data, mode=mode)
    data_link = directory / "..data"
    old = data_link.resolve() if data_link.is_symlink() else None
    tmp_link = directory / f"..data_{secrets.token_hex(4)}"
    tmp_link.symlink_to(stamp.name)
    os.replace(tmp_link, data_link)
    for name in files:
        public = directory / name
        if not public.is_symlink():
            with contextlib.suppress(FileNotFoundError):
                public.unlink()
            link = directory / f".{name}.{secrets.token_hex(4)}.lnk"
            link.symlink_to(f"..data/{name}")
            os.replace(link, public)
    if old is not None and old != stamp.resolve() and old.parent == directory.resolve():
        shutil.rmtree(old, ignore_errors=True)
