"""A reflector keeps one Store equal to one API collection: list, then watch from the list's version.

kubernetes-asyncio has no informer, so this is the small part of client-go's that the gate needs:

1. List in pages (``limit``/``continue``), keep the list's ``resourceVersion``, replace the store at
   once when the last page arrives.
2. Watch from that version with bookmarks; apply ADDED/MODIFIED/DELETED, remember the version of
   every event and bookmark. A clean end of the stream (server timeout) re-watches from it.
3. 410 Gone (HTTP status or ERROR event, on watch or on a continue token) re-lists: the store is
   replaced, so objects deleted in the gap disappear and nothing is applied twice.
4. Any other failure (connection reset, 5xx, bad JSON) waits a jittered, capped backoff and resumes
   the watch from the last version; the store keeps serving the last known state meanwhile. The cap
   is low (an apiserver restart is followed within seconds); a refusal that will not heal by itself
   (401, 403, 404: RBAC or a missing API) is retried PERMANENT_BACKOFF_FACTOR times less often.
5. ``failing_since`` says how long the store has been without a working list or watch: what the
   state's staleness is made of.

Objects are keyed by (namespace, name), so a replayed event overwrites instead of duplicating.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from kubernetes_asyncio import client

from validators.objects import Obj
from webhook.cluster import clients
from webhook.cluster.stores import Key, Store, key_of

log = structlog.get_logger(__name__)

PAGE_SIZE = 500
DEFAULT_BACKOFF_CAP = 5.0
PERMANENT_STATUSES = frozenset({401, 403, 404})
PERMANENT_BACKOFF_FACTOR = 6.0
REASONS = {401: "unauthorized", 403: "forbidden", 404: "not found", 410: "expired"}


@dataclass(frozen=True, slots=True)
class Collection:
    """What to list and watch: an API path plus optional field selector, and how to store items."""

    kind: str
    api_version: str  # "v1", "gateway.networking.k8s.io/v1"
    path: str  # "/apis/gateway.networking.k8s.io/v1/httproutes"
    field_selector: str = ""
    scope: Key | None = None  # with a field selector on one name: the only key this reflector owns

    def owns(self, key: Key) -> bool:
        return self.scope is None or key == self.scope


Slimmer = Callable[[Mapping[str, Any], Collection], Obj | None]


class Backoff:
    """Jittered exponential backoff: a random delay in [ceiling/2, ceiling] of min(cap, base * 2**n).

    Kept by hand, not taken from ``backoff`` or ``tenacity`` (issue 27 asked; neither can do this job
    better): both drive a retry loop around one call that raises, while a reflector is a long-lived
    list/watch state machine whose schedule is shared across calls and changed from outside the failing
    call: reset when the server is in contact again (a watch that delivers, a list that completes), a
    second schedule for refusals that will not heal (401/403/404), and a 410 re-list that waits only on
    the second 410 in a row (``Reflector.run`` reads ``failures``). Wrapping the loop in their retry
    objects would re-raise every failure through them to keep that state, for the three lines below.
    """

    def __init__(self, *, base: float, cap: float) -> None:
        self.base, self.cap, self.failures = base, cap, 0

    def reset(self) -> None:
        self.failures = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.base * 2 ** min(self.failures, 30))
        self.failures += 1
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not cryptography


class Reflector:
    def __init__(
        self,
        api: client.ApiClient,
        collection: Collection,
        store: Store,
        *,
        slimmer: Slimmer,
        backoff_cap: float = DEFAULT_BACKOFF_CAP,
        watch_timeout: tuple[int, int] = (300, 600),
    ) -> None:
        self.api = api
        self.collection = collection
        self.store = store
        self._slim = slimmer
        self._backoff = Backoff(base=min(0.2, backoff_cap), cap=backoff_cap)
        self._permanent_backoff = Backoff(base=min(0.2, backoff_cap), cap=backoff_cap * PERMANENT_BACKOFF_FACTOR)
        self._watch_timeout = watch_timeout
        self.resource_version: str | None = None
        self.synced = False  # completed a first list
        self.last_sync: float | None = None  # wall time of the last completed list
        self.lists = 0
        self.errors = 0
        self.events = 0
        self.last_error: str | None = None
        self.last_status: int | None = None  # HTTP status of the last failure, when the server answered
        self.failing_since: float | None = None  # monotonic time of the first failure since the last success
        self.listed = asyncio.Event()  # set after every completed list

    @property
    def settled(self) -> bool:
        """The first list either completed or failed: the gate knows what it can say about this object."""
        return self.synced or self.last_error is not None

    @property
    def stale_for(self) -> float:
        """Seconds since the last working list or watch, while failing; 0 while in contact."""
        return 0.0 if self.failing_since is None else time.monotonic() - self.failing_since

    def problem(self) -> str:
        """The last failure in words, reason first: "forbidden (HTTP 403: secrets "x" is forbidden: ...)"."""
        if self.last_error is None:
            return ""
        reason = REASONS.get(self.last_status or 0)
        return f"{reason} ({self.last_error})" if reason else self.last_error

    def _failed(self, error: BaseException, text: str) -> float:
        """Record a failure; the delay before the next attempt."""
        self.errors += 1
        self.last_error = text
        self.last_status = error.status if isinstance(error, clients.ApiError) else None
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        if self.last_status in PERMANENT_STATUSES:
            return self._permanent_backoff.next()
        return self._backoff.next()

    def _in_contact(self) -> None:
        self.failing_since = None
        self.last_error = None
        self.last_status = None
        self._permanent_backoff.reset()

    async def run(self) -> None:
        """List and watch until cancelled. Never returns otherwise, never raises but CancelledError."""
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                    self._backoff.reset()
                started, events = time.monotonic(), self.events
                await self._watch()
                if self.events == events and time.monotonic() - started < 1.0:
                    await asyncio.sleep(self._backoff.next())  # a stream that ends at once: do not spin
            except clients.Gone as e:
                log.info("resource version expired, re-listing", kind=self.collection.kind, reason=e.message)
                self.resource_version = None
                if self._backoff.failures:  # a second 410 in a row: do not hammer the server
                    await asyncio.sleep(self._backoff.next())
                else:
                    self._backoff.failures = 1
            except (
                aiohttp.ClientError,
                TimeoutError,
                clients.ApiError,
                ValueError,
                KeyError,
                TypeError,
            ) as e:
                delay = self._failed(e, str(e) or type(e).__name__)
                log.warning(
                    "watch failed, backing off",
                    kind=self.collection.kind,
                    error=str(e) or type(e).__name__,
                    delay=round(delay, 3),
                )
                await asyncio.sleep(delay)
            except Exception as e:  # a bug must not silently stop a kind from following the cluster
                delay = self._failed(e, repr(e))
                log.exception("reflector failed unexpectedly", kind=self.collection.kind)
                await asyncio.sleep(delay)

    def _query(self, *extra: tuple[str, str]) -> list[tuple[str, str]]:
        query = [("fieldSelector", self.collection.field_selector)] if self.collection.field_selector else []
        return [*query, *extra]

    async def _list(self) -> None:
        items: dict[Key, Obj] = {}
        token = ""
        version = ""
        while True:
            extra = [("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
            page = await clients.get_json(self.api, self.collection.path, self._query(*extra))
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            for raw in page.get("items") or ():
                obj = self._slim(raw, self.collection)
                if obj is not None:
                    items[key_of(obj)] = obj
            token = str(meta.get("continue") or "")
            if not token:
                break
        if not version:
            raise clients.ApiError(0, f"list of {self.collection.path} carries no resourceVersion")
        self.store.replace(items, None if self.collection.scope is None else self.collection.owns)
        self.resource_version = version
        self.synced = True
        self.last_sync = time.time()
        self.lists += 1
        self._in_contact()
        self.listed.set()

    async def _watch(self) -> None:
        timeout = random.randint(*self._watch_timeout)  # noqa: S311 - spreads reconnects, not security
        query = self._query(
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version or ""),
            ("timeoutSeconds", str(timeout)),
        )
        async for event in clients.stream_lines(
            self.api, self.collection.path, query, read_timeout=timeout + 30, opened=self._in_contact
        ):
            self._apply(event)
            self.events += 1
            self._backoff.reset()

    def _apply(self, event: Mapping[str, Any]) -> None:
        type_ = event.get("type")
        raw = event.get("object")
        if not isinstance(raw, Mapping):
            raise ValueError(f"watch event without an object: {json.dumps(event)[:200]}")
        if type_ == "ERROR":
            raise clients.error_for(
                int(raw.get("code") or 0), str(raw.get("message") or raw.get("reason") or "")
            )
        version = raw.get("metadata", {}).get("resourceVersion")
        if type_ in ("ADDED", "MODIFIED"):
            obj = self._slim(raw, self.collection)
            key = key_of(raw)
            if self.collection.owns(key):
                if obj is None:
                    self.store.delete(key)  # modified out of what we keep (e.g. a CRD of another group)
                else:
                    self.store.put(key, obj)
        elif type_ == "DELETED":
            key = key_of(raw)
            if self.collection.owns(key):
                self.store.observed_delete(key)
        elif type_ != "BOOKMARK":
            raise ValueError(f"unknown watch event type {type_!r}")
        if version:
            self.resource_version = str(version)
