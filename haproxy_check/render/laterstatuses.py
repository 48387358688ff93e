"""The subject's Gateway API status of a render, worked out when first read rather than during the render.

A review's verdict carries the status (``routegate check`` reports it, reconcile writes it), but its
answer to the apiserver does not: computed inside the render, it lay on every review's path before
``haproxy -c`` could start (about 0.2 ms of a closure's render). ``Statuses`` is the render's
``statuses`` mapping, computed (once) on first use from the state the render saw, which a render never
changes; ``Statuses.get`` gives a view of one entry that waits the same way, so a verdict can hold
it without reading it. Both compare, copy and pickle as the plain dicts they stand for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_UNSET: Any = object()


class _Later(Mapping[str, Any]):
    """A mapping computed by ``make`` on first use (at most once, whichever thread reads it first)."""

    __slots__ = ("_lock", "_make", "_value")

    def __init__(self, make: Callable[[], Mapping[str, Any]]) -> None:
        self._make: Callable[[], Mapping[str, Any]] | None = make
        self._value: Mapping[str, Any] = _UNSET
        self._lock = threading.Lock()

    def _computed(self) -> Mapping[str, Any]:
        if self._value is _UNSET:
            with self._lock:
                if self._value is _UNSET:
                    assert self._make is not None
                    self._value = self._make()
                    self._make = None  # the state it read is no longer held
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self._computed()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._computed())

    def __len__(self) -> int:
        return len(self._computed())

    def __repr__(self) -> str:
        return repr(dict(self._computed()))

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self._computed()),)


class Statuses(_Later):
    """A render's ``statuses`` (``{str(subject): status}`` or ``{}``), computed on first use."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:
        """The entry of ``key`` (else ``default``, a mapping) as a view computed when first read."""
        return _Later(lambda: self._computed().get(key, default))


def later(make: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
    """A status computed by ``make`` when first read (at most once), e.g. a batched review's: its
    verdict carries it, its admission answer does not read it."""
    return _Later(make)
