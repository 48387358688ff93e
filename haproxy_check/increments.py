"""Incremental rendering: what each route (and each L4/CRD model) contributes, compiled once and reused.

A render of a large state spends nearly all its time compiling routes, and a review changes one
object. ``RouteCache`` keeps, per route, what its compilation added (``httproutes.StagedRoute``, its
findings, the files it wrote) with what the compilation read to produce it:

- the route object itself (identity, else equal content: an UPDATE's object still carries the old
  resourceVersion, so that is never what is compared);
- every object, kind listing and per-state index key read through ``validators.reads.Recording``
  (Services, EndpointSlices, ReferenceGrants, BackendTLSPolicies, Namespaces, the listeners of the
  parent Gateways/ListenerSets);
- the frontends (name and port token) looked up by listener port;
- whether the route is the render's subject (an unattached subject is checked behind a synthetic
  listener; unattached others are left out).

A render reuses an entry only when all of these still read the same in its state, so a Service change
recompiles the routes that reference it and a Gateway change the routes attached to it; everything
else is committed from the cache in state order, exactly as a from-scratch render would add it.

Markers: compiled text carries source-map markers, numbered per origin by an ``Origins`` table that
lives as long as the cache generation, so a marker means the same origin in every render that uses the
generation. A generation is replaced (everything recompiled once) when its tables outgrow the state
(deleted routes, origins no longer used): memory stays bounded by a small multiple of one render.

Thread safety: entries are immutable once stored and only read by commits; a render holds the
generation it started with, so a generation swap in another thread never mixes marker tables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from haproxy_check import helpers, httproutes
from haproxy_check.httpmodels import FrontendModel
from haproxy_check.sourcemaps import Origins
from validators.findings import Finding
from validators.objects import Obj, Ref
from validators.reads import FrozenReads, Recording
from validators.states import State

FileKind = Literal["cert", "ca", "other"]
FrontKey = tuple[str, str]
SLACK_ROUTES = 1024  # entries of routes no render saw lately, kept before a sweep
SLACK_ORIGINS = 100_000


class FileLog:
    """A ``backendtls.FileSink`` that checks and logs the files a compilation adds, for replay."""

    __slots__ = ("added",)

    def __init__(self) -> None:
        self.added: list[tuple[str, bytes, FileKind]] = []

    def add_file(self, path: str, content: bytes, kind: FileKind = "other") -> str:
        helpers.check_file_path(path)
        self.added.append((path, content, kind))
        return path


class FrontReads(Mapping[FrontKey, FrontendModel]):
    """The render's frontends as a compilation sees them: each port looked up is logged with the
    (name, token) found, the only frontend facts a route's compiled text depends on."""

    __slots__ = ("_fronts", "seen")

    def __init__(self, fronts: Mapping[FrontKey, FrontendModel]) -> None:
        self._fronts = fronts
        self.seen: dict[FrontKey, tuple[str, str] | None] = {}

    def __getitem__(self, key: FrontKey) -> FrontendModel:
        fe = self._fronts.get(key)
        self.seen[key] = None if fe is None else (fe.name, fe.token)
        if fe is None:
            raise KeyError(key)
        return fe

    def __iter__(self) -> Any:
        raise TypeError("a route compilation looks frontends up by port; it does not list them")

    def __len__(self) -> int:
        raise TypeError("a route compilation looks frontends up by port; it does not count them")


def fronts_hold(seen: Mapping[FrontKey, tuple[str, str] | None], fronts: Mapping[FrontKey, FrontendModel]) -> bool:
    for key, was in seen.items():
        fe = fronts.get(key)
        if (None if fe is None else (fe.name, fe.token)) != was:
            return False
    return True


@dataclass(frozen=True, slots=True)
class RouteEntry:
    """One route's compiled contribution and what it was compiled from."""

    obj: Obj
    subject: bool
    reads: FrozenReads
    fronts: Mapping[FrontKey, tuple[str, str] | None]
    synthetic: bool  # checked behind the synthetic listener (an unattached subject)
    staged: httproutes.StagedRoute | None  # None: the route adds nothing (unattached, or unsafe)
    findings: tuple[Finding, ...]
    files: tuple[tuple[str, bytes, FileKind], ...]

    def holds(self, obj: Obj, subject: bool, state: State, fronts: Mapping[FrontKey, FrontendModel],
              indexed: dict[str, Any]) -> bool:
        return (subject == self.subject and (obj is self.obj or obj == self.obj)
                and fronts_hold(self.fronts, fronts) and self.reads.hold(state, indexed))


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """A whole-state model (TLS, TCP, Route CRD) and what building it read."""

    reads: FrozenReads
    model: Any
    files: tuple[tuple[str, bytes, FileKind], ...]


@dataclass(slots=True)
class Generation:
    """One marker table and the entries compiled with it."""

    origins: Origins = field(default_factory=Origins)
    recorder: helpers.RecorderMemo = field(default_factory=helpers.RecorderMemo)
    routes: dict[Ref, RouteEntry] = field(default_factory=dict)
    models: dict[str, ModelEntry] = field(default_factory=dict)
    origins_after_first: int = -1  # table size once the first render filled it

    def outgrown(self, routes_seen: int) -> bool:
        if self.origins_after_first < 0:
            self.origins_after_first = len(self.origins)
        return len(self.origins) > 2 * self.origins_after_first + SLACK_ORIGINS or \
            len(self.routes) > 2 * routes_seen + SLACK_ROUTES


class RouteCache:
    """The current generation, swapped for a fresh one when it outgrows the state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = Generation()
        self.stats = {"hits": 0, "misses": 0, "generations": 1}

    def generation(self) -> Generation:
        return self._current

    def done(self, gen: Generation, seen: Sequence[Ref], recorder: helpers.Recorder) -> None:
        """After a render of ``gen`` that met the routes ``seen``: sweep entries of routes it did not see
        when there are many, and start a new generation when the marker table outgrew the state."""
        gen.recorder.trim(sum(len(entries) for _, entries in recorder.maps.values()), len(recorder.backends))
        if len(gen.routes) > len(seen) + SLACK_ROUTES:
            keep = set(seen)
            for ref in [r for r in list(gen.routes) if r not in keep]:
                gen.routes.pop(ref, None)
        if gen.outgrown(len(seen)):
            with self._lock:
                if self._current is gen:
                    self._current = Generation()
                    self.stats["generations"] += 1

    @staticmethod
    def model(gen: Generation, name: str, state: State, files: helpers.Recorder | FileLog,
              build: Callable[[State, FileLog], Any]) -> Any:
        """``build(state, files)`` of a whole-state model, reused while everything it read holds."""
        entry = gen.models.get(name)
        if entry is None or not entry.reads.hold(state):
            view = Recording(state)
            log = FileLog()
            value = build(view, log)
            entry = gen.models[name] = ModelEntry(view.reads.frozen(), value, tuple(log.added))
        for path, content, kind in entry.files:
            files.add_file(path, content, kind)
        return entry.model
