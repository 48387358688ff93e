"""``routegate render --out``: write the rendered files without following anything planted there.

OUTDIR must be new or empty (``--force`` allows a non-empty one). Every file is created relative to
a directory descriptor with ``O_NOFOLLOW | O_EXCL``, every subdirectory opened with ``O_NOFOLLOW``,
so a symlink already in OUTDIR (``haproxy.cfg -> ~/.bashrc``, ``maps -> /etc``) is never written
through: without ``--force`` it is an error, with ``--force`` the link itself is replaced. Files that
hold a private key are created 0600, the rest 0644.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from haproxy_check.check import scratches
from webhook.setuperrors import SetupError

PRIVATE, PUBLIC = 0o600, 0o644
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def prepare(out: str, *, force: bool) -> Path:
    """OUTDIR, created when missing; a SetupError naming ``--out`` when it cannot be used."""
    path = Path(out)
    try:
        if path.exists() and not path.is_dir():
            raise SetupError(f"--out {out}: exists and is not a directory")
        path.mkdir(parents=True, exist_ok=True)
        if not force and any(path.iterdir()):
            raise SetupError(f"--out {out}: not empty; choose a new directory, or pass --force to replace "
                             "the files routegate writes there")
    except OSError as exc:
        raise SetupError(f"--out {out}: cannot create it ({exc.strerror or exc})") from None
    return path


def is_private(content: bytes) -> bool:
    return b"PRIVATE KEY-----" in content


def write(out: Path, files: Mapping[str, bytes], *, force: bool) -> None:
    root = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name, content in sorted(files.items()):
            relative = PurePosixPath(*scratches.safe_relative(name).parts)
            try:
                _write_one(root, relative, content, force=force)
            except OSError as exc:
                raise SetupError(f"--out {out}: cannot write {relative} ({exc.strerror or exc}); "
                                 "a symlink or another file is in the way") from None
    finally:
        os.close(root)


def _write_one(root: int, relative: PurePosixPath, content: bytes, *, force: bool) -> None:
    fds: list[int] = []
    parent = root
    try:
        for part in relative.parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=parent)
            parent = os.open(part, _DIR_FLAGS, dir_fd=parent)  # ELOOP/ENOTDIR on a planted symlink
            fds.append(parent)
        leaf = relative.parts[-1]
        if force:
            try:
                info = os.stat(leaf, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISDIR(info.st_mode):
                    raise IsADirectoryError(21, "a directory is in the way", str(relative))
                os.unlink(leaf, dir_fd=parent)  # the entry itself, never what a symlink points at
        mode = PRIVATE if is_private(content) else PUBLIC
        fd = os.open(leaf, _FILE_FLAGS, mode, dir_fd=parent)
        try:
            os.fchmod(fd, mode)  # the umask must not widen or narrow it
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    finally:
        for fd in reversed(fds):
            os.close(fd)
