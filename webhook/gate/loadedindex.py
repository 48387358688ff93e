"""What the data plane has loaded, as reconcile publishes it: the context of a delta review's prediction.

A review under the delta check renders only its change's closure, so the runtime planner sees a
baseline without the profiles and maps other routes load. Whether a new backend's profile or a map is
loaded is a fact about the running data plane, not about the state: only the process that applies
promotions to it (reconcile's runtime applier, ``--runtime-socket``) knows it. It publishes what runs
(``dataplane.json`` in its ``--output-dir`` and its ``/dataplane`` endpoint, read by ``serve
--dataplane-state``; in-process for ``serve --reconcile``) and this holds the latest: profiles and maps
(``runtimeplans.Loaded``), the version they come from and a key that changes with them.

Nothing published (or the applier does not know what runs): None, and a prediction that turns on it
says "unknown" (``haproxy_check.runtime.predictions``) instead of guessing from timing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from haproxy_check.descriptions import ProfileDesc
from haproxy_check.runtime.runtimeplans import Loaded


@dataclass(frozen=True, slots=True)
class Published:
    loaded: Loaded
    version: str  # the promoted version directory the data plane runs
    dataplane: str = ""  # its HAProxy version, as the applier plans for it

    @property
    def key(self) -> str:
        return self.version

    @property
    def basis(self) -> str:
        return f"the data plane runs {self.version}, as reconcile published"

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "dataplaneVersion": self.dataplane,
                "profiles": [p.as_dict() for p in sorted(self.loaded.profiles.values(), key=lambda p: p.name)],
                "maps": sorted(self.loaded.maps)}

    @classmethod
    def from_dict(cls, data: Any) -> Published | None:
        """The record ``as_dict`` wrote; None for a record that says nothing runs that is known
        (``{"version": null}``); ValueError for anything else."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        version = data.get("version")
        if version is None:
            return None
        profiles, maps = data.get("profiles", []), data.get("maps", [])
        if not isinstance(version, str) or not isinstance(profiles, list) or not isinstance(maps, list):
            raise ValueError("version, profiles or maps has the wrong type")
        try:
            found = {str(p["name"]): ProfileDesc(str(p["name"]), tuple(str(x) for x in p["lines"])) for p in profiles}
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a profile is not {{name, lines}}: {exc}") from exc
        return cls(Loaded(found, frozenset(str(m) for m in maps)), version, str(data.get("dataplaneVersion") or ""))


class LoadedIndex:
    """The latest published record (set from a reader task or the applier, read by reviews)."""

    def __init__(self) -> None:
        self._current: Published | None = None
        self._lock = threading.Lock()

    def publish(self, published: Published | None) -> None:
        with self._lock:
            self._current = published

    def current(self) -> Published | None:
        with self._lock:
            return self._current

    def key(self) -> str:
        """What a cached verdict's prediction depended on: changes whenever the published record does."""
        current = self.current()
        return current.key if current is not None else "unpublished"
