"""Incremental rendering: what each route (and each L4/CRD model) contributes, compiled once and reused.

A render of a large state spends nearly all its time compiling routes, and a review changes one
object. ``RouteCache`` keeps, per route, what its compilation added (``httproutes.StagedRoute``, its
findings, the files it wrote) with what the compilation read to produce it:

- the route object itself (identity, else equal content: an UPDATE's object still carries the old
  resourceVersion, so that is never what is compared);
- every object, kind listing and per-state index key read through ``validators.views.reads.Recording``
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
generation. Entries of routes no render uses any more go least recently used first; a generation is
replaced (everything recompiled once) when its marker table outgrows the state (origins no longer
used). Both bounds follow the largest render, so small sub-state renders by the same Renderer never
evict the whole state's entries: memory stays bounded by a small multiple of one render.

Thread safety: entries are immutable once stored and only read by commits; a render holds the
generation it started with, so a generation swap in another thread never mixes marker tables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from haproxy_check.render import helpers
from haproxy_check.render.http import httproutes
from haproxy_check.render.http.httpmodels import FrontendModel
from haproxy_check.render.sourcemaps import Origins
from validators.findings import Finding
from validators.objects import Obj, Ref
from validators.states import State
from validators.views.reads import FrozenReads, Recording

FileKind = Literal["cert", "ca", "other"]
FrontKey = tuple[str, str]
SLACK_ROUTES = 1024  # entries of routes no render saw lately, kept before a sweep
SLACK_ORIGINS = 100_000
MODEL_VARIANTS = 4


class FileLog:
    """A ``servertls.FileSink`` that checks and logs the files a compilation adds, for replay."""

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

    def get(self, key: FrontKey, default: Any = None) -> Any:
        """``Mapping.get`` without raising and catching a KeyError for each port that has no frontend (the
        isolated one is looked up first for every listener, and most listeners are not isolated)."""
        fe = self._fronts.get(key)
        self.seen[key] = None if fe is None else (fe.name, fe.token)
        return default if fe is None else fe

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
    """One marker table and the entries compiled with it.

    Bounds follow the largest render of the generation, not the last one: the same Renderer renders the
    whole state and small sub-states of one change, and a small render must not evict the large one's
    entries. Route entries beyond the largest render's count (plus slack) go least recently used first
    (deleted routes); the marker table is started again once it holds twice the origins it held after
    the largest render (plus slack).
    """

    origins: Origins = field(default_factory=Origins)
    recorder: helpers.RecorderMemo = field(default_factory=helpers.RecorderMemo)
    routes: dict[Ref, RouteEntry] = field(default_factory=dict)
    models: dict[str, list[ModelEntry]] = field(default_factory=dict)  # newest first, MODEL_VARIANTS at most
    used: dict[Ref, int] = field(default_factory=dict)  # the last render (count) that used a route entry
    renders: int = 0
    peak_routes: int = 0
    origins_at_peak: int = 0
    peak_entries: int = 0
    peak_backends: int = 0

    def outgrown(self) -> bool:
        return len(self.origins) > 2 * self.origins_at_peak + SLACK_ORIGINS


class RouteCache:
    """The current generation, swapped for a fresh one when it outgrows the state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = Generation()
        self.stats = {"hits": 0, "misses": 0, "generations": 1}

    def generation(self) -> Generation:
        return self._current

    def done(self, gen: Generation, seen: Sequence[Ref], recorder: helpers.Recorder) -> None:
        """After a render of ``gen`` that met the routes ``seen``: note their use, evict the least recently
        used entries beyond the largest render's size, start a new generation when the marker table
        outgrew the state."""
        gen.renders += 1
        epoch = gen.renders
        used = gen.used
        for ref in seen:
            used[ref] = epoch
        if len(seen) > gen.peak_routes:
            gen.peak_routes, gen.origins_at_peak = len(seen), len(gen.origins)
        gen.peak_entries = max(gen.peak_entries, sum(len(entries) for _, entries in recorder.maps.values()))
        gen.peak_backends = max(gen.peak_backends, len(recorder.backends))
        gen.recorder.trim(gen.peak_entries, gen.peak_backends)
        if len(gen.routes) > gen.peak_routes + SLACK_ROUTES:
            by_age = sorted(gen.routes, key=lambda r: used.get(r, 0))
            for ref in by_age[: len(by_age) - gen.peak_routes]:
                gen.routes.pop(ref, None)
                used.pop(ref, None)
        if gen.outgrown():
            with self._lock:
                if self._current is gen:
                    self._current = Generation()
                    self.stats["generations"] += 1

    @staticmethod
    def model(gen: Generation, name: str, state: State, files: helpers.Recorder | FileLog,
              build: Callable[[State, FileLog], Any]) -> Any:
        """``build(state, files)`` of a whole-state model, reused while everything it read holds (a few
        variants are kept: the whole state's and the sub-states' renders take turns)."""
        variants = gen.models.get(name, [])
        entry = next((e for e in variants if e.reads.hold(state)), None)
        if entry is None:
            view = Recording(state)
            log = FileLog()
            value = build(view, log)
            entry = ModelEntry(view.reads.frozen(), value, tuple(log.added))
        gen.models[name] = [entry, *(e for e in variants if e is not entry)][:MODEL_VARIANTS]
        for path, content, kind in entry.files:
            files.add_file(path, content, kind)
        return entry.model
