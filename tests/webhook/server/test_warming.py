"""The gate is warmed ahead of reviews (webhook.server.warming): each new state version's closure index is built
in a worker thread, and each new version gets one discarded dry-run review through the reviews' own
queue, so the first real review does not build the version's indexes."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from tests.webhook.conftest import STATE_DIR, load_objects
from validators.changes import Change
from validators.states import MemoryState, State
from validators.views import indexes
from validators.views.scopes import Scope
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Verdict
from webhook.server import warming
from webhook.server.admission import Batcher
from webhook.sources import StaticSource


class _Source:
    def __init__(self) -> None:
        self.state = MemoryState([], version="v1")
        self.ready = True

    def snapshot(self) -> MemoryState:
        return self.state

    def status(self) -> dict[str, Any]:
        return {}


class _Gate:
    scope = Scope()
    delta = True


async def test_each_new_version_gets_its_closure_index_before_a_review_asks() -> None:
    source = _Source()
    task = asyncio.ensure_future(warming.follow(_Gate(), source, poll=0.01))  # type: ignore[arg-type]
    try:
        for version in ("v1", "v2"):
            source.state = MemoryState([], version=version)
            for _ in range(200):
                if indexes.peek(source.state, "closure") is not None:
                    break
                await asyncio.sleep(0.01)
            assert indexes.peek(source.state, "closure") is not None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task




class Recording(Gate):
    def __init__(self, inner: Gate) -> None:
        super().__init__(rules=inner.rules, renderer=inner.renderer, checker=inner.checker)
        self.seen: list[tuple[Change, str]] = []

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict:
        self.seen.append((change, state.version))
        return await super().review(change, state=state, reload_note=reload_note)


@pytest.mark.haproxy
async def test_each_new_state_version_is_warmed_once_through_the_queue(gate: Gate) -> None:
    recording = Recording(gate)
    queue = Batcher(recording)
    state = MemoryState(load_objects(STATE_DIR), version="warm-1")
    source = StaticSource(state)
    assert indexes.peek(state, "closure") is None
    task = asyncio.ensure_future(warming.keep_warm(queue, source, poll=0.01))
    try:
        # until the warm-up review has run (a loaded machine takes longer than any fixed wait), then a
        # while longer for a second one that must not come
        async with asyncio.timeout(30):
            while not recording.seen or queue.running:  # noqa: ASYNC110 - polling what the gate recorded
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
    finally:
        task.cancel()
    assert recording.seen == [(warming.PROBE, "warm-1")], "one warm-up per version"
    assert warming.PROBE.dry_run, "never recorded as a verdict the full check compares"
    assert indexes.peek(state, "closure") is not None, "the version's closure index is built"
    assert queue.estimate(1) == 0, "its cold run says nothing about how long reviews take"
