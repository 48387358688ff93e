"""The progress line of ``routegate check`` on stderr: how many objects are judged so far and how many
were denied, refreshed every second, only when stderr is a terminal (a CI log gets no progress)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from webhook.gate.verdicts import Decision, Verdict


@dataclass(slots=True)
class Tally:
    """Counts of the verdicts given so far, out of ``total``."""

    total: int
    judged: int = 0
    denied: int = 0
    undecided: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, verdicts: Iterable[Verdict]) -> None:
        for v in verdicts:
            self.judged += 1
            self.denied += v.decision is Decision.DENY
            self.undecided += v.decision is Decision.ERROR

    def line(self) -> str:
        undecided = f", {self.undecided} could not be decided" if self.undecided else ""
        return (f"routegate: judging {self.total} objects: {self.judged} judged, {self.denied} denied{undecided}"
                f"... {time.monotonic() - self.started:.0f}s")


@contextlib.asynccontextmanager
async def shown(total: int, stream: TextIO | None = None, every: float = 1.0) -> AsyncIterator[Tally]:
    """A :class:`Tally` to update; its line is drawn on ``stream`` (stderr) while the block runs, only
    when that is a terminal and there is more than one object, and erased at the end."""
    out = stream if stream is not None else sys.stderr
    tally = Tally(total)
    if total < 2 or not _is_terminal(out):
        yield tally
        return

    async def tick() -> None:
        while True:
            print(f"\r\x1b[K{tally.line()}", end="", file=out, flush=True)
            await asyncio.sleep(every)

    ticker = asyncio.ensure_future(tick())
    try:
        yield tally
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        print("\r\x1b[K", end="", file=out, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
