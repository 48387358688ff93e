"""A stand-in for haproxy-reload-wrapper (a Go program that cannot be installed here): it does what the
wrapper does with a promoted directory, watch it and make the HAProxy master reload (SIGUSR2 to a
``haproxy -W`` master), so the promoted layout is tested against a real master-worker HAProxy."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path


class ReloadOnSwap:
    """Watches ``OUTPUT/..data`` (the symlink a promotion renames) and signals the master on each swap."""

    def __init__(self, output: Path, master_pid: int, *, poll: float = 0.05) -> None:
        self.output = output
        self.master_pid = master_pid
        self.poll = poll
        self.reloads = 0
        self._stop = threading.Event()
        self._seen = self._target()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _target(self) -> str:
        try:
            return os.readlink(self.output / "..data")
        except OSError:
            return ""

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            target = self._target()
            if target and target != self._seen:
                self._seen = target
                os.kill(self.master_pid, signal.SIGUSR2)
                self.reloads += 1

    def __enter__(self) -> ReloadOnSwap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
