"""Kubernetes Warning Events on stored objects with admission denials or warnings, deduplicated and rate-limited.

One event per (object, reason, message): the first sighting creates it, a sighting within
``repeat_after`` seconds writes nothing, a later one bumps its ``count`` and ``lastTimestamp`` with a
merge patch (what ``kubectl describe`` shows as "x3 over 20m"), the way client-go's recorder
aggregates. Each object also has a token bucket (``burst`` events, one more per ``refill`` seconds), so
an object with many findings cannot flood the API server; what the bucket refuses is counted, not
queued. Core/v1 Events (``involvedObject``), which every kubectl version shows.
"""

from __future__ import annotations

import collections
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from kubernetes_asyncio import client

from validators import codes
from validators.findings import Finding, Severity
from validators.objects import KINDS, Ref
from webhook import metrics

log = structlog.get_logger("routegate.events")

COMPONENT = "routegate"
REMEMBERED = 10_000  # (object, reason, message) keys kept for deduplication, oldest dropped first
_REASONS = {info.code: info.name for info in codes.INFOS if info.name}
_UNVERIFIABLE = "BackendTLSPolicyUnverifiable"
_REASONS.update(dict.fromkeys((codes.SAN_SEVERAL, codes.SAN_URI, codes.SAN_MISMATCH, codes.TLS_NO_TRUST),
                              _UNVERIFIABLE))
_REASONS.update({codes.HAPROXY_REJECTED: "HAProxyRejected", codes.RENDER_REFUSED: "RenderRefused"})


# "(haproxy.cfg:34: ..." in HAProxy's message: where the line falls moves whenever other objects change, so
# an object that stays broken would get a new Event per reconcile; the series is keyed without it.
_LINE_NUMBER = re.compile(r"(\([\w./-]+):\d+(?=: )")


def reason_for(finding: Finding) -> str:
    """The event reason: the seed's name for the rule (InvalidSessionPersistence, ...), else one per code."""
    return _REASONS.get(finding.code) or f"Routegate{finding.code}"


_NO_EVENT = frozenset({codes.RENDER_BACKEND_UNSERVED})  # retired: reported as RG0501-RG0503 instead


def worth_an_event(finding: Finding) -> bool:
    """A denial admission would give, and every warning: what admission warns about (a rule dropped, a filter
    not applied) is as much news on a stored object. Each is written once and then deduplicated
    (``EventRecorder.warn``)."""
    return finding.severity in (Severity.DENY, Severity.WARN) and finding.code not in _NO_EVENT


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Bucket:
    tokens: float
    at: float


class EventRecorder:
    def __init__(self, api: client.ApiClient, *, repeat_after: float = 600.0, burst: int = 25,
                 refill: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 host: str = "") -> None:
        # Imported here, not with the module: ``reconcile`` needs this module's reasons in every process
        # that reconciles, and the client's generated models (~19 MiB) are of use only with an API server.
        from kubernetes_asyncio.client import CoreV1Api
        from kubernetes_asyncio.client.exceptions import ApiException

        self._api_error = ApiException
        self.core = CoreV1Api(api)
        self.repeat_after = repeat_after
        self.burst = burst
        self.refill = refill
        self.host = host
        self._clock = clock
        self._seen: collections.OrderedDict[tuple[Ref, str, str], tuple[str, int, float]] = collections.OrderedDict()
        self._buckets: dict[Ref, _Bucket] = {}

    def _take(self, ref: Ref) -> bool:
        now = self._clock()
        bucket = self._buckets.setdefault(ref, _Bucket(float(self.burst), now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.refill)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    async def warn(self, ref: Ref, reason: str, message: str, *, uid: str = "", api_version: str = "") -> bool:
        """Record a Warning on ``ref``; True when something was written."""
        key = (ref, reason, _LINE_NUMBER.sub(r"\1", message))
        seen = self._seen.get(key)
        now = self._clock()
        if seen is not None and now - seen[2] < self.repeat_after:
            metrics.EVENTS.labels("deduplicated").inc()
            return False
        if not self._take(ref):
            metrics.EVENTS.labels("rate_limited").inc()
            return False
        namespace = ref.namespace or "default"
        name = f"{ref.name}.{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}"
        try:
            if seen is None:
                count = await self._create(ref, namespace, name, reason, message, uid, api_version)
            else:
                count = seen[1] + 1
                await self._bump(namespace, name, count)
        except self._api_error as exc:
            metrics.EVENTS.labels("failed").inc()
            log.warning("cannot write event", object=str(ref), reason=reason, status=exc.status)
            return False
        metrics.EVENTS.labels("written").inc()
        self._seen[key] = (name, count, now)
        self._seen.move_to_end(key)
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        return True

    async def _create(self, ref: Ref, namespace: str, name: str, reason: str, message: str, uid: str,
                      api_version: str) -> int:
        info = KINDS.get(ref.kind)
        if not api_version and info is not None:
            api_version = f"{info.group}/{info.versions[0]}" if info.group else info.versions[0]
        stamp = _now()
        # A plain dict: the client serializes it as is (the typed model would drop nothing but cost more).
        body: Any = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"apiVersion": api_version, "kind": ref.kind,
                               "name": ref.name, "namespace": ref.namespace, **({"uid": uid} if uid else {})},
            "type": "Warning", "reason": reason, "message": message[:1024],
            "source": {"component": COMPONENT, **({"host": self.host} if self.host else {})},
            "reportingComponent": COMPONENT, "reportingInstance": self.host or COMPONENT,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self.core.create_namespaced_event(namespace, body)
            return 1
        except self._api_error as exc:
            if exc.status != 409:  # 409: written before a restart; continue its series
                raise
        await self._bump(namespace, name, 2)
        return 2

    async def _bump(self, namespace: str, name: str, count: int) -> None:
        # The generated signature hides the per-call content type; without it a dict body goes out as a
        # strategic merge patch, which Events accept too, but merge patch is what the fake and RBAC docs name.
        await self.core.patch_namespaced_event(  # type: ignore[call-arg]
            name, namespace, {"count": count, "lastTimestamp": _now()},
            _content_type="application/merge-patch+json")
