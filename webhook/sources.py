"""Where the gate's view of the cluster comes from: files (CLI, laptop) or watches (in a cluster).

Both answer the same three questions: are you ready, what is the state now, how are you doing.
"""

from __future__ import annotations

from typing import Any, Protocol

from validators.states import MemoryState, State


class StateSource(Protocol):
    @property
    def ready(self) -> bool: ...

    def snapshot(self) -> State: ...

    def status(self) -> dict[str, Any]: ...


class StaticSource:
    """A fixed state (``--state DIR`` or nothing): ready from the start."""

    def __init__(self, state: MemoryState | None = None, *, origin: str = "") -> None:
        self._state = state or MemoryState()
        self._origin = origin

    @property
    def ready(self) -> bool:
        return True

    def snapshot(self) -> State:
        return self._state

    def status(self) -> dict[str, Any]:
        return {"source": "files" if self._origin else "empty", "path": self._origin,
                "kinds": dict(self._state.counts())}
