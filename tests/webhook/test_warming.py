"""The closure index of each new state version is built ahead of the first review (webhook.warming)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from validators import indexes
from validators.scopes import Scope
from validators.states import MemoryState
from webhook import warming


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
