"""``haproxy -c`` started ahead of its configuration: the process start off a review's path.

Most of a review's ``haproxy -c`` passes before haproxy reads a line: the exec of the sandbox's wrappers
(``prlimit``, ``unshare --net``: a new network namespace), the dynamic loader and the libraries'
initialisation (``haproxy -v`` alone is about 6 ms of a 12 ms check of a closure on 2.8). None of that
depends on what the review rendered. So once a small check ran, the next one is started ahead, as the
runner starts every check (same argv, environment, limits, session and cwd: ``Runner._launch``), in a
fresh private scratch directory whose ``haproxy.cfg`` is a FIFO (a named pipe) that haproxy blocks
reading. ``Runner`` keeps two waiting and hands a review the oldest: haproxy needs 8-12 ms to
reach its configuration, about a lone review's whole time, so one started as the previous check ended
would not be there yet. A review writes its other files (maps, certificates) into that directory, then
its whole configuration into the FIFO, and closes it: haproxy reads those bytes under the same name as from a
file, with every file it names in place, and judges them as it would have (the same alerts, file name
and line numbers). The deadline counts from the handover.

The FIFO's write end is held by this process until the handover, which waits until haproxy has the
FIFO open (``/proc/PID/fd``): then closing it ends haproxy's configuration right after the bytes
written (before, the bytes would go with the pipe and haproxy would wait for another writer). If the
server dies, its end closes: haproxy reads an empty configuration and exits (only a server killed
within the first milliseconds of a start leaves that haproxy waiting for a writer). A runner that is
closed or garbage collected, and the interpreter at exit, kill the process waiting and remove its
directory (``weakref.finalize``).
Only small trees in the memory base get one (``Checker``): nothing else is written ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from haproxy_check.check import scratches

CONFIG = "haproxy.cfg"


@dataclass(slots=True)
class Waiting:
    """A started ``haproxy -c`` blocked reading ``workdir/haproxy.cfg`` (a FIFO whose write end is ``fifo``)."""

    workdir: Path
    proc: subprocess.Popen[bytes]
    fifo: int  # this process's end of the FIFO, opened read-write so that haproxy's open never blocks
    binary: tuple[int, ...]  # ``identity`` of the binary when started: one replaced since is not used
    owner: int = field(default_factory=os.getpid)  # the process that started it: only it may end it

    def current(self, binary: str) -> bool:
        """Still alive, and started from the file at ``binary`` now (an upgrade or a broken replacement
        is what the next check must run)."""
        return self.alive() and identity(binary) == self.binary

    def alive(self) -> bool:
        return self.proc.poll() is None


def identity(path: str) -> tuple[int, ...]:
    """What tells a replaced file at ``path`` from the one there before (empty when it is gone)."""
    try:
        info = os.stat(path)
    except OSError:
        return ()
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


# Started and not handed over yet: what ``scratches.wait_for_removals`` (a process about to ``os._exit``)
# discards first, since no finalizer runs then.
_WAITING: dict[int, Waiting] = {}


def _discard_all() -> None:
    for waiting in list(_WAITING.values()):
        discard(waiting)


scratches.BEFORE_EXIT.append(_discard_all)


def _forget_in_child() -> None:
    """A forked child (a rule worker) holds copies of the FIFOs' write ends: closed, or haproxy would not
    see the end of its configuration when this process closes its own (it would wait to the deadline, and
    every check handed over while a worker lives would time out); and the checks are the parent's, never
    the child's to discard."""
    for waiting in _WAITING.values():
        if waiting.fifo >= 0:
            with contextlib.suppress(OSError):
                os.close(waiting.fifo)
    _WAITING.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def supported() -> bool:
    """Waiting on a child needs a pidfd (Linux 5.3+); reading the pipe size needs F_GETPIPE_SZ."""
    if not hasattr(os, "pidfd_open") or not hasattr(fcntl, "F_GETPIPE_SZ"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def start(base: Path, argv: list[str], env: Mapping[str, str], preexec: Callable[[], None] | None,
          binary: str) -> Waiting:
    """A ``haproxy -c`` started in a new scratch directory under ``base``, waiting for its configuration."""
    started_from = identity(binary)
    workdir = Path(scratches.new_dir(base))
    fifo = -1
    try:
        os.mkfifo(workdir / CONFIG, 0o600)
        fifo = os.open(workdir / CONFIG, os.O_RDWR | os.O_CLOEXEC)
        proc = subprocess.Popen(argv, cwd=workdir, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec)
    except BaseException:
        if fifo >= 0:
            os.close(fifo)
        scratches.remove_later(workdir)
        raise
    waiting = Waiting(workdir, proc, fifo, started_from)
    _WAITING[proc.pid] = waiting
    return waiting


def discard(waiting: Waiting) -> None:
    """Kill a started check that will not be used, reap it and remove its directory. Once: it may be asked
    again (by the exit hook, then by its Runner's finalizer), and its FIFO's number may by then be another
    file's, which closing again would take from whoever opened it (a spawn's pipe: "Bad file descriptor")."""
    if waiting.owner != os.getpid():  # a forked child's copy (a finalizer, an exit hook): the parent's check
        return
    _WAITING.pop(waiting.proc.pid, None)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(waiting.proc.pid, signal.SIGKILL)
    if waiting.fifo >= 0:
        with contextlib.suppress(OSError):
            os.close(waiting.fifo)
        waiting.fifo = -1
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        waiting.proc.wait(timeout=5)
    if waiting.proc.stdout is not None:
        waiting.proc.stdout.close()
    try:
        scratches.remove_later(waiting.workdir)
    except RuntimeError:  # at interpreter exit the remover has stopped taking work
        shutil.rmtree(waiting.workdir, ignore_errors=True)


def fits(waiting: Waiting, config: bytes) -> bool:
    """The configuration goes into the empty FIFO in one write that cannot block."""
    return len(config) <= fcntl.fcntl(waiting.fifo, fcntl.F_GETPIPE_SZ)


def _holds_config(waiting: Waiting) -> bool:
    """haproxy has the FIFO open (past its start, at its first read): closing our end now gives it EOF
    after the configuration; before, the bytes would be dropped with the pipe and its open would wait on."""
    fds = f"/proc/{waiting.proc.pid}/fd"
    target = str(waiting.workdir / CONFIG)
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        with contextlib.suppress(OSError):
            if os.readlink(f"{fds}/{name}") == target:
                return True
    return False


async def ready(waiting: Waiting, *, within: float) -> bool:
    """Wait (on the loop, in steps of half a millisecond) until haproxy opened its configuration; False
    when it died or did not get there ``within`` seconds."""
    deadline = time.perf_counter() + within
    while not _holds_config(waiting):
        if not waiting.alive() or time.perf_counter() > deadline:
            return False
        await asyncio.sleep(0.0005)
    return True


def hand_over(waiting: Waiting, config: bytes) -> float:
    """Write ``config`` into the FIFO and close it (haproxy then reads it to the end); the time of handover."""
    started = time.perf_counter()
    _WAITING.pop(waiting.proc.pid, None)  # from here on it ends by itself, as any check
    try:
        view = memoryview(config)
        while view:
            view = view[os.write(waiting.fifo, view):]
    finally:
        os.close(waiting.fifo)
        waiting.fifo = -1
    return started


async def collect(waiting: Waiting, *, timeout: float, max_output: int) -> tuple[int | None, str]:
    """(exit code, output) of a handed-over check, read on the running loop; exit code None when it was
    killed at ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    proc = waiting.proc
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    os.set_blocking(out, False)
    pidfd = os.pidfd_open(proc.pid)
    chunks: list[bytes] = []
    size = 0
    eof: asyncio.Future[None] = loop.create_future()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        nonlocal size
        try:
            chunk = os.read(out, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(out)
            if not eof.done():
                eof.set_result(None)
            return
        if size < max_output:
            chunks.append(chunk[: max_output - size])
        size += len(chunk)

    def gone() -> None:
        loop.remove_reader(pidfd)
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(out, readable)
    loop.add_reader(pidfd, gone)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await eof
            await exited
    except TimeoutError:
        timed_out = True
    finally:
        loop.remove_reader(out)
        loop.remove_reader(pidfd)
        if not exited.done():  # the deadline, or the review was cancelled: the whole group goes
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        os.close(pidfd)
        proc.stdout.close()
        # The pidfd said it exited, or it was just killed: reaping it does not wait for long.
        code = proc.wait()
    return (None if timed_out else code), b"".join(chunks).decode(errors="replace")
