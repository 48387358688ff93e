"""Diagnostics for ``bench_reconcile_rss.py``: where a ``routegate reconcile`` process's memory goes.

    BENCH_RSS_PYTHONPATH=bench/rssdiag RSSDIAG_LOG=/tmp/steps.log python3 bench/bench_reconcile_rss.py ...

Put on the reconcile process's path (``BENCH_RSS_PYTHONPATH``), this is imported at its start and wraps the
reconciler's steps (``_Steps.step``, ``Reconciler._timed``), the background full check, and the runtime
applier's ``learn``/``_apply``/``_publish`` with ``running.which`` and ``runtimeplans.plan``: on entry and
exit of each it writes VmRSS and VmHWM to ``RSSDIAG_LOG``, and resets VmHWM on entry (``/proc/self/clear_refs``,
root), so the HWM on a step's exit line is that step's own peak (steps that overlap, such as the background
check, share it). On SIGRTMIN+5 (the bench sends it before stopping the process) it writes the largest
object types, glibc's ``malloc_info`` (``RSSDIAG_LOG.<pid>.malloc.xml``) and, under ``PYTHONTRACEMALLOC=1``,
the traced heap's top lines and files. Not part of routegate: internals are wrapped by name.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

LOG_PATH = os.environ.get("RSSDIAG_LOG", "")
STARTED = time.monotonic()


def _status() -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(("VmRSS:", "VmHWM:")):
                found[line[:5]] = int(line.split()[1]) // 1024
    return found


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _note(log: Any, what: str) -> None:
    now = _status()
    log.write(f"{time.monotonic() - STARTED:8.2f} {what:<30} rss {now['VmRSS']:5d} hwm {now['VmHWM']:5d} "
              f"threads {threading.active_count()}\n")


def _wrap_async(log: Any, owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        _note(log, f"> {label}")
        _reset_peak()
        try:
            return await original(*args, **kwargs)
        finally:
            _note(log, f"< {label}")

    setattr(owner, name, wrapped)


def _wrap_sync(log: Any, owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _note(log, f"> {label}")
        _reset_peak()
        try:
            return original(*args, **kwargs)
        finally:
            _note(log, f"< {label}")

    setattr(owner, name, wrapped)


def _wrap_steps(log: Any) -> None:
    from webhook.reconcile import reconciler as reconcile

    original: Callable[..., Any] = reconcile._Steps.step

    @contextlib.contextmanager
    def step(self: Any, name: str) -> Iterator[None]:
        _note(log, f"> {name}")
        _reset_peak()
        with original(self, name):
            yield
        _note(log, f"< {name}")

    reconcile._Steps.step = step  # type: ignore[method-assign]
    timed = reconcile.Reconciler._timed

    async def timed_step(self: Any, name: str, timings: Any, work: Any) -> Any:
        _note(log, f"> {name}")
        _reset_peak()
        try:
            return await timed(self, name, timings, work)
        finally:
            _note(log, f"< {name}")

    reconcile.Reconciler._timed = timed_step  # type: ignore[method-assign,assignment]


def _report(log: Any) -> None:
    import tracemalloc

    _note(log, "diagnostics (SIGRTMIN+5)")
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        current, peak = tracemalloc.get_traced_memory()
        log.write(f"traced {current >> 20} MiB, peak {peak >> 20} MiB\n")
        for stat in snapshot.statistics("lineno")[:40]:
            log.write(f"  {stat.size >> 10:8d} KiB {stat.count:8d} {stat.traceback}\n")
        for stat in snapshot.statistics("filename")[:25]:
            log.write(f"  file {stat.size >> 10:8d} KiB {stat.count:8d} {stat.traceback}\n")
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    log.write(f"objects {counts.most_common(25)}\n")
    libc = ctypes.CDLL("libc.so.6")
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    handle = libc.fopen(f"{LOG_PATH}.{os.getpid()}.malloc.xml".encode(), b"w")
    if handle:
        libc.malloc_info(0, handle)
        libc.fclose(handle)


def _install() -> None:
    log = open(LOG_PATH, "a", buffering=1)  # noqa: SIM115 - open for the process's lifetime
    try:
        _wrap_steps(log)
        from haproxy_check.runtime import running, runtimeplans
        from webhook.reconcile import reconcilechecks, reconcileruntime

        _wrap_async(log, reconcilechecks.BackgroundFullChecks, "_loop", "background check")
        _wrap_async(log, reconcileruntime.RuntimeApplier, "learn", "learn")
        _wrap_async(log, reconcileruntime.RuntimeApplier, "_apply", "apply")
        _wrap_async(log, reconcileruntime.RuntimeApplier, "_publish", "publish")
        _wrap_sync(log, running, "which", "which")
        _wrap_sync(log, runtimeplans, "plan", "plan")
    except (ImportError, AttributeError) as exc:  # another tree: what exists is wrapped
        log.write(f"not wrapped: {exc!r}\n")
    signal.signal(signal.SIGRTMIN + 5, lambda *_: _report(log))


if LOG_PATH and threading.current_thread() is threading.main_thread():
    _install()
