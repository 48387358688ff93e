"""Keeping the gate warm: what the first review of a state version would build, built while idle.

The first review of a state version builds that version's indexes (validators, closures), and the
first review of the process also compiles the templates and CEL rules: at 1,000 routes that review
takes ten times a warm one, and under a burst every review waits behind it. So whenever the state
has a version no review has seen and no review waits or runs, a dry-run review of an object that
nobody stores (an HTTPRoute attached to nothing; its verdict is discarded either way) goes through
the same queue as the reviews: one run slot, nothing recorded (a dry run is never a delta verdict the
full check compares), no answer to anybody.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from validators.changes import Change, Operation
from webhook.admission import Batcher, Refused
from webhook.sources import StateSource

log = structlog.get_logger("routegate.warming")

POLL = 1.0
BUDGET = 30.0  # seconds the warm-up review may take
PROBE = Change(Operation.CREATE, {
    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
    "metadata": {"name": "routegate-warm-up", "namespace": "routegate-warm-up"},
    "spec": {"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]},
}, dry_run=True)


async def keep_warm(queue: Batcher, source: StateSource, *, poll: float = POLL) -> None:
    """Forever: warm each new state version once, while no review waits or runs."""
    warmed: str | None = None
    while True:
        if source.ready and not queue.running and not queue.waiting:
            state = source.snapshot()
            if state.version != warmed:
                warmed = state.version
                await warm(queue, source)
        await asyncio.sleep(poll)


async def warm(queue: Batcher, source: StateSource) -> None:
    """One warm-up review of the current state through ``queue``."""
    started = time.monotonic()
    try:
        await queue.review(PROBE, source.snapshot(), deadline=started + BUDGET, measured=False)
    except (Refused, TimeoutError):
        return
    except Exception as exc:  # warming is an optimisation: it never stops the server
        log.warning("warm-up review failed", error=repr(exc))
        return
    log.debug("warmed", seconds=round(time.monotonic() - started, 3))
