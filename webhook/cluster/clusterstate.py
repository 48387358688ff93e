"""ClusterState: the stores of every watched kind, the tasks that fill them, and cheap snapshots.

Snapshots may be read from worker threads (rendering runs off the event loop): their views are never
written after being handed out, and all writes happen on the loop that runs ``run()``.

``run()`` discovers what the cluster serves, watches CRDs (so kinds installed or upgraded later are
picked up), keeps one reflector per served kind, and one per Secret/ConfigMap that a Gateway,
ListenerSet or BackendTLSPolicy references. ``snapshot()`` is what a review reads: a frozen
``validators.states.State`` whose ``version`` changes exactly when some stored object changed.

Readiness is global only where the whole state is at stake:

- the first sync (discovery, and the first list of every served kind) — "still syncing", or the
  error that keeps a kind from listing ("cannot list EndpointSlice: forbidden (...)");
- losing the cluster: when no kind's watch has worked for ``stale_after`` seconds (an apiserver
  restart), the state is too stale to judge by, and says how stale it is.

A referenced Secret/ConfigMap that cannot be read (RBAC ``resourceNames`` that do not grant it, a
failing watch) never makes the state unready: ``reference_problems(obj)`` turns it into a warning on
the objects that reference it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog
from kubernetes_asyncio import client

from validators.objects import KINDS, KindInfo, Obj, Ref
from webhook.cluster import clients, discovery, referencewatches, slimming
from webhook.cluster.reflectors import DEFAULT_BACKOFF_CAP, PERMANENT_STATUSES, Backoff, Collection, Reflector
from webhook.cluster.stores import ClusterSnapshot, KindView, Store

log = structlog.get_logger(__name__)

CRD_KIND = discovery.CRD_INFO.kind
REFERENCED_KINDS = referencewatches.WANTED_KINDS  # watched per referenced name, never as a whole
DEFAULT_STALE_AFTER = 60.0


def _slim(raw: Mapping[str, Any], collection: Collection) -> Obj | None:
    return slimming.slim(raw, kind=collection.kind, api_version=collection.api_version)


class ClusterState:
    """Follows the cluster. Create it, run ``run()`` as a task, read ``snapshot()`` once ``ready``."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        kinds: Sequence[str] | None = None,
        resync_backoff_cap: float = DEFAULT_BACKOFF_CAP,
        rediscovery_interval: float = 30.0,
        stale_after: float = DEFAULT_STALE_AFTER,
    ) -> None:
        wanted = list(KINDS) if kinds is None else list(dict.fromkeys(kinds))
        unknown = [k for k in wanted if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; known: {sorted(KINDS)}")
        self.api = api
        self._infos: dict[str, KindInfo] = {k: KINDS[k] for k in wanted}
        self._stores = {k: Store(k, self._on_change) for k in wanted}
        self._crds = Store(CRD_KIND, self._on_change)
        self._crd_groups = frozenset(i.group for i in self._infos.values()) - discovery.BUILTIN_GROUPS
        self._backoff_cap = resync_backoff_cap
        self._rediscovery_interval = rediscovery_interval
        self._version = 0
        self._crd_version = 0
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._snapshot: ClusterSnapshot | None = None
        self._served: discovery.Served = {}
        self._chosen: dict[str, str | None] = {}
        self._reflectors: dict[str, Reflector] = {}  # kind -> reflector of the whole collection
        self._referenced: dict[referencewatches.Target, Reflector] = {}
        self._tasks: dict[object, asyncio.Task[None]] = {}
        self._crd_reflector: Reflector | None = None
        self._planned = False
        self._first_synced = False  # latched: after the first sync, "still syncing" is never said again
        self.stale_after = stale_after
        self._discovery_error: str | None = None
        self._lost: dict[str, str] = {}  # kinds served once and no longer: why (webhook.reconcile.shrinkguard reads it)

    # ---- what readers use ------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Increases by one on every change of any stored object (CRDs included)."""
        return self._version

    @property
    def crd_version(self) -> int:
        """Increases when a served CRD of a watched group changes: live schemas must be reloaded."""
        return self._crd_version

    @property
    def changed(self) -> asyncio.Event:
        """Set at the next change after it was fetched: ``await state.changed.wait()``."""
        return self._changed

    @property
    def ready(self) -> bool:
        """The first sync is done, and the state is not older than ``stale_after`` seconds."""
        return self._first_sync_done() and self.staleness() <= self.stale_after

    def _first_sync_done(self) -> bool:
        if not self._first_synced:
            self._first_synced = self._planned and all(self._synced(kind) for kind in self._watched())
        return self._first_synced

    def staleness(self) -> float:
        """Seconds since any collection's list or watch last worked, while all of them fail; else 0."""
        reflectors = [*self._reflectors.values(), *([self._crd_reflector] if self._crd_reflector else [])]
        if not reflectors:
            return 0.0
        return min(r.stale_for for r in reflectors)

    def why_not_ready(self) -> str:
        """Why reviews cannot be judged now, in words; "" when ready."""
        if not self._first_sync_done():
            if not self._planned:
                detail = f": {self._discovery_error}" if self._discovery_error else ""
                return f"still syncing cluster state: discovering the served APIs{detail}; retry"
            failing = [(k, r) for k in self._watched() for r in self._reflectors_of(k)
                       if not r.synced and r.last_error and k not in REFERENCED_KINDS]
            if failing:
                return "; ".join(f"cannot list {k}: {r.problem()}" for k, r in failing) + "; retrying"
            pending = [k for k in self._watched() if not self._synced(k)]
            return f"still syncing cluster state ({', '.join(pending)} not listed yet); retry"
        stale = self.staleness()
        if stale > self.stale_after:
            errors = sorted({r.problem() for r in self._reflectors.values() if r.last_error})
            return (f"the cluster state is {stale:.0f}s stale (every watch failing; bound {self.stale_after:g}s)"
                    + (f": {errors[0]}" if errors else ""))
        return ""

    def reference_problems(self, obj: Obj) -> list[str]:
        """What the gate could not read of the Secrets/ConfigMaps ``obj`` references: O(references of obj)."""
        out: list[str] = []
        for target in sorted(referencewatches.referenced([obj])):
            reflector = self._referenced.get(target)
            if reflector is None:
                continue  # not referenced by a stored object yet (e.g. the object under review)
            kind, namespace, name = target
            if not reflector.synced and reflector.last_error:
                out.append(f"cannot read {kind} {namespace}/{name}: {reflector.problem()}; "
                           "what it holds is not checked")
            elif not reflector.synced:
                out.append(f"{kind} {namespace}/{name} is not read yet (its watch is starting); "
                           "what it holds is not checked")
            elif reflector.failing_since is not None:
                out.append(f"{kind} {namespace}/{name} may be stale: its watch fails since "
                           f"{reflector.stale_for:.0f}s: {reflector.problem()}")
        return out

    def snapshot(self) -> ClusterSnapshot:
        """The current state as a read-only ``State``: O(number of kinds), no object is copied."""
        if self._snapshot is None or self._snapshot.version != str(self._version):
            changed: set[Ref] | None = set()
            for kind, store in self._stores.items():
                keys = store.take_changes()
                if keys is None:
                    changed = None
                elif changed is not None:
                    changed.update(Ref(kind, namespace, name) for namespace, name in keys)
            views: dict[str, KindView] = {kind: store.view() for kind, store in self._stores.items()}
            previous = self._snapshot
            link = (previous, frozenset(changed)) if previous is not None and changed is not None else None
            self._snapshot = ClusterSnapshot(views, self._version, prior=link, provenance=self)
            if previous is not None:
                previous.forget_prior()
        return self._snapshot

    async def first_sync(self, timeout: float, *, poll: float = 0.05) -> str:
        """Wait for the first complete sync of every watched kind (``run()`` must be running): "" once it is
        done, else why not, as "<kind>: <cause>". A list refused for good (401, 403, 404) ends the wait at
        once; anything else is retried until ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        while not self._first_sync_done():
            refused = [(k, r) for k in self._watched() if k not in REFERENCED_KINDS for r in self._reflectors_of(k)
                       if not r.synced and r.last_status in PERMANENT_STATUSES]
            if refused:
                return "; ".join(f"{k}: {r.problem()}" for k, r in refused)
            if time.monotonic() >= deadline:
                if not self._planned:
                    return f"API discovery: {self._discovery_error or f'not done within {timeout:g}s'}"
                pending = [k for k in self._watched() if not self._synced(k)]
                causes = []
                for kind in pending:
                    problem = next((r.problem() for r in self._reflectors_of(kind) if r.last_error), "")
                    causes.append(f"{kind}: {problem or f'not listed within {timeout:g}s'}")
                return "; ".join(causes) or f"not synced within {timeout:g}s"
            await asyncio.sleep(poll)
        return ""

    # ---- what the shrink guard asks (webhook.reconcile.shrinkguard.Provenance) ------------------------------

    def deleted_by_watch(self, ref: Ref) -> bool:
        """``ref`` left the state through a watch DELETED event, not a re-list or a lost kind."""
        if ref.kind in self._lost:  # the API went away: its objects' DELETED events do not say anyone deleted them
            return False
        store = self._stores.get(ref.kind)
        return store is not None and store.deleted_by_watch((ref.namespace, ref.name))

    def source_problems(self) -> list[str]:
        """Why the state may be missing objects now: kinds that cannot be listed or watched, or that were
        served and no longer are (a CRD removed, or discovery not naming it any more)."""
        problems = [f"{kind}: {why}" for kind, why in sorted(self._lost.items())]
        for kind in self._watched():
            if kind in REFERENCED_KINDS:
                continue
            for reflector in self._reflectors_of(kind):
                if not reflector.synced:
                    problems.append(f"{kind}: not listed yet" + (f": {reflector.problem()}" if reflector.last_error
                                                                 else ""))
                elif reflector.last_error:
                    problems.append(f"{kind}: {reflector.problem()}")
        return problems

    def crd_documents(self) -> list[Obj]:
        """The served CRDs of the watched groups (spec with schemas), sorted by name; [] without access."""
        return list(self._crds.view().sorted())

    def status(self) -> dict[str, Any]:
        kinds: dict[str, Any] = {}
        for kind in self._infos:
            reflectors = self._reflectors_of(kind)
            last = max((r.last_sync for r in reflectors if r.last_sync is not None), default=None)
            kinds[kind] = {
                "served": kind in REFERENCED_KINDS or self._chosen.get(kind) is not None,
                "version": "v1" if kind in REFERENCED_KINDS else self._chosen.get(kind),
                "synced": self._synced(kind),
                "count": len(self._stores[kind]),
                "lastSync": None if last is None else datetime.fromtimestamp(last, UTC).isoformat(),
                "watches": len(reflectors),
                "resourceVersion": reflectors[0].resource_version
                if kind not in REFERENCED_KINDS and reflectors
                else None,
                "relists": sum(r.lists for r in reflectors),
                "errors": sum(r.errors for r in reflectors),
                "lastError": next((r.problem() for r in reflectors if r.last_error), None),
                "staleSeconds": round(max((r.stale_for for r in reflectors), default=0.0), 1),
            }
            if kind in REFERENCED_KINDS:
                kinds[kind]["unreadable"] = sorted(
                    f"{ns}/{name}: {r.problem()}" for (k, ns, name), r in self._referenced.items()
                    if k == kind and r.last_error)
        return {
            "ready": self.ready,
            "reason": self.why_not_ready() or None,
            "staleSeconds": round(self.staleness(), 1),
            "staleAfter": self.stale_after,
            "version": str(self._version),
            "crds": "watch" if self._crd_reflector is not None else "discovery",
            "kinds": kinds,
        }

    # ---- bookkeeping ---------------------------------------------------------------------------

    def _on_change(self, kind: str) -> None:
        self._version += 1
        if kind == CRD_KIND:
            self._crd_version += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()
        if kind == CRD_KIND or kind in referencewatches.REFERRING_KINDS:
            self._wake.set()

    def _reflectors_of(self, kind: str) -> list[Reflector]:
        if kind in REFERENCED_KINDS:
            return [r for (k, _, _), r in self._referenced.items() if k == kind]
        reflector = self._reflectors.get(kind)
        return [] if reflector is None else [reflector]

    def _watched(self) -> list[str]:
        return [k for k in self._infos if k in REFERENCED_KINDS or self._chosen.get(k) is not None]

    def _synced(self, kind: str) -> bool:
        if kind in REFERENCED_KINDS:
            # complete once the referrers are listed and each target was tried: one that cannot be
            # read is a problem of the objects referencing it, never of the whole state
            referrers = [k for k in referencewatches.REFERRING_KINDS if k in self._reflectors]
            return all(self._reflectors[k].synced for k in referrers) and all(
                r.settled for r in self._reflectors_of(kind)
            )
        reflector = self._reflectors.get(kind)
        return reflector is not None and reflector.synced

    def _start(self, ident: object, reflector: Reflector) -> None:
        self._tasks[ident] = asyncio.create_task(reflector.run(), name=f"reflect {reflector.collection.path}")

    async def _stop(self, ident: object) -> None:
        task = self._tasks.pop(ident, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _reflector(self, collection: Collection, store: Store) -> Reflector:
        slimmer = _slim if store is not self._crds else self._slim_crd
        return Reflector(self.api, collection, store, slimmer=slimmer, backoff_cap=self._backoff_cap)

    def _slim_crd(self, raw: Mapping[str, Any], collection: Collection) -> Obj | None:
        group = (raw.get("spec") or {}).get("group")
        return slimming.slim_crd(raw) if group in self._crd_groups else None

    # ---- the supervisor ------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the cluster until cancelled; on cancellation every reflector task is stopped."""
        try:
            await self._discover_until_done()
            if await self._crds_readable():
                collection = Collection(
                    CRD_KIND, "apiextensions.k8s.io/v1", discovery.path(discovery.CRD_INFO, "v1")
                )
                self._crd_reflector = self._reflector(collection, self._crds)
                self._start(CRD_KIND, self._crd_reflector)
                await self._crd_reflector.listed.wait()
            while True:
                self._wake.clear()  # before reconciling: a change during it wakes the next round
                await self._reconcile()
                self._planned = True
                if self._crd_reflector is not None:
                    await self._wake.wait()
                    continue
                try:
                    async with asyncio.timeout(self._rediscovery_interval):
                        await self._wake.wait()
                except TimeoutError:
                    await self._rediscover()
        finally:
            for ident in list(self._tasks):
                await self._stop(ident)

    async def _discover_until_done(self) -> None:
        backoff = Backoff(base=min(0.2, self._backoff_cap), cap=self._backoff_cap)
        while True:
            if await self._rediscover():
                return
            await asyncio.sleep(backoff.next())

    async def _rediscover(self) -> bool:
        groups = {i.group for i in self._infos.values()}
        try:
            self._served = await discovery.discover(self.api, groups | {discovery.CRD_INFO.group})
        except (clients.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as e:
            self._discovery_error = str(e) or type(e).__name__
            log.warning("API discovery failed", error=self._discovery_error)
            return False
        self._discovery_error = None
        return True

    async def _crds_readable(self) -> bool:
        if not self._crd_groups or "v1" not in self._served.get(
            ("apiextensions.k8s.io", "customresourcedefinitions"), ()
        ):
            return False
        try:
            await clients.get_json(self.api, discovery.path(discovery.CRD_INFO, "v1"), [("limit", "1")])
        except clients.ApiError as e:
            log.warning("cannot read CRDs; following API discovery instead", status=e.status, error=e.message)
            return False
        return True

    def _served_now(self) -> discovery.Served:
        if self._crd_reflector is None:
            return self._served
        served = {gp: vs for gp, vs in self._served.items() if gp[0] in discovery.BUILTIN_GROUPS}
        served.update(discovery.served_by_crds(self._crds.view().sorted()))
        return served

    async def _reconcile(self) -> None:
        served = self._served_now()
        for kind, info in self._infos.items():
            if kind in REFERENCED_KINDS:
                continue
            version = discovery.choose(info, served)
            if kind in self._chosen and version == self._chosen[kind]:
                continue
            await self._stop(kind)
            self._reflectors.pop(kind, None)
            was = self._chosen.get(kind)
            self._chosen[kind] = version
            if version is None:
                if was is not None:
                    self._lost[kind] = f"no longer served (its {was} API is gone: CRD removed?)"
                self._stores[kind].clear()  # the CRD went away, and with it every object of the kind
                continue
            self._lost.pop(kind, None)
            log.info("watching kind", kind=kind, version=version)
            collection = Collection(kind, discovery.api_version(info, version), discovery.path(info, version))
            self._reflectors[kind] = self._reflector(collection, self._stores[kind])
            self._start(kind, self._reflectors[kind])
        await self._reconcile_references()

    async def read_references(self, obj: Obj, *, deadline: float) -> None:
        """Read the Secrets/ConfigMaps ``obj`` references that nothing stored referenced yet, and keep
        them watched: a review must see every object it references (a new Gateway naming an existing
        Secret was told it does not exist). Each is read by the same scoped list-and-watch a stored
        reference gets; this waits until each first read is done or failed, or until ``deadline``
        (``time.monotonic()``), whichever comes first. O(references of obj)."""
        wanted_kinds = REFERENCED_KINDS & self._infos.keys()
        started: list[Reflector] = []
        for target in sorted(referencewatches.referenced([obj])):
            if target[0] not in wanted_kinds or target in self._referenced:
                continue
            self._referenced[target] = self._scoped_reflector(target)
            self._start(target, self._referenced[target])
            started.append(self._referenced[target])
        while started and not all(r.settled for r in started):
            left = deadline - time.monotonic()
            if left <= 0:
                return  # reference_problems() says which one is "not read yet"
            await asyncio.sleep(min(0.01, left))

    def _scoped_reflector(self, target: tuple[str, str, str]) -> Reflector:
        kind, namespace, name = target
        info = self._infos[kind]
        collection = Collection(kind, "v1", discovery.path(info, "v1", namespace),
                                field_selector=f"metadata.name={name}", scope=(namespace, name))
        return self._reflector(collection, self._stores[kind])

    async def _reconcile_references(self) -> None:
        wanted_kinds = REFERENCED_KINDS & self._infos.keys()
        snapshot = self.snapshot()
        referrers = (obj for k in referencewatches.REFERRING_KINDS for obj in snapshot.list(k))
        targets = {t for t in referencewatches.referenced(referrers) if t[0] in wanted_kinds}
        for target in [t for t in self._referenced if t not in targets]:
            await self._stop(target)
            del self._referenced[target]
            self._stores[target[0]].delete((target[1], target[2]))
        for target in sorted(targets - self._referenced.keys()):
            self._referenced[target] = self._scoped_reflector(target)
            self._start(target, self._referenced[target])
