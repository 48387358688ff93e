"""A CPU-time bound on validating one object.

Each step of the validators is linear in its input (CRD patterns run on RE2, ``maxLength`` is checked
before any pattern, CEL has its own cost and time budget), but the sum over a 16 MiB object of many
steps can still be large. Rather than proving a bound for every validator, the checks of one object
share one budget of CPU seconds of the thread that runs them (``cputime.now``: other threads and
other processes on a loaded machine do not eat into it, so a legitimate object is not denied because
the machine is busy). The budget is checked between steps: between schema keywords that repeat per
value (``pattern``, ``properties``, ``items``), between HAProxy rules, and before the cross-object
checks. Running out raises :class:`OverBudget`, which the entry point (``validators.checks``) turns
into one denying finding; it derives from ``BaseException`` so that the ``except Exception`` guards
that turn a validator's bug into a warning cannot swallow it and let the object through half-checked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from validators import cputime

DEFAULT_SECONDS = 2.0  # CPU seconds per object; a large legitimate HTTPRoute takes a few milliseconds


class OverBudget(BaseException):
    """The object's validation used more CPU time than its budget."""

    def __init__(self, seconds: float, where: str) -> None:
        super().__init__(f"validating the object took more than {seconds:g} s of CPU time (at {where})")
        self.seconds = seconds
        self.where = where


CLOCK_EVERY = 32  # spends between two reads of the CPU clock (each read is a system call, ~1 us)


class _Active(threading.local):
    deadline: float | None = None
    seconds: float = 0.0
    countdown: int = 0  # spends left before the clock is read again


_active = _Active()


@contextmanager
def limited(seconds: float) -> Iterator[None]:
    """Run the enclosed checks under a budget of ``seconds`` CPU seconds of this thread."""
    saved = (_active.deadline, _active.seconds, _active.countdown)
    _active.deadline, _active.seconds, _active.countdown = cputime.now() + seconds, seconds, 0
    try:
        yield
    finally:
        _active.deadline, _active.seconds, _active.countdown = saved


def spend(where: str) -> None:
    """Raise :class:`OverBudget` when this thread's budget is used up; nothing without a budget.

    The clock is read on the first spend and then every :data:`CLOCK_EVERY` spends: the steps between
    spends are small and linear, so the budget is overrun by at most that many steps, and a clean
    object no longer pays a system call per schema keyword."""
    active = _active
    if active.deadline is None:
        return
    active.countdown -= 1
    if active.countdown > 0:
        return
    active.countdown = CLOCK_EVERY
    if cputime.now() > active.deadline:
        raise OverBudget(active.seconds, where)


def remaining() -> float | None:
    """CPU seconds left in this thread's budget (None without a budget)."""
    deadline = _active.deadline
    return None if deadline is None else max(0.0, deadline - cputime.now())
