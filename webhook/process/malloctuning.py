"""glibc's allocator told to give large transient blocks back to the system as soon as they are freed.

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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 128 * 1024  # glibc's default, now fixed


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl (Alpine) has no mallopt: nothing to tune there
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
