"""glibc's allocator told to give large transient blocks back to the system as soon as they are freed,
and the memory a reconcile run freed returned once the run is over.

A long-running server sees a few large, short-lived blocks: the state files' text while they are
decoded, the pickled state sent to the full check's worker process (~8 MB at 10,000 routes, built by
the queue's feeder thread), a big AdmissionReview body. glibc serves a block over its mmap threshold
(128 KiB) with a mapping of its own, returned on free, but it also raises that threshold to the size
of each such block freed (up to 32 MiB), so the next ones of that size come from the heap of the
thread's arena, where freed memory mostly stays resident: measured at 10,000 routes, ~9 MiB more
after loading the state and ~18-23 MiB more after each hand-over to the worker, never given back.
Setting the threshold explicitly turns that adjustment off (mallopt(3)). Blocks this large are rare
on a review's path (a closure's render is tens of KiB), so the extra mmap/munmap calls cost nothing
measurable; Python's own small-object allocator maps its arenas itself and is unaffected.

Reconcile allocates far more per run: a render, ``description.json`` and the background full check's
files are tens of MiB at 10,000 routes, built in worker threads (``asyncio.to_thread``), each thread
with a heap (arena) of its own, up to eight per core. What a run frees stays inside those heaps as free
chunks, resident: measured at 10,000 routes after three one-route changes, 241 MiB of the process's
~1,050 MiB RSS was free memory in glibc's heaps (``malloc_info``). ``limit_arenas`` caps the heaps at two
(the GIL serializes nearly every allocation anyway: more arenas buy no parallelism here), and
``give_back`` (``malloc_trim(0)``: free pages in every heap handed back with ``MADV_DONTNEED``) runs after
each reconcile run and each background full check, once the run's transients are gone. The trim takes
its time (0.1-0.9 s for a few hundred MiB of fragmented heaps on a loaded machine): ``give_back_soon``
runs it in a thread of its own, so that neither the next run nor the event loop waits for it (ctypes
releases the GIL for the call); a request while one runs is dropped, that one returns what is free.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from typing import Any

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
M_ARENA_MAX = -8
MMAP_THRESHOLD = 128 * 1024  # glibc's default, now fixed
ARENAS = 2  # reconcile's heaps (the main one and one for every worker thread)


def _libc() -> Any | None:
    """glibc, or None where the C library is not glibc (musl has no mallopt nor malloc_trim)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):  # musl (Alpine): nothing to tune there
        return None
    return libc


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library is not glibc."""
    libc = _libc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc heaps (threads started later share them); False where not glibc."""
    libc = _libc()
    return libc is not None and bool(libc.mallopt(M_ARENA_MAX, arenas))


_trim: list[Any] = []  # [malloc_trim] once looked up, [None] where the C library is not glibc


def give_back() -> bool:
    """Return the free memory of every malloc heap to the system (``malloc_trim(0)``); True when some
    was returned. A few ms at 10,000 routes; nothing where the C library is not glibc."""
    if not _trim:
        libc = _libc()
        _trim.append(libc.malloc_trim if libc is not None else None)
    return _trim[0] is not None and bool(_trim[0](0))


_trimming = threading.Lock()


def give_back_soon() -> bool:
    """``give_back`` in a thread of its own, unless one runs already; True when one was started."""
    if not _trimming.acquire(blocking=False):
        return False

    def trim() -> None:
        try:
            give_back()
        finally:
            _trimming.release()

    threading.Thread(target=trim, name="routegate-malloc-trim", daemon=True).start()
    return True
