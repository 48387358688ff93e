"""``--state DIR`` as a live source: the manifests re-read whenever their content changes.

Polled by content hash (every *.yaml/*.yml/*.json under DIR, path and bytes) rather than inotify:
a mounted ConfigMap or a git-sync checkout changes by swapping a symlink, which inotify on the files
does not report, while a hash sees every change and ignores a rewrite with the same bytes. A manifest
directory is small; reading it once a second costs a few milliseconds. A file that does not parse
keeps the last good state (and says so in ``status()``): a half-saved edit never empties the state.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import structlog

from validators.states import MemoryState, State
from webhook.gate.assembly import load_state
from webhook.loading import inputs
from webhook.setuperrors import SetupError

log = structlog.get_logger("routegate.state")


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for name in inputs.expand([str(root)]):
        digest.update(name.encode() + b"\0")
        try:
            digest.update(Path(name).read_bytes())
        except OSError:
            digest.update(b"\0unreadable")
        digest.update(b"\0")
    return digest.hexdigest()


class FileSource:
    """A StateSource over a directory of manifests, reloaded by :meth:`run`."""

    def __init__(self, root: str, *, poll: float = 1.0) -> None:
        self.root = Path(root)
        self.poll = poll
        self._state: MemoryState | None = None
        self._hash = ""
        self._error = ""

    @property
    def ready(self) -> bool:
        return self._state is not None

    def snapshot(self) -> State:
        return self._state if self._state is not None else MemoryState()

    def status(self) -> dict[str, Any]:
        counts = dict(self._state.counts()) if self._state is not None else {}
        return {"source": "files", "path": str(self.root), "kinds": counts, "hash": self._hash[:12],
                **({"error": self._error} if self._error else {})}

    def load(self) -> bool:
        """Re-read the directory when its content changed; True when the state changed."""
        digest = tree_hash(self.root)
        if digest == self._hash:
            return False
        self._hash = digest
        try:
            _, objects = load_state(str(self.root))
        except SetupError as exc:
            self._error = str(exc)
            log.error("state files not loaded; keeping the previous state", error=self._error)
            return False
        self._error = ""
        self._state = MemoryState(objects, version=f"files:{digest[:16]}")
        return True

    async def run(self) -> None:
        while True:
            await asyncio.to_thread(self.load)
            await asyncio.sleep(self.poll)
