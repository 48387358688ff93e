"""Cyclic garbage collection paused while renders run.

A render of a large state allocates millions of small containers (map entries, staged routes, server
records) that nearly all live until the render ends; each allocation burst makes the collector scan
them again, and the full collections also scan everything else the process holds (the state, the
schemas), which cost about a quarter of a large render. A render creates next to no reference cycles
(its values are plain tuples, strings and records freed by reference counting), so collecting during
it finds nothing: collection is paused while at least one render runs, in any thread, and resumed
when the last one ends (the next allocations then trigger the usual collections). Left alone when
something else had turned collection off.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_running = 0
_paused = False  # whether the pause turned collection off (and so must turn it on again)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    global _running, _paused
    with _lock:
        _running += 1
        if _running == 1 and gc.isenabled():
            gc.disable()
            _paused = True
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _paused:
                _paused = False
                gc.enable()
