"""``serve --dataplane-state DIR|URL``: follow what reconcile publishes the data plane runs.

Reconcile's runtime applier writes ``dataplane.json`` into its ``--output-dir`` and serves it at
``/dataplane`` on its metrics port (``webhook.reconcile.reconcileruntime``). The webhook runs apart from it (the
shipped deployment), so it reads one of them every ``poll`` seconds and puts the record into the gate's
``LoadedIndex``: the context of every delta review's prediction. ``DIR``: reconcile's output directory
on a shared volume (its ``dataplane.json``); ``URL``: ``http(s)://reconciler:PORT/dataplane``.

A record that cannot be read or parsed leaves nothing published (predictions that turn on it say
"unknown") and is logged once per distinct error; it never blocks a review.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from webhook.gate.loadedindex import LoadedIndex, Published

log = structlog.get_logger("routegate")

FILE = "dataplane.json"
POLL = 1.0
TIMEOUT = 5.0


class DataplaneState:
    def __init__(self, source: str, index: LoadedIndex, *, poll: float = POLL) -> None:
        self.source = source
        self.index = index
        self.poll = poll
        self.error = ""
        self._seen: Any = object()  # the last raw record (file: (mtime, size, text); url: text)

    @property
    def is_url(self) -> bool:
        return self.source.startswith(("http://", "https://"))

    async def _read(self) -> str:
        if self.is_url:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session, \
                    session.get(self.source) as response:
                if response.status != 200:
                    raise OSError(f"{self.source} answered HTTP {response.status}")
                return await response.text()
        return await asyncio.to_thread(_read_file, Path(self.source))

    async def refresh(self) -> Published | None:
        """Read the record once and publish it (None: nothing known)."""
        try:
            text = await self._read()
            published = Published.from_dict(json.loads(text)) if text != self._seen else self.index.current()
        except FileNotFoundError:
            text, published = "", None  # reconcile has not published yet
        except (OSError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            if str(exc) != self.error:
                log.warning("what the data plane runs cannot be read; predictions say unknown",
                            source=self.source, error=str(exc))
            self.error = str(exc)
            self._seen = None
            self.index.publish(None)
            return None
        if text != self._seen:
            log.info("the data plane's loaded state", source=self.source,
                     version=published.version if published is not None else None)
        self.error, self._seen = "", text
        self.index.publish(published)
        return published

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.poll)


def _read_file(path: Path) -> str:
    return (path / FILE if path.is_dir() else path).read_text(encoding="utf-8")
