"""Follow a state source and reconcile each settled version: debounced and coalesced.

A version is reconciled once it stayed unchanged for ``debounce`` seconds (a burst of watch events
or file writes is one run, on the newest state), or once it has been pending for ``max_wait`` seconds
while changes keep coming (a steady stream cannot starve the data plane). Runs never overlap: changes
during a run are coalesced into the next one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from webhook.reconcile import Reconciler
from webhook.sources import StateSource

log = structlog.get_logger("routegate.reconcile")


async def follow(source: StateSource, reconciler: Reconciler, *, debounce: float = 1.0,
                 max_wait: float = 30.0, poll: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
    done: str | None = None
    seen: str | None = None
    changed = pending = clock()
    while True:
        await asyncio.sleep(poll)
        if not source.ready:
            continue
        state = source.snapshot()
        now = clock()
        if state.version != seen:
            if seen == done:
                pending = now  # the first change since the last run
            seen, changed = state.version, now
        if state.version == done:
            continue
        if now - changed >= debounce or now - pending >= max_wait:
            try:
                await reconciler.reconcile(state)
            except Exception as exc:  # the loop outlives one bad run; the data plane keeps last-known-good
                log.error("reconcile failed; retrying after the debounce", version=state.version, error=repr(exc))
                changed = pending = clock()  # e.g. the output disk was full: try again, not at once
                continue
            done = state.version
