"""Per-version indexes built ahead of the first review that needs them.

A review's closure (validators.closures) reads an index of the whole state version. Built on demand,
the first review of a version pays for it: at 10,000 routes seconds for a state loaded from files, a
fraction of a millisecond for a cluster snapshot patched from the one before. This task builds it in a
worker thread as soon as a new version is there, so that a review finds it built, or waits for the
build already under way (``validators.indexes`` builds each index once) instead of starting its own.
"""

from __future__ import annotations

import asyncio

import structlog

from validators import closures
from webhook.gates import Gate
from webhook.sources import StateSource

log = structlog.get_logger("routegate.warming")
POLL = 0.1  # seconds between looks at the source's state version


def warm(gate: Gate, source: StateSource) -> str:
    """Build the closure index of the source's current state (as the gate's scope sees it); the
    version of the state warmed."""
    snapshot = source.snapshot()
    closures.index_of(gate.scope.view(snapshot))
    return snapshot.version


async def follow(gate: Gate, source: StateSource, *, poll: float = POLL) -> None:
    """Until cancelled: warm each new state version once the source is ready."""
    warmed = ""
    while True:
        if source.ready and source.snapshot().version != warmed:
            try:
                warmed = await asyncio.to_thread(warm, gate, source)
            except Exception as exc:  # a review builds the index itself; warming is only ahead of it
                log.warning("could not build the closure index ahead of reviews", error=repr(exc))
                warmed = source.snapshot().version
        await asyncio.sleep(poll)
