"""The follow loop: a burst of changes is one run on the newest state; a steady stream still runs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace
from typing import Any

from validators.states import MemoryState
from webhook.reconcile.following import follow
from webhook.reconcile.reconciler import Result


class Source:
    def __init__(self) -> None:
        self.ready = True
        self.version = 0

    def snapshot(self) -> MemoryState:
        return MemoryState(version=str(self.version))

    def status(self) -> dict[str, Any]:
        return {}


class Recording:
    """Records which state versions were reconciled (the loop is what is under test here)."""

    def __init__(self) -> None:
        self.versions: list[str] = []

    async def reconcile(self, state: MemoryState, *, seen_at: float | None = None) -> None:
        self.versions.append(state.version)


async def _until(check: Any, seconds: float = 10) -> None:
    async with asyncio.timeout(seconds):
        while True:
            if check():
                return
            await asyncio.sleep(0.01)


async def _running(source: Source, runs: Recording, **kw: float) -> asyncio.Task[None]:
    return asyncio.ensure_future(follow(source, runs, poll=0.01, **kw))  # type: ignore[arg-type]


async def test_a_burst_is_one_run_on_the_newest_state() -> None:
    source, runs = Source(), Recording()
    task = await _running(source, runs, debounce=0.5, max_wait=30)
    try:
        await _until(lambda: runs.versions == ["0"])
        for v in range(1, 6):  # five changes, 50 ms apart: never quiet for 500 ms
            source.version = v
            await asyncio.sleep(0.05)
        await _until(lambda: len(runs.versions) > 1)
        assert runs.versions == ["0", "5"]
        await asyncio.sleep(0.6)
        assert runs.versions == ["0", "5"]  # nothing new, nothing run
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_lone_change_after_a_calm_runs_at_once() -> None:
    """The leading edge: a change that comes after ``debounce`` seconds of calm does not wait for it."""
    source, runs = Source(), Recording()
    task = await _running(source, runs, debounce=1.0, max_wait=30)
    try:
        await _until(lambda: runs.versions == ["0"])
        await asyncio.sleep(1.1)  # calm for longer than the debounce
        loop = asyncio.get_running_loop()
        source.version = 1
        changed = loop.time()
        await _until(lambda: runs.versions == ["0", "1"])
        assert loop.time() - changed < 0.5  # not the 1 s debounce
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Timed(Recording):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float | None] = []

    async def reconcile(self, state: MemoryState, *, seen_at: float | None = None) -> None:
        self.seen.append(seen_at)
        await super().reconcile(state)


async def test_a_burst_is_told_when_its_first_change_was_seen() -> None:
    """The propagation metric counts from the burst's first change, not from the run."""
    source, runs = Source(), Timed()
    task = await _running(source, runs, debounce=0.3, max_wait=30)
    try:
        await _until(lambda: runs.versions == ["0"])
        first = time.monotonic()
        for v in range(1, 4):
            source.version = v
            await asyncio.sleep(0.05)
        await _until(lambda: len(runs.versions) > 1)
        assert runs.versions == ["0", "3"]
        seen = runs.seen[-1]
        assert seen is not None and first - 0.05 <= seen <= first + 0.05
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_steady_stream_runs_after_max_wait() -> None:
    source, runs = Source(), Recording()
    task = await _running(source, runs, debounce=5, max_wait=0.3)
    try:
        for v in range(1, 40):  # a change every 20 ms for 0.8 s: never quiet
            source.version = v
            await asyncio.sleep(0.02)
        assert len(runs.versions) >= 2 and runs.versions[0] != "39"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_not_ready_waits() -> None:
    source, runs = Source(), Recording()
    source.ready = False
    task = await _running(source, runs, debounce=0.0, max_wait=0.0)
    try:
        await asyncio.sleep(0.1)
        assert runs.versions == []
        source.ready = True
        await _until(lambda: runs.versions == ["0"])
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class FailingOnce(Recording):
    async def reconcile(self, state: MemoryState, *, seen_at: float | None = None) -> None:
        if not self.versions:
            self.versions.append("failed")
            raise OSError("No space left on device")
        await super().reconcile(state)


async def test_a_failed_run_is_retried_after_the_debounce() -> None:
    source, runs = Source(), FailingOnce()
    task = await _running(source, runs, debounce=0.1, max_wait=30)
    try:
        await _until(lambda: runs.versions == ["failed", "0"])
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class UndecidedOnce(Recording):
    """The first run cannot decide (haproxy -c timed out on a loaded machine); the next one can."""

    async def reconcile(self, state: MemoryState, *, seen_at: float | None = None) -> Any:
        undecided = not self.versions
        await super().reconcile(state)
        return SimpleNamespace(result=Result.UNDECIDED if undecided else Result.PROMOTED)


async def test_an_undecided_run_is_tried_again_on_the_same_state() -> None:
    """Nothing changes after the undecided run: the state is judged again anyway (before this, the loop
    marked it done, and the first version of a quiet cluster was never promoted)."""
    source, runs = Source(), UndecidedOnce()
    task = await _running(source, runs, debounce=0.1, max_wait=30)
    try:
        await _until(lambda: runs.versions == ["0", "0"], seconds=5)
        await asyncio.sleep(0.7)
        assert runs.versions == ["0", "0"]  # decided: not run again
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class AlwaysUndecided(Recording):
    async def reconcile(self, state: MemoryState, *, seen_at: float | None = None) -> Any:
        await super().reconcile(state)
        return SimpleNamespace(result=Result.UNDECIDED)


async def test_undecided_runs_back_off() -> None:
    """Retries double their wait (0.5, 1, 2 s ...): a machine too loaded to finish haproxy -c is not
    handed a check every debounce."""
    source, runs = Source(), AlwaysUndecided()
    task = await _running(source, runs, debounce=0.1, max_wait=30)
    try:
        await asyncio.sleep(2.2)  # runs at about 0, 0.5, 1.5 s; the next one at 3.5 s
        assert 2 <= len(runs.versions) <= 3
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
