"""What the whole configuration loads, per state version: the context of a delta review's apply note.

A review under the delta check renders only its change's closure, so the runtime planner would see a
baseline without the profiles and maps that other routes load (and call a backend's profile "not
loaded yet", or a map "not loaded"). The renders of the whole state that already happen off the
request path (the background full check, the reconcile loop) record here what they loaded
(``runtimeplans.Loaded``); a review looks it up in O(1). For a state version no whole render has
seen yet, the latest recorded one stands in: objects a few versions apart load nearly the same
profiles and maps, and the note is advice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from haproxy_check.descriptions import Description
from haproxy_check.runtime.runtimeplans import Loaded

KEEP = 8  # versions kept: reviews in flight may still ask for a recent one


class LoadedIndex:
    def __init__(self, keep: int = KEEP) -> None:
        self._by_version: OrderedDict[str, Loaded] = OrderedDict()
        self._keep = max(keep, 1)
        self._lock = threading.Lock()  # recorded from worker threads and the event loop

    def record(self, version: str, description: Description) -> None:
        self.record_loaded(version, Loaded.of(description))

    def record_loaded(self, version: str, loaded: Loaded) -> None:
        """``record`` for a description summed up elsewhere (the full check's worker process)."""
        with self._lock:
            self._by_version[version] = loaded
            self._by_version.move_to_end(version)
            while len(self._by_version) > self._keep:
                self._by_version.popitem(last=False)

    def get(self, version: str) -> Loaded | None:
        """The whole state's records at ``version``, else the latest recorded, else None."""
        with self._lock:
            found = self._by_version.get(version)
            if found is None and self._by_version:
                found = next(reversed(self._by_version.values()))
            return found
