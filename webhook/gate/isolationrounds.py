"""Isolation rounds: which alerts of a failing change are its own, when the state without it fails too.

HAProxy reports one error per map file or section, so an object that already breaks the configuration
can hide a new error of the same kind, and hiding it can uncover an old error of a further object. The
Gate's baseline rule asks these rounds when the change's alerts all look known (``isolated``), or when
some look new but may be another object's error a culprit kept from showing (``unmasked``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.results import Alert, CheckResult, RenderError, RenderResult
from validators.changes import Change, Operation
from validators.objects import Ref
from validators.states import Overlay, State, Without
from webhook.gate.alertkeys import alert_key, culprits

ISOLATION_ROUNDS = 4  # objects hidden in turn, each round those the previous round's baseline blames

Baseline = Callable[[State], Awaitable[CheckResult]]  # the check of a state itself, cached by the Gate


async def unmasked(change: Change, state: State, baseline: CheckResult, new: list[Alert], *,
                   baseline_of: Baseline) -> list[Alert]:
    """``new`` without the alerts of other objects that only the baseline's culprits kept from showing.

    HAProxy stops judging a map file or section at its first error, so another object's error can
    be hidden in the baseline by a culprit and show once the culprit is gone (typically: a DELETE
    of a broken object). Such an error is no work of the change: it shows in the state without the
    baseline's culprits (a DELETE's own object counts among them: the change removes it anyway), so
    it is not new. The change's own alerts are never excused this way.
    """
    if all(a.origin is None or a.origin.ref == change.ref for a in new):
        return new
    hidden = culprits(baseline, change, own=change.operation is Operation.DELETE)
    if not hidden:
        return new
    try:
        before = await baseline_of(Without(state, hidden))
    except (CheckTimedOut, RenderError):
        return new
    if not before.decided or before.ok:
        return new
    known = {alert_key(a) for a in before.alerts}
    return [a for a in new if a.origin is None or a.origin.ref == change.ref or alert_key(a) not in known]


async def isolated(change: Change, state: State, baseline: CheckResult, *,
                   render: Callable[[State, Ref], RenderResult],
                   check: Callable[[RenderResult], Awaitable[CheckResult]], baseline_of: Baseline,
                   ) -> list[Alert] | None:
    """Alerts of the change checked apart from the objects the baseline blames (None: undecided).

    HAProxy reports one error per map file or section, so an object that already breaks the
    configuration can hide a new error of the same kind; hide the culprits and check again. Hiding
    them can uncover an old error of a further object that they hid in turn: what counts is what
    the change adds to the state without the culprits, so that is checked too, and its culprits
    are hidden in the next round. ``render(state, subject)`` runs off the event loop.
    """
    hidden = culprits(baseline, change)
    for _ in range(ISOLATION_ROUNDS):
        if not hidden:
            return []
        without = Without(state, hidden)
        try:
            result = await check(await asyncio.to_thread(render, Overlay(without, change), change.ref))
            if not result.decided:
                return None
            if result.ok:
                return []
            before = await baseline_of(without)
        except RenderError:
            return []
        except CheckTimedOut:
            return None
        if not before.decided:
            return None
        known = {alert_key(a) for a in before.alerts} if not before.ok else set()
        new = [a for a in result.alerts if alert_key(a) not in known]
        if new:
            return new
        more = culprits(before, change) - hidden
        hidden = hidden | more if more else frozenset()
    return []
