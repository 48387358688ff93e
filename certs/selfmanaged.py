"""`--cert-mode self`: the replicas keep their own CA, leaf and caBundle, with no cert-manager.

Every replica, every `interval` seconds (one `step`):
  1. reports the leaf it serves (its own Lease, see certs/leases.py);
  2. tries to hold the leader Lease `<secret>-leader`; the leader alone reads the rotation state, applies one
     `rotations.plan_rotation` action, writes the Secret (resourceVersion-checked), then patches the
     `caBundle` of every webhook in our ValidatingWebhookConfiguration, fetched by name (nothing else);
  3. reads the Secret and, when it changed, writes ca.crt / tls.crt / tls.key into `out_dir` in one atomic
     symlink swap, where the CertReloader picks them up.

The Secret (type Opaque) holds: `tls.crt`, `tls.key` (the leaf), `ca.crt` (the caBundle: current CA
first, plus the previous CA during a rollover), `ca-signing.crt`, `ca-signing.key` (the current CA).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import socket
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from certs import bootstrap, files, generation, leaderelection, leases, rotations

log = structlog.get_logger()

TLS_CRT, TLS_KEY, CA_BUNDLE = "tls.crt", "tls.key", "ca.crt"
CA_CRT, CA_KEY = "ca-signing.crt", "ca-signing.key"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(value: object) -> bytes:
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except ValueError:
        return b""


def _pem(certs: list[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


class State:
    """The rotation state decoded from the Secret; anything unreadable counts as absent."""

    def __init__(self, data: dict[str, Any]) -> None:
        raw = {k: _unb64(v) for k, v in data.items()}
        self.ca = self._pair(raw.get(CA_CRT, b""), raw.get(CA_KEY, b""))
        self.leaf = self._pair(raw.get(TLS_CRT, b""), raw.get(TLS_KEY, b""))
        try:
            self.bundle = generation.load_certs(raw.get(CA_BUNDLE, b"")) if raw.get(CA_BUNDLE) else []
        except generation.CertError:
            self.bundle = []

    @staticmethod
    def _pair(cert: bytes, key: bytes) -> generation.Issued | None:
        if not cert or not key:
            return None
        try:
            return generation.load_issued(cert, key)
        except generation.CertError:
            return None

    def data(self) -> dict[str, str]:
        out: dict[str, str] = {CA_BUNDLE: _b64(_pem(self.bundle))}
        if self.ca:
            out[CA_CRT], out[CA_KEY] = _b64(self.ca.cert_pem()), _b64(self.ca.key_pem())
        if self.leaf:
            out[TLS_CRT], out[TLS_KEY] = _b64(self.leaf.cert_pem()), _b64(self.leaf.key_pem())
        return out


class SelfManaged:
    """One replica's part in self-managed certificates. `run()` forever, or `step()` once (tests)."""

    def __init__(self, api: client.ApiClient, *, namespace: str, secret_name: str, webhook_name: str,
                 service: str, out_dir: Path, identity: str, now: Callable[[], datetime] = _utcnow,
                 interval: float = 5.0, lease_duration: int = 15, extra_dns_names: tuple[str, ...] = (),
                 serving: Callable[[], str] | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.admission = client.AdmissionregistrationV1Api(api)
        self.api = api
        self.leases = leases.Leases(api, namespace, now=now)
        self.namespace, self.secret_name, self.webhook_name = namespace, secret_name, webhook_name
        self.dns_names = (*generation.service_dns_names(service, namespace), *extra_dns_names)
        self.out_dir, self.identity, self.now = Path(out_dir), identity, now
        self.interval, self.lease_duration = interval, lease_duration
        self.lease_name = f"{secret_name}-leader"
        self.elector = leaderelection.Elector(api, namespace, self.lease_name, identity, duration=lease_duration,
                                              retry=interval, now=now)
        self.serving = serving  # set to `lambda: reloader.fingerprint` once the reloader runs
        self.paths = bootstrap.paths_in(self.out_dir)
        self.ready = asyncio.Event()
        self.is_leader = False
        self.last_plan: rotations.Plan | None = None
        self._written = ""

    # -- the loop -------------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                try:
                    await self.step()
                except Exception as e:  # apiserver down, timeouts, a bad object: retry, never exit
                    log.warning("self_managed_step_failed", error=type(e).__name__,
                                status=getattr(e, "status", None), reason=str(getattr(e, "reason", e))[:200])
                await asyncio.sleep(self.interval)
        finally:
            if self.is_leader:
                with contextlib.suppress(Exception):
                    await self.elector.release()

    async def wait_ready(self) -> None:
        """Wait until the first pair has been written to `out_dir` (wrap in asyncio.timeout)."""
        await self.ready.wait()

    async def step(self) -> None:
        if self._written:
            await self.leases.report(self.secret_name, self.identity, self._serving(),
                                     duration=max(int(self.interval * 4), self.lease_duration))
        try:
            self.is_leader = await self.elector.try_acquire()
        except Exception:
            self.is_leader = False
            raise
        if self.is_leader:
            await self._reconcile()
        await self._sync_files()

    def _serving(self) -> str:
        if self.serving is not None:
            return self.serving()
        try:
            return generation.fingerprint(generation.load_certs(self.paths.cert.read_bytes())[0])
        except (OSError, generation.CertError):
            return ""

    # -- leader ---------------------------------------------------------------------------------------

    async def _read_secret(self) -> dict[str, Any] | None:
        try:
            secret = await self.core.read_namespaced_secret(self.secret_name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        data = self.api.sanitize_for_serialization(secret)
        return data if isinstance(data, dict) else None

    async def _read_webhook(self) -> dict[str, Any] | None:
        try:
            vwc = await self.admission.read_validating_webhook_configuration(self.webhook_name)
        except ApiException as e:
            if e.status == 404:
                log.warning("webhook_configuration_missing", name=self.webhook_name)
                return None
            raise
        data = self.api.sanitize_for_serialization(vwc)
        return data if isinstance(data, dict) else None

    @staticmethod
    def _webhook_bundles(vwc: dict[str, Any] | None) -> list[set[str]]:
        out = []
        for hook in (vwc or {}).get("webhooks") or []:
            pem = _unb64((hook.get("clientConfig") or {}).get("caBundle"))
            try:
                out.append({generation.fingerprint(c) for c in generation.load_certs(pem)} if pem else set())
            except generation.CertError:
                out.append(set())
        return out

    async def _reconcile(self) -> None:
        now = self.now()
        secret = await self._read_secret()
        state = State((secret or {}).get("data") or {})
        vwc = await self._read_webhook()
        bundles = self._webhook_bundles(vwc)
        ca_fp = generation.fingerprint(state.ca.cert) if state.ca else ""
        trusts = bool(bundles) and all(ca_fp in b for b in bundles)
        serving = await self.leases.serving(self.secret_name, forget_after=timedelta(hours=1))
        plan = rotations.plan_rotation(
            state.ca.cert if state.ca else None, state.leaf.cert if state.leaf else None, now,
            bundle=state.bundle, serving=serving, webhook_trusts_ca=trusts, dns_names=self.dns_names)
        self.last_plan = plan
        if plan.action is not rotations.Action.KEEP:
            self._apply(plan, state, now)
            log.info("certificate_rotation", action=str(plan.action), rule=plan.rule, reason=plan.reason,
                     leaf_not_after=state.leaf.cert.not_valid_after_utc.isoformat() if state.leaf else None,
                     bundle=len(state.bundle))
            if not await self._write_secret(secret, state):
                return
        await self._patch_webhook(vwc, state.bundle)

    def _apply(self, plan: rotations.Plan, state: State, now: datetime) -> None:
        action = plan.action
        if action is rotations.Action.CREATE:
            state.ca = generation.new_ca(now=now, common_name=f"routegate webhook CA {now:%Y%m%d%H%M%S}")
            state.bundle = [state.ca.cert]
            state.leaf = generation.new_leaf(state.ca, now=now, dns_names=self.dns_names)
        elif action is rotations.Action.REPAIR_BUNDLE and state.ca:
            state.bundle = [state.ca.cert, *state.bundle]
        elif action is rotations.Action.RENEW_LEAF and state.ca:
            state.leaf = generation.new_leaf(state.ca, now=now, dns_names=self.dns_names)
        elif action is rotations.Action.ROLL_CA and state.ca:
            old = state.ca.cert
            state.ca = generation.new_ca(now=now, common_name=f"routegate webhook CA {now:%Y%m%d%H%M%S}")
            state.bundle = [state.ca.cert, old]
        elif action is rotations.Action.TRIM_BUNDLE and state.ca:
            state.bundle = rotations.trimmed(state.ca.cert, state.bundle, now, rollover_done=plan.rule == 8)

    async def _write_secret(self, secret: dict[str, Any] | None, state: State) -> bool:
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": self.secret_name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/name": "routegate",
                                    "app.kubernetes.io/component": "webhook-certificates"}},
            "data": state.data(),
        }
        try:
            if secret is None:
                await self.core.create_namespaced_secret(self.namespace, leases.body(body))
            else:
                body["metadata"]["resourceVersion"] = (secret.get("metadata") or {}).get("resourceVersion")
                await self.core.replace_namespaced_secret(self.secret_name, self.namespace, leases.body(body))
        except ApiException as e:
            if e.status == 409:  # another leader (or a human) wrote first: plan again next step
                log.warning("certificate_secret_conflict", secret=self.secret_name)
                return False
            raise
        return True

    async def _patch_webhook(self, vwc: dict[str, Any] | None, bundle: list[x509.Certificate]) -> None:
        if vwc is None or not bundle:
            return
        want = _b64(_pem(bundle))
        ops: list[dict[str, Any]] = []
        for i, hook in enumerate(vwc.get("webhooks") or []):
            if (hook.get("clientConfig") or {}).get("caBundle") == want:
                continue
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want})
        if not ops:
            return
        await self.admission.patch_validating_webhook_configuration(self.webhook_name, ops)
        log.info("webhook_ca_bundle_patched", name=self.webhook_name, webhooks=len(ops) // 2,
                 cas=[generation.fingerprint(c)[:16] for c in bundle])

    # -- every replica --------------------------------------------------------------------------------

    async def _sync_files(self) -> None:
        secret = await self._read_secret()
        if secret is None:
            return
        state = State(secret.get("data") or {})
        if state.leaf is None or not state.bundle:
            return
        wanted = {
            CA_BUNDLE: (_pem(state.bundle), files.PUBLIC_MODE),
            TLS_CRT: (state.leaf.cert_pem(), files.PUBLIC_MODE),
            TLS_KEY: (state.leaf.key_pem(), files.KEY_MODE),
        }
        digest = hashlib.sha256(b"".join(content for content, _ in wanted.values())).hexdigest()
        if digest == self._written:
            return
        files.private_dir(self.out_dir)
        files.write_together(self.out_dir, wanted)
        self._written = digest
        self.ready.set()
        log.info("certificate_files_written", dir=str(self.out_dir),
                 fingerprint=generation.fingerprint(state.leaf.cert))


SERVICEACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def options_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """namespace, secret_name, webhook_name, service, identity as the manifests set them (env vars from
    the self-managed overlay; the pod name is the hostname when POD_NAME is absent)."""
    namespace = env.get("POD_NAMESPACE", "")
    if not namespace and SERVICEACCOUNT_NAMESPACE.is_file():
        namespace = SERVICEACCOUNT_NAMESPACE.read_text().strip()
    return {
        "namespace": namespace or "routegate-system",
        "secret_name": env.get("ROUTEGATE_CERT_SECRET", "routegate-webhook-tls"),
        "webhook_name": env.get("ROUTEGATE_WEBHOOK_NAME", "routegate"),
        "service": env.get("ROUTEGATE_SERVICE", "routegate"),
        "identity": env.get("POD_NAME") or socket.gethostname(),
    }


async def run_self_managed(api: client.ApiClient, *, namespace: str, secret_name: str, webhook_name: str,
                           service: str, out_dir: Path, identity: str,
                           now: Callable[[], datetime] = _utcnow,
                           serving: Callable[[], str] | None = None) -> None:
    """Run self-managed certificates forever (see SelfManaged for more knobs). `serving` returns the
    fingerprint of the leaf the server really serves (`lambda: reloader.fingerprint`); without it the
    replica reports the leaf it last wrote to `out_dir`."""
    await SelfManaged(api, namespace=namespace, secret_name=secret_name, webhook_name=webhook_name,
                      service=service, out_dir=out_dir, identity=identity, now=now, serving=serving).run()
