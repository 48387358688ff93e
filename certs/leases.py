"""coordination.k8s.io/v1 Leases as dicts: the time format and expiry leader election uses
(``certs.leaderelection``), and per-replica serving reports.

Each replica keeps its own small Lease (the same mechanism nodes use for heartbeats) that reports
which leaf it is serving: annotation `routegate.io/serving-fingerprint` = sha256 of the leaf's DER. The
leader ends a CA rollover only when every report that is still fresh names the current leaf.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

log = structlog.get_logger()

REPORT_LABEL = "routegate.io/cert-report"
FINGERPRINT_ANNOTATION = "routegate.io/serving-fingerprint"


def micro_time(t: datetime) -> str:
    """The apiserver's MicroTime format."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def body(data: dict[str, Any]) -> Any:
    """A camelCase dict body: the client sends it as is (its models would format MicroTime wrongly)."""
    return cast(Any, data)


def dns_suffix(identity: str) -> str:
    """A Lease-name-safe form of a pod name or other identity."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")
    return cleaned[:200] or "replica"


def expired(spec: dict[str, Any], now: datetime) -> bool:
    renew = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds") or 0
    return renew is None or renew + timedelta(seconds=int(duration)) < now


class Leases:
    """Lease operations in one namespace, as dicts (camelCase, as the apiserver speaks them)."""

    def __init__(self, api: client.ApiClient, namespace: str, *, now: Callable[[], datetime]) -> None:
        self.api = api
        self.coord = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.now = now

    def _dict(self, model: object) -> dict[str, Any]:
        data = self.api.sanitize_for_serialization(model)
        return data if isinstance(data, dict) else {}

    async def read(self, name: str) -> dict[str, Any] | None:
        try:
            return self._dict(await self.coord.read_namespaced_lease(name, self.namespace))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def report(self, prefix: str, identity: str, fingerprint: str, *, duration: int) -> None:
        """Create or refresh this replica's serving report."""
        name = f"{prefix}-serving-{dns_suffix(identity)}"
        now = self.now()
        report: dict[str, Any] = {
            "metadata": {"name": name, "namespace": self.namespace, "labels": {REPORT_LABEL: prefix},
                         "annotations": {FINGERPRINT_ANNOTATION: fingerprint}},
            "spec": {"holderIdentity": identity, "leaseDurationSeconds": duration,
                     "renewTime": micro_time(now)},
        }
        lease = await self.read(name)
        try:
            if lease is None:
                await self.coord.create_namespaced_lease(self.namespace, body(report))
            else:
                report["metadata"]["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
                await self.coord.replace_namespaced_lease(name, self.namespace, body(report))
        except ApiException as e:
            if e.status != 409:  # a concurrent write of our own report: the next step refreshes it
                raise

    async def serving(self, prefix: str, *, forget_after: timedelta) -> list[str]:
        """Fingerprints reported by live replicas; reports silent for `forget_after` are deleted."""
        now = self.now()
        found = self._dict(await self.coord.list_namespaced_lease(
            self.namespace, label_selector=f"{REPORT_LABEL}={prefix}"))
        prints = []
        for item in found.get("items") or []:
            spec = item.get("spec") or {}
            meta = item.get("metadata") or {}
            if not expired(spec, now):
                prints.append(str((meta.get("annotations") or {}).get(FINGERPRINT_ANNOTATION, "")))
                continue
            renew = parse_time(spec.get("renewTime"))
            if renew is None or renew + forget_after < now:
                try:
                    await self.coord.delete_namespaced_lease(meta.get("name", ""), self.namespace)
                except ApiException as e:
                    if e.status != 404:
                        raise
        return prints
