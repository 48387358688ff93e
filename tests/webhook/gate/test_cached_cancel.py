"""The gate's shared baseline cache keeps a result its computation produced even when the caller that
waited for it was cancelled at that moment (a reload note dropped as the check failed): the next caller
(the failing review's baseline) gets it instead of rendering again."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict

from webhook.gate import gates


async def test_a_caller_cancelled_as_the_computation_ends_keeps_its_result() -> None:
    cache: OrderedDict[str, asyncio.Future[int]] = OrderedDict()
    runs = 0
    go = asyncio.Event()

    async def make() -> int:
        nonlocal runs
        runs += 1
        await go.wait()
        return 42

    waiting = asyncio.ensure_future(gates._cached(cache, "v1", make))
    await asyncio.sleep(0)
    go.set()
    await asyncio.sleep(0)  # the computation finishes; its waiting caller has not resumed yet
    assert cache["v1"].done() and not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert waiting.cancelled()
    assert await gates._cached(cache, "v1", make) == 42
    assert runs == 1


async def test_a_failed_computation_is_not_kept() -> None:
    cache: OrderedDict[str, asyncio.Future[int]] = OrderedDict()

    async def fail() -> int:
        raise RuntimeError("render refused")

    for _ in range(2):
        with contextlib.suppress(RuntimeError):
            await gates._cached(cache, "v1", fail)
        assert "v1" not in cache
