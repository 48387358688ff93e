"""The aiohttp side: ``POST /validate``, ``/healthz``, ``/readyz`` and the metrics app.

All HTTP concerns live here and only here: body size limits, status codes, JSON errors. The Gate is
called with a parsed Change and a State snapshot; every exception is mapped in one place so that no
input can produce a 500 or a hang.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from validators.changes import Operation
from validators.objects import REVIEWED_KINDS, Obj
from webhook import metrics
from webhook.gate.gates import Gate
from webhook.gate.verdictcache import VerdictCache
from webhook.gate.verdicts import Decision, Verdict
from webhook.server import admission, connections, encodings, reviews
from webhook.server.selftests import Health, SelfTest
from webhook.sources import StateSource

MAX_BODY = 16 * 1024**2  # an UPDATE carries two objects; aiohttp's 1 MiB default is too small
SERVER_OPTIONS = encodings.SERVER_OPTIONS  # runner options the webhook app needs (bodies decoded here)
log = structlog.get_logger("routegate")


class CertStatus(Protocol):
    @property
    def loaded(self) -> bool: ...

    @property
    def not_after(self) -> datetime | None: ...


class ExplainingSource(Protocol):
    """A state source that can say why it is not ready and what it could not read (ClusterState)."""

    def why_not_ready(self) -> str: ...

    def reference_problems(self, obj: Obj) -> list[str]: ...


class ReadingSource(Protocol):
    """A state source that reads, on demand, the objects a review references but nothing stored did."""

    async def read_references(self, obj: Obj, *, deadline: float) -> None: ...


# Which sources are of the two shapes above, looked up on every review: what isinstance against a
# runtime_checkable Protocol answers (each member present and not None), without its cost (it walks
# the Protocol's members through the ABC machinery on every call, a measurable part of a review).
def _explaining(source: object) -> ExplainingSource | None:
    if getattr(source, "why_not_ready", None) is None or getattr(source, "reference_problems", None) is None:
        return None
    return cast(ExplainingSource, source)


def _reading(source: object) -> ReadingSource | None:
    return None if getattr(source, "read_references", None) is None else cast(ReadingSource, source)


GATE = web.AppKey("gate", Gate)
SOURCE = web.AppKey("source", StateSource)
CERTS = web.AppKey("certs", CertStatus)
REVIEW_TIMEOUT = web.AppKey("review_timeout", float)
ADMISSION = web.AppKey("admission", admission.Batcher)
VERDICTS = web.AppKey("verdicts", VerdictCache)
SCHEMA_GENERATION = web.AppKey("schema_generation", list[Any])  # [the schema set last seen, its number]
SELFTEST = web.AppKey("selftest", SelfTest)
BODY_TIMEOUT = web.AppKey("body_timeout", float)
# Why nothing can be judged as configured (a policy of --config that does not compile): every review is
# "could not decide" (503, so failurePolicy applies) and /readyz says why, until a fixed config is rolled out.
UNUSABLE = web.AppKey("unusable", str)


def make_app(gate: Gate, source: StateSource, *, certs: CertStatus | None = None,
             review_timeout: float = 9.0, queue: admission.Batcher | None = None,
             selftest: SelfTest | None = None, body_timeout: float = 10.0, unusable: str = "") -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[UNUSABLE] = unusable
    app[BODY_TIMEOUT] = body_timeout
    app[GATE] = gate
    app[SELFTEST] = selftest or default_selftest(gate)
    app[SOURCE] = source
    app[REVIEW_TIMEOUT] = review_timeout
    # Reviews arriving while the gate is busy wait there and are judged together (Gate.review_together).
    app[ADMISSION] = queue if queue is not None else admission.Batcher(gate)
    app[VERDICTS] = VerdictCache()
    app[SCHEMA_GENERATION] = [getattr(gate.rules, "schemas", None), 0]
    metrics.REVIEWS_WAITING.set_function(lambda: app[ADMISSION].waiting)
    app.cleanup_ctx.append(_bounded_executor)
    if certs is not None:
        app[CERTS] = certs
    app.router.add_post("/validate", validate)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def _bounded_executor(app: web.Application) -> AsyncIterator[None]:
    """The reviews' CPU-bound steps (``asyncio.to_thread``) on a few threads, never one per review.

    While such a thread renders, the event loop waits for the GIL after every poll; Python hands it
    over only every switch interval (5 ms by default), so under a burst each loop turn costs up to
    that and ``/healthz`` queues behind hundreds of them. A shorter interval keeps the loop's turns
    short for a small cost to the rendering thread."""
    executor = admission.bounded_executor()
    asyncio.get_running_loop().set_default_executor(executor)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, admission.SWITCH_INTERVAL))
    yield
    sys.setswitchinterval(interval)
    executor.shutdown(wait=False, cancel_futures=True)
    # The background tasks stop after the server (serving.serve drains first): what they still run in a
    # thread on the way out (a leader giving its Lease back resolves the apiserver's address) needs an
    # executor that takes work; asyncio.run shuts this one down at the end.
    asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))


def make_metrics_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    return app


def add_probes(target: web.Application, webhook: web.Application) -> None:
    """Serve ``/healthz`` and ``/readyz`` of ``webhook`` on ``target`` too (the plain-HTTP metrics
    listener): kubelet probes present no client certificate, which ``--client-ca`` requires."""
    target[GATE], target[SOURCE], target[SELFTEST] = webhook[GATE], webhook[SOURCE], webhook[SELFTEST]
    target[UNUSABLE] = webhook.get(UNUSABLE, "")
    if CERTS in webhook:
        target[CERTS] = webhook[CERTS]
    target.router.add_get("/healthz", healthz)
    target.router.add_get("/readyz", readyz)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def validate(request: web.Request) -> web.Response:
    # The review's budget counts from when the request began, its connection's TLS handshake included
    # (webhook.server.connections): under a burst the handshakes queue, and the apiserver's timeout runs meanwhile.
    started = request.get(connections.RECEIVED, time.perf_counter())
    body_or_error = await _read_body(request)
    if isinstance(body_or_error, web.Response):
        return body_or_error
    try:
        review = reviews.parse(body_or_error)
    except reviews.BadReview as exc:
        metrics.BAD_REVIEWS.labels("malformed").inc()
        return _error(400, str(exc))
    except Exception as exc:  # a parser bug is still the request's problem to report, never a 500
        log.exception("cannot parse review", error=type(exc).__name__)
        metrics.BAD_REVIEWS.labels("malformed").inc()
        return _error(400, f"request is not a usable AdmissionReview ({type(exc).__name__})")
    budget = admission.review_budget(request.app[REVIEW_TIMEOUT], request.query.get("timeout"))
    verdict = await _judge(request.app, review, started + budget - time.perf_counter(),
                           late=connections.WAITED in request)
    elapsed = time.perf_counter() - started
    metrics.REVIEW_SECONDS.observe(elapsed)
    metrics.observe(review.kind, str(review.change.operation), str(verdict.decision), dict(verdict.timings))
    log.info(
        "review", uid=review.uid, kind=review.kind, namespace=review.namespace, name=review.name,
        operation=str(review.change.operation), dryRun=review.dry_run, verdict=str(verdict.decision),
        duration=round(elapsed, 4), message=verdict.message or None,
        haproxy=verdict.haproxy.version if verdict.haproxy else None,
    )
    if verdict.decision is Decision.ERROR:
        return connections.unavailable(verdict.message)  # a call failure: failurePolicy applies
    return web.json_response(reviews.respond(review.uid, verdict))


async def _read_body(request: web.Request) -> bytes | web.Response:
    """The decoded body, or the 413/415/400/408 answer when it is too large, its Content-Encoding is
    unsupported or broken, or it does not arrive within the body timeout (a slow client holds nothing
    for long)."""
    bound = request.app[BODY_TIMEOUT]
    try:
        async with asyncio.timeout(bound):
            raw = await request.read()
    except TimeoutError:
        metrics.BAD_REVIEWS.labels("slow_body").inc()
        late = _error(408, f"request body not received within {bound:g}s")
        late.force_close()
        return late
    except web.HTTPRequestEntityTooLarge:
        metrics.BAD_REVIEWS.labels("too_large").inc()
        return _error(413, f"request body is larger than {MAX_BODY} bytes")
    except RequestPayloadError as exc:  # a truncated chunked body, or (auto_decompress on) bad gzip
        metrics.BAD_REVIEWS.labels("malformed").inc()
        cause = exc.__cause__ or exc
        detail = " ".join(str(cause).split()) or type(cause).__name__
        encoding = request.headers.get("Content-Encoding", "identity")
        return _error(400, f"request body cannot be read (Content-Encoding {encoding}): {detail}")
    encoding = request.headers.get("Content-Encoding", "")
    if not encoding:
        return raw
    try:
        if len(raw) < 64 * 1024:
            return encodings.decode(raw, encoding, limit=MAX_BODY)
        return await asyncio.to_thread(encodings.decode, raw, encoding, limit=MAX_BODY)
    except encodings.BodyError as exc:
        metrics.BAD_REVIEWS.labels("too_large" if exc.status == 413 else "malformed").inc()
        return _error(exc.status, str(exc))


async def _judge(app: web.Application, review: reviews.Review, budget: float, *, late: bool = False) -> Verdict:
    source = app[SOURCE]
    change, ref = review.change, review.change.ref
    if app[UNUSABLE]:
        return Verdict(Decision.ERROR, ref, error=app[UNUSABLE])
    if not source.ready:
        return Verdict(Decision.ERROR, ref, error=_not_ready_reason(source))
    started = time.monotonic()
    deadline = started + budget
    subject = change.subject
    reading = _reading(source)
    if reading is not None and change.operation is not Operation.DELETE and isinstance(subject, dict):
        # At most half the budget: what is still unread then is named by _with_reference_problems.
        await reading.read_references(subject, deadline=started + budget / 2)
        budget = max(deadline - time.monotonic(), 0.0)
    state = source.snapshot()

    async def judge() -> Verdict:
        if ref.kind not in REVIEWED_KINDS:  # answered at once without work: no need to queue
            return await app[GATE].review(change, state=state)
        return await app[ADMISSION].review(change, state, deadline=deadline, late=late)

    try:
        async with asyncio.timeout(budget):
            verdict, reused = await app[VERDICTS].verdict(change, _judged_against(app, state.version), judge)
    except admission.Refused as exc:
        metrics.REVIEWS_REFUSED.labels(exc.reason).inc()
        return Verdict(Decision.ERROR, ref, error=str(exc))
    except TimeoutError:
        return Verdict(Decision.ERROR, ref, error=f"the review took longer than {budget:.3g}s")
    except Exception as exc:  # one place maps every unexpected failure; never a 500
        log.exception("review failed", uid=review.uid, kind=review.kind, error=type(exc).__name__)
        return Verdict(Decision.ERROR, ref, error=f"internal error ({type(exc).__name__}); see the server log")
    if reused:
        metrics.VERDICT_CACHE_HITS.inc()
    return _with_reference_problems(source, review, verdict)


def _judged_against(app: web.Application, state_version: str) -> str:
    """What a verdict depends on besides the change: the state, the CRD schemas in use (followed live
    from the cluster, replaced as a whole when a CRD changes: each new set is a new generation), and the
    loaded state its prediction planned against (``webhook.gate.loadedindex``)."""
    schemas = getattr(app[GATE].rules, "schemas", None)
    seen = app[SCHEMA_GENERATION]
    if seen[0] is not schemas:
        seen[:] = [schemas, seen[1] + 1]
    # and what the data plane has loaded, as reconcile published it: a prediction turns on it
    return f"{state_version}|schemas:{seen[1]}|loaded:{app[GATE].loaded.key()}"


def _not_ready_reason(source: StateSource) -> str:
    explaining = _explaining(source)
    reason = explaining.why_not_ready() if explaining is not None else ""
    return reason or "still syncing cluster state; retry"


def _with_reference_problems(source: StateSource, review: reviews.Review, verdict: Verdict) -> Verdict:
    """Warn about referenced Secrets/ConfigMaps the webhook cannot read (e.g. RBAC resourceNames that
    do not grant them): a problem of this object, never a reason to refuse every review."""
    subject = review.change.subject
    explaining = _explaining(source)
    if explaining is None or not isinstance(subject, dict):
        return verdict
    problems = explaining.reference_problems(subject)
    return replace(verdict, notes=(*problems, *verdict.notes)) if problems else verdict


async def healthz(request: web.Request) -> web.Response:
    """Liveness only: the process answers. Readiness is /readyz."""
    return web.json_response({"status": "ok"})


def default_selftest(gate: Gate) -> SelfTest:
    """Readiness checks through the Gate's own checker and scratch base (see webhook.server.selftests)."""
    return SelfTest(gate.checker, scratch_base=getattr(gate.checker, "scratch_base", None))


