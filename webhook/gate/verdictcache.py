"""Reuse of a verdict for an identical request: the apiserver's retries, ``kubectl apply
--dry-run=server`` followed by the real apply, several webhook configurations naming one object.

The key is what the verdict depends on: the state version (with the CRD schemas in use and what the
data plane has loaded as reconcile published it, which the verdict's prediction planned against:
``servers._judged_against``), the operation and a hash of the object and old object content. Left
out of the hash are the fields no validator or template reads and that differ between such requests
(``metadata.uid``: a dry run and the real create get different ones; ``resourceVersion``,
``generation``, ``managedFields``); the request's own uid and ``dryRun`` are not part of a Change's
content at all. The response builder echoes each request's own uid.

Bounded LRU; concurrent identical requests share one future. Only a decision is kept: a "could not
decide" verdict or a failure is dropped, so the next identical request tries again. Only the newest
state version's verdicts are kept: a request is judged against the state as it is now, so an entry of
an older version is never asked for again, and a verdict may hold what it was judged against (a
status worked out when first read holds its render's state) that a new version should let go.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from validators.changes import Change
from webhook.gate.verdicts import Decision, Verdict

SIZE = 256
IGNORED_METADATA = frozenset({"uid", "resourceVersion", "generation", "managedFields"})

Key = tuple[str, str, str, str]
# One encoder for every hash: json.dumps with options builds a new JSONEncoder on each call.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr).encode


def content_hash(obj: Any) -> str:
    """A digest of an object's content without the bookkeeping metadata; "" for no object."""
    if obj is None:
        return ""
    # dict first: isinstance against the Mapping ABC is the slow path, kept for other mappings
    if (type(obj) is dict or isinstance(obj, Mapping)) and _is_mapping(obj.get("metadata")):
        meta = {k: v for k, v in obj["metadata"].items() if k not in IGNORED_METADATA}
        obj = {**obj, "metadata": meta}
    text = _encode(obj)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def key_of(change: Change, state_version: str) -> Key:
    return state_version, str(change.operation), content_hash(change.obj), content_hash(change.old)


class VerdictCache:
    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self.hits = 0
        self._entries: OrderedDict[Key, asyncio.Future[Verdict]] = OrderedDict()
        self._version: str | None = None  # the state version of the entries

    def __len__(self) -> int:
        return len(self._entries)

    async def verdict(self, change: Change, state_version: str,
                      judge: Callable[[], Awaitable[Verdict]]) -> tuple[Verdict, bool]:
        """The cached verdict for this change in this state, else ``await judge()`` (shared); and
        whether it was reused from another request."""
        key = key_of(change, state_version)
        if state_version != self._version:
            # A request in flight on the old version keeps its own future: only the entries go.
            self._entries.clear()
            self._version = state_version
        future = self._entries.get(key)
        if future is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            shared = True
        else:
            future = asyncio.ensure_future(judge())
            future.add_done_callback(lambda f: self._keep_decisions(key, f))
            self._entries[key] = future
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            shared = False
        verdict = await asyncio.shield(future)
        # A reused verdict cost this request no render or check: its timings are not this request's.
        return (replace(verdict, timings={}), True) if shared else (verdict, False)

    def _keep_decisions(self, key: Key, future: asyncio.Future[Verdict]) -> None:
        keep = (not future.cancelled() and future.exception() is None
                and future.result().decision is not Decision.ERROR)
        if not keep and self._entries.get(key) is future:
            del self._entries[key]
