"""What reconcile promoted, kept in memory for the steps after the promotion.

The planner, the runtime applier and the status hook need the promoted description, the certificate
files and the statuses. They are written into the version directory for the reload wrapper and for
humans, but reading them back and parsing them is a second pass over the whole state on every change
(about 0.5 s at 10,000 routes). The reconciler hands the values over here instead; a reader falls back
to the files only for a version this process did not promote (a restart, a version pruned from memory).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from haproxy_check.descriptions import Description
from webhook import metrics


@dataclass(frozen=True, slots=True)
class Kept:
    description: Description
    files: Mapping[str, bytes]  # the promoted certificate and CA files (payloads of ``set ssl``)
    statuses: dict[str, Any]  # what statuses.json holds


class PromotedMemory:
    """The last ``keep`` promoted versions by directory name, newest last (the live one and the one before:
    what the data plane runs while the next is applied)."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = max(keep, 1)
        self._kept: OrderedDict[str, Kept] = OrderedDict()

    def remember(self, version: str, kept: Kept) -> None:
        self._kept[version] = kept
        self._kept.move_to_end(version)
        while len(self._kept) > self.keep:
            self._kept.popitem(last=False)

    def get(self, version: str | None) -> Kept | None:
        return self._kept.get(version) if version is not None else None


# When the change a reconcile run promotes was first seen (``time.monotonic()``), set by the reconciler for
# the run and read by the hook that updates the data plane: the end-to-end propagation metric.
SEEN_AT: ContextVar[float | None] = ContextVar("routegate_change_seen_at", default=None)


def observe_propagation(how: str, seen_at: float | None) -> float | None:
    """Count one end-to-end propagation (seconds since ``seen_at``), when the run knows its change's time."""
    if seen_at is None:
        return None
    seconds = max(time.monotonic() - seen_at, 0.0)
    metrics.PROPAGATION_SECONDS.labels(how).observe(seconds)
    return seconds