def readiness(app: web.Application, health: Health | None = None) -> tuple[bool, dict[str, Any]]:
    gate = app[GATE]
    source = app[SOURCE]
    certs = app.get(CERTS)
    cert_info: dict[str, Any] = {"loaded": True, "source": "external"}
    if certs is not None:
        not_after = certs.not_after
        valid = certs.loaded and (not_after is None or not_after > datetime.now(UTC))
        cert_info = {"loaded": valid, "notAfter": not_after.isoformat() if not_after else None}
    checked = health is None or health.ready
    unusable = app.get(UNUSABLE, "")
    ready = source.ready and bool(cert_info["loaded"]) and checked and not unusable
    body = {
        "ready": ready,
        "reasons": [*([unusable] if unusable else []), *_reasons(source, cert_info, health)],
        "haproxy": {"path": gate.binary.path, "version": gate.binary.version},
        "dataplane": gate.dataplane_info(),
        "selftest": health.as_dict() if health is not None else None,
        "certificates": cert_info,
        "state": {"ready": source.ready, **source.status()},
    }
    return ready, body


def _reasons(source: StateSource, cert_info: dict[str, Any], health: Health | None) -> list[str]:
    """Why not ready, one line per cause ([] when ready)."""
    out = []
    if health is not None and not health.ready:
        out.append(health.reason)
    if not source.ready:
        out.append(_not_ready_reason(source))
    if not cert_info["loaded"]:
        out.append("no valid serving certificate is loaded (missing or expired)")
    return out


async def readyz(request: web.Request) -> web.Response:
    health = await request.app[SELFTEST].health()
    ready, body = readiness(request.app, health)
    return web.json_response(body, status=200 if ready else 503)


async def serve_metrics(request: web.Request) -> web.Response:
    payload = generate_latest(REGISTRY)
    return web.Response(body=payload, headers={"Content-Type": CONTENT_TYPE_LATEST})
