"""This thread's CPU seconds, less the time the cyclic garbage collector ran in it.

Budgets on a check (CEL's evaluation budget, ``validators.budgets``) bound the work an *object* costs.
A collection that happens to start during that work scans the whole heap, which in a large process (a
webhook holding a 10,000-route state, a long test run) costs more than a CEL budget: charged to the
object, it turned a valid object into "ran out of its cost budget". The collector's own phases are
reported through ``gc.callbacks``; their CPU time is kept per thread and left out of :func:`now`.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

_spent: dict[int, float] = {}  # thread id -> CPU seconds its collections took
_began: dict[int, float] = {}  # thread id -> thread_time() when a collection started in it


def _collecting(phase: str, _info: dict[str, Any]) -> None:
    ident = threading.get_ident()
    if phase == "start":
        _began[ident] = time.thread_time()
        return
    began = _began.pop(ident, None)
    if began is not None:
        _spent[ident] = _spent.get(ident, 0.0) + time.thread_time() - began


def now() -> float:
    """``time.thread_time()`` without the collections that ran in this thread."""
    return time.thread_time() - _spent.get(threading.get_ident(), 0.0)


if _collecting not in gc.callbacks:
    gc.callbacks.append(_collecting)
