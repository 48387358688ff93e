"""Bisection of a failing group: which members fail ``haproxy -c`` on their own.

Shared by the Gate's batch settling (``webhook.gate.gates``: the inputs of a dry run, the reviews of a burst)
and reconcile's isolation (``webhook.reconcile.isolating``: the objects changed since the last promotion). The
caller says what "the group with only these members" means and whether it passes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def failing_alone(group: Sequence[T], passes_with: Callable[[Sequence[T]], Awaitable[bool | None]], *,
                        fails: bool = False) -> list[T] | None:
    """The members of ``group`` that fail on their own; None when that cannot be told apart.

    ``passes_with(members)``: whether the configuration passes with ``members`` present and every other
    member of the whole group set aside (None: could not decide). A group that passes holds no culprit;
    a failing one is split in halves; a single failing member is a culprit. None also when a group
    fails while both its halves pass (members that fail only together). ``fails``: ``group`` is known
    to fail already, so it is not checked again."""
    if not fails:
        passed = await passes_with(group)
        if passed is None:
            return None
        if passed:
            return []
    if len(group) == 1:
        return list(group)
    half = len(group) // 2
    found: list[T] = []
    for part in (group[:half], group[half:]):
        got = await failing_alone(part, passes_with)
        if got is None:
            return None
        found += got
    return found or None
