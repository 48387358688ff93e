"""Follow a state source and reconcile each new version: a lone change at once, a burst coalesced.

- **Leading edge**: a change that comes ``debounce`` seconds or more after the last run (and after the
  change before it) is reconciled at once: a single change never waits for a fixed delay.
- **Trailing window**: a change that comes sooner is part of a burst; the burst is reconciled once the
  state stayed unchanged for ``debounce`` seconds, on the newest state (one run for the whole burst),
  and at the latest ``max_wait`` seconds after its first pending change (a steady stream cannot starve
  the data plane).

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

from webhook.reconcile import Reconciler
from webhook.sources import StateSource

log = structlog.get_logger("routegate.reconcile")


async def follow(source: StateSource, reconciler: Reconciler, *, debounce: float = 0.25,
                 max_wait: float = 2.0, poll: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
    done: str | None = None
    seen: str | None = None
    changed, pending = float("-inf"), clock()
    last_run = float("-inf")  # when the last run ended
    leading = True  # the pending change came after a calm: run it at once
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
        if state.version == done:
            continue
        if leading or now - changed >= debounce or now - pending >= max_wait:
            try:
                await reconciler.reconcile(state, seen_at=pending)
            except Exception as exc:  # the loop outlives one bad run; the data plane keeps last-known-good
                log.error("reconcile failed; retrying after the debounce", version=state.version, error=repr(exc))
                changed = pending = last_run = clock()  # e.g. the output disk was full: try again, not at once
                leading = False
                continue
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
