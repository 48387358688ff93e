"""Follow a state source and reconcile each new version: a lone change at once, a burst coalesced.

- **Leading edge**: a change that comes ``debounce`` seconds or more after the last run (and after the
  change before it) is reconciled at once: a single change never waits for a fixed delay.
- **Trailing window**: a change that comes sooner is part of a burst; the burst is reconciled once the
  state stayed unchanged for ``debounce`` seconds, on the newest state (one run for the whole burst),
  and at the latest ``max_wait`` seconds after its first pending change (a steady stream cannot starve
  the data plane).

A run that could not decide (``haproxy -c`` did not finish: a loaded machine) is run again on the same
state, after a backoff that doubles from ``max(debounce, 0.5)`` seconds up to ``RETRY_MAX``: the data plane
keeps last-known-good meanwhile, and without the retry a state judged once as undecided would wait for
the next change to be judged at all (before the first promotion: forever, in a quiet cluster).

Runs never overlap: changes during a run are coalesced into the next one. A source that offers a
``changed`` event (the cluster's watches) wakes the loop at once; otherwise it polls every ``poll``
seconds. Each run is given when its first pending change was seen, for the end-to-end propagation
metric. Reloads are rate-limited further down, by the runtime applier (``--min-reload-interval``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from webhook.reconcile.reconciler import Reconciler, Result
from webhook.sources import StateSource

log = structlog.get_logger("routegate.reconcile")
RETRY_MAX = 30.0  # the longest wait before an undecided run is tried again


async def follow(source: StateSource, reconciler: Reconciler, *, debounce: float = 0.25,
                 max_wait: float = 2.0, poll: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
    done: str | None = None
    seen: str | None = None
    changed, pending = float("-inf"), clock()
    last_run = float("-inf")  # when the last run ended
    leading = True  # the pending change came after a calm: run it at once
    undecided, retry_at = 0, float("-inf")  # runs in a row that could not decide; when to try again
    while True:
        await _next_change(source, poll)
        if not source.ready:
            continue
        state = source.snapshot()
        now = clock()
        if state.version != seen:
            if seen == done:  # the first change since the last run
                pending = now
                leading = now - last_run >= debounce and now - changed >= debounce
            seen, changed = state.version, now
        if state.version == done or now < retry_at:
            continue
        if leading or now - changed >= debounce or now - pending >= max_wait:
            try:
                outcome = await reconciler.reconcile(state, seen_at=pending)
            except Exception as exc:  # the loop outlives one bad run; the data plane keeps last-known-good
                log.error("reconcile failed; retrying after the debounce", version=state.version, error=repr(exc))
                changed = pending = last_run = clock()  # e.g. the output disk was full: try again, not at once
                leading = False
                continue
            if getattr(outcome, "result", None) is Result.UNDECIDED:  # judged neither way: judge it again
                undecided += 1
                wait = min(max(debounce, 0.5) * 2 ** (undecided - 1), RETRY_MAX)
                log.warning("reconcile could not decide; trying the same state again", version=state.version,
                            seconds=wait, in_a_row=undecided)
                last_run = clock()
                retry_at = last_run + wait
                leading = False
                continue
            undecided, retry_at = 0, float("-inf")
            done = state.version
            last_run = clock()
            leading = False


async def _next_change(source: StateSource, poll: float) -> None:
    """Until the source says it changed (when it can say so), or ``poll`` seconds."""
    event = getattr(source, "changed", None)
    if isinstance(event, asyncio.Event):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), poll)
        return
    await asyncio.sleep(poll)
