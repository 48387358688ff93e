"""Leader election on a coordination.k8s.io/v1 Lease: the one module certificate rotation
(``certs.selfmanaged``) and the Gateway API status writer (``webhook.reconcile.statuswriter``) elect with.

client-go's rules in miniature: a Lease with holderIdentity, renewTime and leaseDurationSeconds; the
holder renews it every ``retry`` seconds; anyone may take it over once renewTime + duration has passed;
every write carries the resourceVersion it read, so two candidates cannot both win (the loser gets 409).
A leader that cannot renew stops *acting* as one (``leading``) once ``renew_deadline`` has passed since
its last renewal, measured on its own monotonic clock, before another candidate may take the Lease over
(the deadline is shorter than the duration). On shutdown the holder gives the Lease up, so the next
leader need not wait for it to expire.

Why not ``kubernetes_asyncio.leaderelection``: its LeaseLock writes renewTime/acquireTime through the
client's models, which format a naive local datetime with ``isoformat()`` (no zone, and no fraction at
whole seconds), which a real apiserver's MicroTime parser rejects; it has no release on shutdown and no
single-step call for a loop that already ticks (``SelfManaged.step``). The Lease dicts here are
camelCase as the apiserver speaks them (``certs.leases.micro_time``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from certs.leases import body, expired, micro_time, parse_time

log = structlog.get_logger()


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Elector:
    """One candidate for the leader Lease ``name`` in ``namespace``."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str, *, duration: int = 15,
                 retry: float = 5.0, renew_deadline: float | None = None, now: Callable[[], datetime] = _utcnow,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.coord = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration = duration
        self.retry = retry
        # act as leader only while the last renewal is this recent: the others wait the whole duration
        self.renew_deadline = renew_deadline if renew_deadline is not None else duration * 2 / 3
        self.now = now
        self.clock = clock
        self.is_leader = False  # the last attempt held the Lease
        self._renewed: float | None = None  # monotonic time of the last successful take or renewal

    @property
    def leading(self) -> bool:
        """Whether to act as leader now: held, and renewed within ``renew_deadline``."""
        return (self.is_leader and self._renewed is not None
                and self.clock() - self._renewed < self.renew_deadline)

    async def _read(self) -> dict[str, Any] | None:
        try:
            lease = await self.coord.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        data = self.api.sanitize_for_serialization(lease)
        return data if isinstance(data, dict) else {}

    async def try_acquire(self) -> bool:
        """One attempt to take or renew the Lease; False when someone else holds it (or won a race).

        API errors other than a lost race are raised (the caller's loop logs and retries)."""
        mark = self.clock()
        try:
            self.is_leader = await self._acquire()
        except Exception:
            self.is_leader = False
            raise
        if self.is_leader:
            self._renewed = mark
        return self.is_leader

    async def _acquire(self) -> bool:
        now = self.now()
        lease = await self._read()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
        try:
            if lease is None:
                new = {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
                await self.coord.create_namespaced_lease(self.namespace, body(new))
                log.info("leader_acquired", lease=self.name, identity=self.identity)
                return True
            old = lease.get("spec") or {}
            mine = old.get("holderIdentity") == self.identity
            if not mine and old.get("holderIdentity") and not expired(old, now):
                return False
            if mine:  # re-format: the client's isoformat() drops ".000000", which MicroTime rejects
                spec["acquireTime"] = micro_time(parse_time(old.get("acquireTime")) or now)
                spec["leaseTransitions"] = old.get("leaseTransitions") or 0
            else:
                spec["leaseTransitions"] = (old.get("leaseTransitions") or 0) + 1
            meta = lease.get("metadata") or {}
            new = {"metadata": {"name": self.name, "namespace": self.namespace,
                                "resourceVersion": meta.get("resourceVersion")}, "spec": spec}
            await self.coord.replace_namespaced_lease(self.name, self.namespace, body(new))
        except ApiException as e:
            if e.status == 409:
                return False
            raise
        if not mine:
            log.info("leader_acquired", lease=self.name, identity=self.identity, previous=old.get("holderIdentity"))
        return True

    async def release(self) -> None:
        """Give the Lease up (shutdown) so the next leader need not wait for it to expire."""
        self.is_leader = False
        self._renewed = None
        lease = await self._read()
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        spec = lease["spec"]
        released = {
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": spec.get("leaseDurationSeconds") or 1,
                     "renewTime": micro_time(datetime.fromtimestamp(0, UTC)),
                     "leaseTransitions": spec.get("leaseTransitions") or 0},
        }
        try:
            await self.coord.replace_namespaced_lease(self.name, self.namespace, body(released))
        except ApiException as e:
            if e.status != 409:
                raise

    async def run(self) -> None:
        """Take and renew the Lease every ``retry`` seconds, forever; give it up when cancelled."""
        try:
            while True:
                try:
                    await self.try_acquire()
                except Exception as e:  # apiserver down, forbidden: not leader, try again
                    log.warning("leader_election_failed", lease=self.name, error=type(e).__name__,
                                status=getattr(e, "status", None), reason=str(getattr(e, "reason", e))[:200])
                await asyncio.sleep(self.retry)
        finally:
            if self.is_leader:
                try:
                    await self.release()
                except Exception as e:  # it expires on its own: the next leader waits leaseDurationSeconds
                    log.warning("leader_release_failed", lease=self.name, error=type(e).__name__,
                                reason=str(getattr(e, "reason", e))[:200])
