"""Keeping the gate warm: what the first review of a state version would build, built ahead of it.

Two steps, both off the request path:
- ``follow`` builds each new version's closure index (validators.views.closures) in a worker thread as soon as
  the version is there, so a review finds it built, or waits for the build already under way
  (``validators.views.indexes`` builds each index once) instead of starting its own: at 10,000 routes seconds
  for a state loaded from files, a fraction of a millisecond for a snapshot patched from the one before.
- ``keep_warm`` sends, whenever the state has a version no review has seen and no review waits or runs,
  a dry-run review of an object nobody stores (an HTTPRoute attached to nothing; its verdict is
  discarded) through the reviews' own queue: it builds the validators' indexes and, for the process's
  first review, compiles the templates and CEL rules. One run slot, nothing recorded (a dry run is never
  a delta verdict the full check compares), no answer to anybody.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from validators.changes import Change, Operation
from validators.views import closures
from webhook.gate.gates import Gate
from webhook.server.admission import Batcher, Refused
from webhook.sources import StateSource

log = structlog.get_logger("routegate.warming")

POLL = 1.0  # seconds between looks for a version to warm by a review
INDEX_POLL = 0.1  # seconds between looks at the source's state version for its closure index
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


def build_index(gate: Gate, source: StateSource) -> str:
    """Build the closure index of the source's current state (as the gate's scope sees it); the
    version of the state warmed."""
    snapshot = source.snapshot()
    view = gate.scope.view(snapshot)
    closures.index_of(view)
    closures.shared_ports(view)  # the listener part and the SSLPassthrough routes, per version too
    return snapshot.version


async def follow(gate: Gate, source: StateSource, *, poll: float = INDEX_POLL) -> None:
    """Until cancelled: warm each new state version once the source is ready."""
    warmed = ""
    while True:
        if source.ready and source.snapshot().version != warmed:
            try:
                warmed = await asyncio.to_thread(build_index, gate, source)
            except Exception as exc:  # a review builds the index itself; warming is only ahead of it
                log.warning("could not build the closure index ahead of reviews", error=repr(exc))
                warmed = source.snapshot().version
        await asyncio.sleep(poll)
