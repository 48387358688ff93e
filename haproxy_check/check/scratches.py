"""Private scratch directories for one check: created 0700, files 0600, removed afterwards.

Every rendered file name is checked to stay inside the directory (no absolute paths, no ``..``): a
template or an object must never make the gate write elsewhere. The base directory (``--scratch-dir``)
is checked too (:func:`check_base`): in a directory another user can write without the sticky bit, or
one another user owns, that user could rename our scratch directory away and put their own files
(haproxy.cfg, certificates, maps) in its place between the render and ``haproxy -c``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import queue
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

# Removing a used scratch directory can take far longer than writing it (on an ext4 mounted with
# ``discard`` the last unlink waits for the disk: ~10 ms, half a small config's haproxy -c), and the
# verdict never depends on it: it happens on a thread of its own, after the caller moved on. One
# thread: removals queue in order, and the interpreter waits for it at exit (nothing is left behind).
#
# Not a ThreadPoolExecutor: removals are also queued from finalizers (``warmstarts``: a check started
# ahead that nobody took), and a finalizer runs wherever the garbage collector does, e.g. in a thread
# that is still starting while the main thread sits in ``ThreadPoolExecutor.submit`` holding
# concurrent.futures' global lock and waiting for that thread: a submit from the finalizer then waits for
# that lock for ever. ``SimpleQueue.put`` is safe there (it is made for ``__del__`` and finalizers), and
# the thread that takes from it is started when this module is imported, never from a finalizer.
_Job = tuple[Path | None, "Future[None]"]


class _Remover:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def start(self) -> None:
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="routegate-scratch-remover", daemon=True)
        self._thread.start()

    def submit(self, path: Path | None) -> Future[None]:
        done: Future[None] = Future()
        if self._pid != os.getpid():  # a forked child (a rule worker): the parent's thread is not here
            self.start()
        self._queue.put((path, done))
        return done

    def stop(self) -> None:
        """Let the queued removals finish, then end the thread (at interpreter exit)."""
        if self._thread is not None and self._pid == os.getpid():
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            path, done = job
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
            done.set_result(None)


_REMOVER = _Remover()
_REMOVER.start()
atexit.register(_REMOVER.stop)  # a daemon thread still runs when atexit hooks do: the queue drains first


class UnsafePath(ValueError):
    """A rendered file name that would leave the scratch directory."""


def safe_relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(part in ("..", "") for part in path.parts) or "\x00" in name:
        raise UnsafePath(f"rendered file name {name!r} is not a plain relative path")
    return path


def relative_parts(name: str) -> tuple[str, ...]:
    """``safe_relative(name).parts`` by string operations (no PurePosixPath: ~10 us a name, two dozen
    names on every review's path): the same names refused, the same parts ("" and "." dropped, as
    pathlib does) for the others."""
    if not name or name[0] == "/" or "\x00" in name:
        raise UnsafePath(f"rendered file name {name!r} is not a plain relative path")
    parts = tuple(part for part in name.split("/") if part and part != ".")
    if ".." in parts:
        raise UnsafePath(f"rendered file name {name!r} is not a plain relative path")
    return parts


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


def write_tree(root: Path, files: Mapping[str, bytes]) -> None:
    # On every review's path: each directory is made once (not asked for again per file) and each
    # file is written with plain os calls (no file object per file) at a path joined as a string.
    made: set[tuple[str, ...]] = {()}
    base = str(root)
    for name, content in sorted(files.items()):
        parts = relative_parts(name)
        for depth in range(1, len(parts)):
            if parts[:depth] not in made:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(base + "/" + "/".join(parts[:depth]), 0o700)
                made.add(parts[:depth])
        fd = os.open(base + "/" + "/".join(parts) if parts else base, _NEW_FILE, 0o600)
        try:
            written = os.write(fd, content) if content else 0
            if written < len(content):
                view = memoryview(content)[written:]
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)


class UnsafeBase(ValueError):
    """A scratch base directory other users could tamper with."""


def check_base(base: Path) -> None:
    """Refuse ``base`` when it, or a directory above it, is writable by other users without the sticky
    bit, or owned by a user other than us or root. One line, naming the directory at fault."""
    uid = os.geteuid()
    resolved = base.resolve()
    for where in (resolved, *resolved.parents):
        info = where.stat()
        if info.st_uid not in (uid, 0):
            raise UnsafeBase(f"{where} is owned by another user (uid {info.st_uid}); use a directory you own")
        shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if shared and not info.st_mode & stat.S_ISVTX:
            raise UnsafeBase(f"{where} is writable by other users without the sticky bit (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}); use a private directory (chmod go-w) or one with "
                             "the sticky bit")


MEMORY = Path("/dev/shm")  # noqa: S108 - checked like any base: private subdirectories, refused if unsafe


@functools.cache
def memory_base() -> Path | None:
    """A RAM-backed base (the tmpfs at /dev/shm) for a review's small scratch trees, or None.

    Writing a delta check's two dozen files to a disk-backed /tmp (ext4 with ``discard`` here) took
    2-4 ms, a fifth of a whole review at 10,000 routes; on tmpfs 0.4 ms. Only trees the checker writes
    inline (at most 64 KiB) go there, so it never holds more than a few such trees at once; a whole
    state's tree and every run with ``--scratch-dir`` stay on disk. Checked once per process like any
    base (``check_base``): a tmpfs mounted there, ours or root's, sticky if others may write it."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    if not any(line.split()[1:3] == [str(MEMORY), "tmpfs"] for line in mounts if len(line.split()) > 2):
        return None
    try:
        check_base(MEMORY)
    except (UnsafeBase, OSError):
        return None
    return MEMORY if os.access(MEMORY, os.W_OK | os.X_OK) else None


def remove_later(path: Path) -> Future[None]:
    """Remove ``path`` (a used scratch directory) on the remover thread; done when it is gone."""
    return _REMOVER.submit(path)


# Called first by ``wait_for_removals``: whatever else still holds a scratch directory lets it go
# (``warmstarts``: checks started ahead, waiting for a configuration that will not come).
BEFORE_EXIT: list[Callable[[], None]] = []


def wait_for_removals() -> None:
    """Return once every removal queued so far is done (the remover takes them in order): for a process
    that ends without waiting for its threads (``os._exit``)."""
    for release in BEFORE_EXIT:
        release()
    _REMOVER.submit(None).result()


def new_dir(base: Path | None = None) -> Path:
    """A fresh private directory under ``base`` (default: the system temp dir); the caller removes it."""
    if base is not None:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_base(base)  # again at every check: the directory may have changed since start
    return Path(tempfile.mkdtemp(prefix="routegate-", dir=base))


@contextmanager
def scratch_dir(base: Path | None = None, *, keep: bool = False, remove_after: bool = False) -> Iterator[Path]:
    """A fresh private directory under ``base`` (default: the system temp dir), removed when the block
    ends (``remove_after``: soon after, by :func:`remove_later`, not holding up the caller)."""
    path = new_dir(base)
    try:
        yield path
    finally:
        if keep:
            pass
        elif remove_after:
            remove_later(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
