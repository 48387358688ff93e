"""Self-managed certificates against the in-process fake apiserver, with a controllable clock.

Two replicas share one fake API; each `step()` is one tick of the real loop (report, elect, reconcile,
sync files). kubernetes-asyncio makes real HTTP calls to the fake.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from certfakes import FakeKube
from cryptography import x509
from kubernetes_asyncio import client

from certs import generation
from certs.reloading import CertReloader
from certs.selfmanaged import SelfManaged

NS, SECRET, WEBHOOK, SERVICE = "routegate-system", "routegate-webhook-tls", "routegate", "routegate"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
TICK = timedelta(seconds=5)
ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


def _vwc(name: str, hooks: int = 2) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": f"hook{i}.routegate.io", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None",
                          "clientConfig": {"service": {"name": SERVICE, "namespace": NS,
                                                       "path": "/validate"}}}
                         for i in range(hooks)]}


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> datetime:
        return self.t


@dataclass
class Cluster:
    fake: FakeKube
    api: client.ApiClient
    clock: Clock
    tmp: Path

    def replica(self, name: str, **kw: Any) -> SelfManaged:
        return SelfManaged(self.api, namespace=NS, secret_name=SECRET, webhook_name=WEBHOOK, service=SERVICE,
                           out_dir=self.tmp / name, identity=name, now=self.clock, interval=5.0,
                           lease_duration=15, **kw)

    def secret(self) -> dict[str, bytes]:
        obj = self.fake.get("secrets", NS, SECRET)
        assert obj is not None
        return {k: base64.b64decode(v) for k, v in obj["data"].items()}

    def webhook_bundles(self, name: str = WEBHOOK) -> list[list[str]]:
        obj = self.fake.get("validatingwebhookconfigurations", "", name)
        assert obj is not None
        out = []
        for hook in obj["webhooks"]:
            pem = base64.b64decode(hook.get("clientConfig", {}).get("caBundle", ""))
            out.append([generation.fingerprint(c) for c in generation.load_certs(pem)] if pem else [])
        return out

    def bundle(self) -> list[str]:
        """The caBundle, asserting every webhook in our configuration carries the same one."""
        bundles = self.webhook_bundles()
        assert all(b == bundles[0] for b in bundles), bundles
        return bundles[0]


@pytest.fixture
async def cluster(tmp_path: Path, aiohttp_server: ServerFactory) -> AsyncIterator[Cluster]:
    fake = FakeKube()
    fake.put("validatingwebhookconfigurations", "", _vwc(WEBHOOK))
    fake.put("validatingwebhookconfigurations", "", _vwc("someone-else", hooks=1))
    server = await aiohttp_server(fake.app())
    api = client.ApiClient(configuration=client.Configuration(host=str(server.make_url("")).rstrip("/")))
    try:
        yield Cluster(fake, api, Clock(), tmp_path)
    finally:
        await api.close()


def _served(replica: SelfManaged) -> x509.Certificate:
    return generation.load_certs(replica.paths.cert.read_bytes())[0]


def _ca(c: Cluster) -> x509.Certificate:
    return generation.load_certs(c.secret()["ca-signing.crt"])[0]


async def _tick(c: Cluster, *replicas: SelfManaged) -> None:
    """One loop iteration on each replica, in order, then assert the safety property: every leaf any
    replica serves is signed by a CA the webhook configuration trusts right now."""
    for r in replicas:
        await r.step()
        c.clock.t += TICK
        bundle = set(c.bundle())
        for other in replicas:
            if other.paths.cert.exists():
                leaf = _served(other)
                known = [*generation.load_certs(c.secret()["ca.crt"]), _ca(c)]
                issuers = [ca for ca in known if generation.fingerprint(ca) in bundle]
                assert any(generation.signed_by(leaf, ca) for ca in issuers), f"{other.identity} untrusted"


async def test_first_start_creates_the_secret_patches_the_bundle_and_writes_files(cluster: Cluster) -> None:
    c = cluster
    a, b = c.replica("routegate-a"), c.replica("routegate-b")
    other = c.fake.get("validatingwebhookconfigurations", "", "someone-else")
    assert other is not None
    other_rv = other["metadata"]["resourceVersion"]
    await _tick(c, a, b)
    assert a.is_leader and not b.is_leader
    data = c.secret()
    assert set(data) == {"ca.crt", "ca-signing.crt", "ca-signing.key", "tls.crt", "tls.key"}
    ca = _ca(c)
    assert c.bundle() == [generation.fingerprint(ca)]
    for r in (a, b):
        assert r.ready.is_set()
        assert stat.S_IMODE(r.paths.key.stat().st_mode) == 0o600
        leaf = generation.load_issued(r.paths.cert.read_bytes(), r.paths.key.read_bytes())
        assert generation.signed_by(leaf.cert, ca)
        assert generation.covers(leaf.cert, generation.service_dns_names(SERVICE, NS))
        assert r.paths.ca.read_bytes() == data["ca.crt"]
    # by name, nothing else: no VWC list, the other configuration untouched
    touched = {p for _, p in c.fake.requests if "validatingwebhookconfigurations" in p}
    assert touched == {f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK}"}
    other = c.fake.get("validatingwebhookconfigurations", "", "someone-else")
    assert other is not None and other["metadata"]["resourceVersion"] == other_rv
    writers = {(m, p) for m, p in c.fake.requests if m in ("POST", "PUT") and "/secrets" in p}
    assert writers == {("POST", f"/api/v1/namespaces/{NS}/secrets")}  # only the leader wrote, once


async def test_the_leaf_is_renewed_at_two_thirds_of_its_life_under_the_same_ca(cluster: Cluster) -> None:
    c = cluster
    a, b = c.replica("routegate-a"), c.replica("routegate-b")
    await _tick(c, a, b)
    first, ca = _served(b), _ca(c)
    c.clock.t = T0 + 242 * DAY
    await _tick(c, a, b)
    assert _served(b) == first and a.last_plan is not None and a.last_plan.action == "keep"
    c.clock.t = T0 + 244 * DAY
    await _tick(c, a, b)
    renewed = _served(b)
    assert renewed != first and _served(a) == renewed
    assert a.last_plan is not None and (a.last_plan.action, a.last_plan.rule) == ("renew-leaf", 5)
    assert generation.signed_by(renewed, ca) and _ca(c) == ca
    assert renewed.not_valid_before_utc == T0 + 244 * DAY - timedelta(hours=1)
    assert c.bundle() == [generation.fingerprint(ca)]


async def test_a_ca_rollover_keeps_both_cas_until_every_replica_serves_the_new_leaf(cluster: Cluster) -> None:
    c = cluster
    a, b = c.replica("routegate-a"), c.replica("routegate-b")
    await _tick(c, a, b)
    old_ca = generation.fingerprint(_ca(c))
    c.clock.t = T0 + 2440 * DAY  # past two thirds of the CA's ten years
    history: list[tuple[str, list[str]]] = []
    for _ in range(6):
        await _tick(c, a, b)
        assert a.last_plan is not None
        history.append((str(a.last_plan.action), c.bundle()))
    new_ca = generation.fingerprint(_ca(c))
    assert new_ca != old_ca
    actions = [act for act, _ in history]
    # renew the expired leaf, roll the CA, re-issue from the new CA, wait for b, then trim
    assert actions[:5] == ["renew-leaf", "roll-ca", "renew-leaf", "keep", "trim-bundle"], history
    assert history[1][1] == [new_ca, old_ca] and history[2][1] == [new_ca, old_ca]
    assert history[3][1] == [new_ca, old_ca]  # b had not reported the new leaf yet
    assert history[4][1] == [new_ca] and history[5] == ("keep", [new_ca])
    for r in (a, b):
        assert generation.signed_by(_served(r), _ca(c))
        assert r.paths.ca.read_bytes() == c.secret()["ca.crt"]


async def test_the_rollover_waits_for_a_replica_whose_reloader_still_serves_the_old_leaf(
        cluster: Cluster) -> None:
    c = cluster
    a, b = c.replica("routegate-a"), c.replica("routegate-b")
    await _tick(c, a, b)
    stuck = CertReloader(b.paths.cert, b.paths.key)
    stuck.load()
    b.serving = lambda: stuck.fingerprint  # b's server never reloads in this test
    c.clock.t = T0 + 2440 * DAY
    for _ in range(8):
        await _tick(c, a, b)
    assert len(c.bundle()) == 2, "old CA dropped while b still served a leaf from it"
    stuck.poll()  # b finally picks up the files
    for _ in range(2):
        await _tick(c, a, b)
    assert c.bundle() == [generation.fingerprint(_ca(c))]


async def test_only_the_lease_holder_writes_and_another_replica_takes_over_when_it_expires(
        cluster: Cluster) -> None:
    c = cluster
    a, b = c.replica("routegate-a"), c.replica("routegate-b")
    await _tick(c, a, b)
    await _tick(c, b)
    assert a.is_leader and not b.is_leader
    lease = c.fake.get("leases", NS, f"{SECRET}-leader")
    assert lease is not None and lease["spec"]["holderIdentity"] == "routegate-a"
    c.clock.t += timedelta(seconds=20)  # a died: its lease (15 s) runs out
    c.clock.t = T0 + 250 * DAY
    await _tick(c, b)
    assert b.is_leader and b.last_plan is not None and b.last_plan.action == "renew-leaf"
    lease = c.fake.get("leases", NS, f"{SECRET}-leader")
    assert lease is not None and lease["spec"]["holderIdentity"] == "routegate-b"
    assert lease["spec"]["leaseTransitions"] == 1
    await _tick(c, a)
    assert not a.is_leader


async def test_a_missing_webhook_configuration_is_patched_once_it_appears(cluster: Cluster) -> None:
    c = cluster
    del c.fake.objects[("validatingwebhookconfigurations", "", WEBHOOK)]
    a = c.replica("routegate-a")
    await a.step()
    assert a.ready.is_set() and "tls.crt" in c.secret()
    c.fake.put("validatingwebhookconfigurations", "", _vwc(WEBHOOK, hooks=3))
    await a.step()
    assert c.bundle() == [generation.fingerprint(_ca(c))]
    assert len(c.webhook_bundles()) == 3


async def test_no_leaf_from_the_new_ca_while_the_webhook_does_not_trust_it(cluster: Cluster) -> None:
    c = cluster
    a = c.replica("routegate-a")
    await _tick(c, a)
    c.clock.t = T0 + 2440 * DAY
    await _tick(c, a)  # renew the expired leaf
    await _tick(c, a)  # roll the CA: bundle [new, old]
    assert a.last_plan is not None and a.last_plan.action == "roll-ca"
    old_issuer_leaf = _served(a)
    vwc = c.fake.get("validatingwebhookconfigurations", "", WEBHOOK)
    assert vwc is not None
    for hook in vwc["webhooks"]:  # someone re-applies the manifests: caBundle gone
        hook["clientConfig"].pop("caBundle")
    await a.step()  # sees the webhook without the new CA: repatches, but does not issue yet
    assert a.last_plan is not None and (a.last_plan.action, a.last_plan.rule) == ("keep", 6)
    assert _served(a) == old_issuer_leaf
    await a.step()
    assert a.last_plan is not None and a.last_plan.action == "renew-leaf"
    assert generation.signed_by(_served(a), _ca(c))


MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


async def test_a_stopping_leader_releases_the_lease_so_another_takes_over_at_once(cluster: Cluster) -> None:
    c = cluster
    a, b = c.replica("routegate-a"), c.replica("routegate-b")
    a.interval = 0.01
    task = asyncio.create_task(a.run())
    async with asyncio.timeout(10):
        await a.wait_ready()
    assert a.is_leader
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    lease = c.fake.get("leases", NS, f"{SECRET}-leader")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
    await b.step()
    assert b.is_leader
    for (resource, _, _), obj in c.fake.objects.items():
        if resource == "leases":  # what a real apiserver's MicroTime parser accepts
            for key in ("renewTime", "acquireTime"):
                if key in obj["spec"]:
                    assert MICRO_TIME.match(obj["spec"][key]), obj["spec"][key]


async def test_the_loop_survives_an_unreachable_apiserver(tmp_path: Path) -> None:
    api = client.ApiClient(configuration=client.Configuration(host="http://127.0.0.1:9"))  # nothing listens
    try:
        replica = SelfManaged(api, namespace=NS, secret_name=SECRET, webhook_name=WEBHOOK, service=SERVICE,
                              out_dir=tmp_path, identity="a", interval=0.01)
        task = asyncio.create_task(replica.run())
        await asyncio.sleep(0.2)
        assert not task.done(), task
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert not replica.ready.is_set()
    finally:
        await api.close()


async def test_serve_in_self_mode_puts_its_dns_names_on_the_leaf(cluster: Cluster) -> None:
    """`serve --cert-mode self --dns-name NAME`: the leaf the Secret carries (and the replica serves)
    names NAME beside the Service's own names, as it does in files mode."""
    import argparse

    from webhook.server import serving

    args = argparse.Namespace(tls_cert="", tls_key="", cert_dir=str(cluster.tmp / "certs"), cert_mode="self",
                              namespace=NS, service=SERVICE, webhook_name=WEBHOOK,
                              dns_name=["routegate.example.com"])
    tasks: list[Any] = []
    try:
        await serving._certificates(args, cluster.api, tasks)
        leaf = generation.load_certs((cluster.tmp / "certs" / "tls.crt").read_bytes())[0]
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
        assert "routegate.example.com" in names and f"{SERVICE}.{NS}.svc" in names
    finally:
        for task in tasks:
            if isinstance(task, asyncio.Future):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            elif asyncio.iscoroutine(task):
                task.close()
