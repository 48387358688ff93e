"""Cyclic garbage collection paused while renders run.

A render of a large state allocates millions of small containers (map entries, staged routes, server
records) that nearly all live until the render ends; each allocation burst makes the collector scan
them again, and the full collections also scan everything else the process holds (the state, the
schemas), which cost about a quarter of a large render. A render creates next to no reference cycles
(its values are plain tuples, strings and records freed by reference counting), so collecting during
it finds nothing: collection is paused while at least one render runs, in any thread, and resumed
when the last one ends (the next allocations then trigger the usual collections). Left alone when
something else had turned collection off.

What the paused stretch allocated and kept (a render's result and route cache: millions of containers)
would all be scanned by the first young collection after the resume, ~8% of a large render, to find
nothing. So on resuming it is moved out of the young generations unscanned first: into the oldest
generation (``gc.freeze()`` then ``gc.unfreeze()``: two list splices), or, where the process keeps a
frozen set already (:func:`keep_lifelong`: ``routegate check`` freezes the state it loaded until the run
ends), into that set, with what the process keeps out of the collector's sight for as long as the run
lasts. A cycle among
these objects is still found by the next full collection, or when the frozen set is unfrozen.
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
                _age_survivors()
                gc.enable()


_lifelong = False  # whether keep_lifelong() froze what the process keeps until it ends (not undone since)


def keep_lifelong() -> None:
    """``gc.freeze()`` for what lives until the process ends (a loaded state that never changes): what
    later pauses keep joins it. Freezes go through here rather than ``gc.freeze`` so that a pause can
    tell without ``gc.get_freeze_count()``, which walks the whole frozen set (~50 ms per 4 million
    objects, at the end of every pause)."""
    global _lifelong
    gc.freeze()
    _lifelong = True


def release_lifelong() -> None:
    """``gc.unfreeze()``: everything frozen is collectable again (a caller in the same process goes on)."""
    global _lifelong
    gc.unfreeze()
    _lifelong = False


def _age_survivors() -> None:
    """Move every tracked object out of the young generations without scanning it."""
    gc.freeze()
    if not _lifelong:
        gc.unfreeze()
