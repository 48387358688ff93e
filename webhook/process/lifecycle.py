"""What every long-running command (``serve``, ``reconcile``) does the same way: its listen addresses,
the signals that stop it, and the wait on, and cancelling of, its background tasks.

Apart from ``serving`` so that ``reconciling`` (and ``serve --reconcile``) share it without an import
circle between the two commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence
from typing import Any

import structlog

from webhook.setuperrors import SetupError

log = structlog.get_logger("routegate")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


def split_listen(value: str, flag: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise SetupError(f"{flag} {value!r}: expected HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - an explicit ":PORT" means all


def on_stop_signals() -> asyncio.Event:
    """Set on SIGTERM, SIGINT or SIGUSR1 (the haproxy image's STOPSIGNAL)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def requested(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("stopping", signal=sig.name)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, requested, sig)
    return stop


async def until_stopped(stop: asyncio.Event, background: Sequence[asyncio.Future[Any]]) -> bool:
    """Wait for a stop signal or a background task that ends; True when one failed (logged)."""
    waiter = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait([waiter, *background], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task is not waiter and task.exception() is not None:
            log.error("background task failed", error=repr(task.exception()))
            return True
    return False


async def cancel_all(background: Sequence[asyncio.Future[Any]]) -> None:
    for task in background:
        task.cancel()
    for task in background:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
