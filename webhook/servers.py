"""The aiohttp side: ``POST /validate``, ``/healthz``, ``/readyz`` and the metrics app.

All HTTP concerns live here and only here: body size limits, status codes, JSON errors. The Gate is
called with a parsed Change and a State snapshot; every exception is mapped in one place so that no
input can produce a 500 or a hang.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from validators.objects import REVIEWED_KINDS
from webhook import admission, metrics, reviews
from webhook.gates import Gate
from webhook.sources import StateSource
from webhook.verdictcache import VerdictCache
from webhook.verdicts import Decision, Verdict

MAX_BODY = 16 * 1024**2  # an UPDATE carries two objects; aiohttp's 1 MiB default is too small
log = structlog.get_logger("routegate")


class CertStatus(Protocol):
    @property
    def loaded(self) -> bool: ...

    @property
    def not_after(self) -> datetime | None: ...


GATE = web.AppKey("gate", Gate)
SOURCE = web.AppKey("source", StateSource)
CERTS = web.AppKey("certs", CertStatus)
REVIEW_TIMEOUT = web.AppKey("review_timeout", float)
ADMISSION = web.AppKey("admission", admission.Admission)
VERDICTS = web.AppKey("verdicts", VerdictCache)
SCHEMA_GENERATION = web.AppKey("schema_generation", list[Any])  # [the schema set last seen, its number]


def make_app(gate: Gate, source: StateSource, *, certs: CertStatus | None = None,
             review_timeout: float = 9.0, queue: admission.Admission | None = None) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[GATE] = gate
    app[SOURCE] = source
    app[REVIEW_TIMEOUT] = review_timeout
    app[ADMISSION] = queue if queue is not None else admission.Admission()
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
    """The reviews' CPU-bound steps (``asyncio.to_thread``) on a few threads, never one per review."""
    executor = admission.bounded_executor()
    asyncio.get_running_loop().set_default_executor(executor)
    yield
    executor.shutdown(wait=False, cancel_futures=True)


def make_metrics_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    return app


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def validate(request: web.Request) -> web.Response:
    started = time.perf_counter()
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        metrics.BAD_REVIEWS.labels("too_large").inc()
        return _error(413, f"request body is larger than {MAX_BODY} bytes")
    try:
        review = reviews.parse(body)
    except reviews.BadReview as exc:
        metrics.BAD_REVIEWS.labels("malformed").inc()
        return _error(400, str(exc))
    budget = admission.review_budget(request.app[REVIEW_TIMEOUT], request.query.get("timeout"))
    verdict = await _judge(request.app, review, started + budget - time.perf_counter())
    elapsed = time.perf_counter() - started
    metrics.REVIEW_SECONDS.observe(elapsed)
    metrics.observe(review.kind, str(review.change.operation), str(verdict.decision), dict(verdict.timings))
    log.info(
        "review", uid=review.uid, kind=review.kind, namespace=review.namespace, name=review.name,
        operation=str(review.change.operation), dryRun=review.dry_run, verdict=str(verdict.decision),
        duration=round(elapsed, 4), message=verdict.message or None,
        haproxy=verdict.haproxy.version if verdict.haproxy else None,
    )
    return web.json_response(reviews.respond(review.uid, verdict))


async def _judge(app: web.Application, review: reviews.Review, budget: float) -> Verdict:
    source = app[SOURCE]
    change, ref = review.change, review.change.ref
    if not source.ready:
        return Verdict(Decision.ERROR, ref, error="still syncing cluster state; retry")
    state = source.snapshot()
    deadline = time.monotonic() + budget

    async def judge() -> Verdict:
        if ref.kind not in REVIEWED_KINDS:  # answered at once without work: no need to queue
            return await app[GATE].review(change, state=state)
        return await app[ADMISSION].run(lambda: app[GATE].review(change, state=state), deadline=deadline)

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
    return verdict


def _judged_against(app: web.Application, state_version: str) -> str:
    """What a verdict depends on besides the change: the state, and the CRD schemas in use (followed
    live from the cluster, replaced as a whole when a CRD changes: each new set is a new generation)."""
    schemas = getattr(app[GATE].rules, "schemas", None)
    seen = app[SCHEMA_GENERATION]
    if seen[0] is not schemas:
        seen[:] = [schemas, seen[1] + 1]
    return f"{state_version}|schemas:{seen[1]}"


async def healthz(request: web.Request) -> web.Response:
    """Liveness only: the process answers. Readiness is /readyz."""
    return web.json_response({"status": "ok"})


def readiness(app: web.Application) -> tuple[bool, dict[str, Any]]:
    gate = app[GATE]
    source = app[SOURCE]
    certs = app.get(CERTS)
    cert_info: dict[str, Any] = {"loaded": True, "source": "external"}
    if certs is not None:
        not_after = certs.not_after
        valid = certs.loaded and (not_after is None or not_after > datetime.now(UTC))
        cert_info = {"loaded": valid, "notAfter": not_after.isoformat() if not_after else None}
    ready = source.ready and bool(cert_info["loaded"])
    body = {
        "ready": ready,
        "haproxy": {"path": gate.binary.path, "version": gate.binary.version},
        "certificates": cert_info,
        "state": {"ready": source.ready, **source.status()},
    }
    return ready, body


async def readyz(request: web.Request) -> web.Response:
    ready, body = readiness(request.app)
    return web.json_response(body, status=200 if ready else 503)


async def serve_metrics(request: web.Request) -> web.Response:
    payload = generate_latest(REGISTRY)
    return web.Response(body=payload, headers={"Content-Type": CONTENT_TYPE_LATEST})
