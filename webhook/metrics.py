"""Prometheus metrics (the process-wide default registry, so certs/ gauges show too), served on a
separate plain-HTTP port.

Label values are bounded: kinds outside the reviewed set are counted as "other", so a stream of
unknown kinds cannot grow the series without limit. Labels carry no paths or object values: the metrics
port is readable by the monitoring stack (manifests/base/networkpolicy.yaml), not only by operators.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from haproxy_check.results import HAProxyBinary
from validators.cel import celchecks
from validators.objects import REVIEWED_KINDS

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REVIEWS = Counter(
    "routegate_reviews_total", "AdmissionReviews answered, by kind, operation and verdict.",
    ("kind", "operation", "verdict"), registry=REGISTRY,
)
BAD_REVIEWS = Counter(
    "routegate_bad_reviews_total", "Requests rejected with HTTP 4xx before judging.", ("reason",),
    registry=REGISTRY,
)
REVIEW_SECONDS = Histogram(
    "routegate_review_duration_seconds", "Time to judge one AdmissionReview.", buckets=_BUCKETS,
    registry=REGISTRY,
)
RENDER_SECONDS = Histogram(
    "routegate_render_duration_seconds", "Time to render the HAProxy configuration.", buckets=_BUCKETS,
    registry=REGISTRY,
)
CHECK_SECONDS = Histogram(
    "routegate_haproxy_check_duration_seconds", "Time spent in haproxy -c.", buckets=_BUCKETS,
    registry=REGISTRY,
)
REVIEWS_REFUSED = Counter(
    "routegate_reviews_refused_total", "Reviews answered 'could not decide' without being started, by reason "
    "(late: they could not finish before their deadline; full: the queue was full).", ("reason",),
    registry=REGISTRY,
)
REVIEWS_WAITING = Gauge(
    "routegate_reviews_waiting", "Reviews queued for their turn in the gate.", registry=REGISTRY,
)
VERDICT_CACHE_HITS = Counter(
    "routegate_verdict_cache_hits_total", "Reviews answered with the verdict of an identical earlier request.",
    registry=REGISTRY,
)
HAPROXY_INFO = Gauge(
    "routegate_haproxy_info", "The haproxy version the gate uses (value 1).", ("version",),
    registry=REGISTRY,
)


def haproxy_info(binary: HAProxyBinary) -> None:
    """Only the version: the binary's path says how the host is laid out, which scrapers need not know
    (it is logged at start for the operator)."""
    HAPROXY_INFO.labels(binary.version).set(1)


def kind_label(kind: str) -> str:
    return kind if kind in REVIEWED_KINDS else "other"


def observe(kind: str, operation: str, verdict: str, timings: dict[str, float]) -> None:
    operation = operation if operation in ("CREATE", "UPDATE", "DELETE", "CONNECT") else "other"
    REVIEWS.labels(kind_label(kind), operation, verdict).inc()
    if "render" in timings:
        RENDER_SECONDS.observe(timings["render"])
    if "check" in timings:
        CHECK_SECONDS.observe(timings["check"])


class CelCollector(Collector):
    """Exposes the CEL evaluator's plain counters (validators stay free of prometheus) at scrape time."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "routegate_cel_events", "CEL rule compile/evaluation problems and budget stops, by event.",
            labels=("event",),
        )
        for event, count in sorted(celchecks.COUNTERS.items()):
            family.add_metric([event], count)
        yield family
        engine = GaugeMetricFamily("routegate_cel_engine_info", "The CEL engine in use (value 1).",
                                   labels=("engine",))
        engine.add_metric([celchecks.engine_name()], 1)
        yield engine


REGISTRY.register(CelCollector())
FULL_CHECKS = Counter(
    "routegate_full_checks_total", "Background full checks of the whole state, by result (ok, failed, undecided).",
    ("result",), registry=REGISTRY,
)
FULL_CHECK_SECONDS = Histogram(
    "routegate_full_check_duration_seconds", "Time of one background full check (render + haproxy -c).",
    buckets=(*_BUCKETS, 30.0, 60.0), registry=REGISTRY,
)
FULL_CHECK_FAILING = Gauge(
    "routegate_full_check_failing", "1 when the last background full check of the whole state failed haproxy -c.",
    registry=REGISTRY,
)
DELTA_DISAGREEMENTS = Counter(
    "routegate_delta_disagreements_total",
    "Objects the background full check blames for a failure after their delta review passed haproxy -c.",
    ("kind",), registry=REGISTRY,
)
RECONCILE_FULL_CHECKS = Counter(
    "routegate_reconcile_full_checks_total",
    "Background full haproxy -c runs of a promoted version its delta check judged, by result "
    "(agreed, disagreed, undecided).",
    ("result",), registry=REGISTRY,
)
RECONCILE_CHECKS = Counter(
    "routegate_reconcile_checks_total",
    "Hot-path haproxy -c of a reconcile run, by what it checked: delta (the changed objects' closure of a "
    "patched render; the whole configuration follows in the background), full, or reused (the very render "
    "that passed last time: no object it reads changed).",
    ("how",), registry=REGISTRY,
)
RECONCILE_FULL_CHECK_DISAGREEMENTS = Counter(
    "routegate_reconcile_full_check_disagreements_total",
    "Promoted versions reconcile's delta check passed and the background full haproxy -c refused (a bug).",
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "routegate_reconcile_step_duration_seconds", "Time of one reconcile step: scope, audit, leaveouts, refused, "
    "render, check, restore, isolate, findings, shrink, serialize, promote, dataplane (plan, runtime, reload, "
    "publish), record, statuses, warm (the next patch's closure index, off the propagation path), report, "
    "outcome; total is the whole run and unattributed what no step covers.",
    ("step",), buckets=(*_BUCKETS, 30.0, 60.0), registry=REGISTRY,
)
RECONCILE_RENDERS = Counter(
    "routegate_reconcile_renders_total", "Reconcile renders by how they were made: patched (the previous "
    "render with the changed objects' closure spliced in), unchanged, or full:<why> (first, templates, previous, "
    "kind, age, many, refused, splice; haproxy_check.render.patching), and full:check (a patched render whose "
    "haproxy -c failed, rendered again in full for the source map isolation reads).",
    ("how",), registry=REGISTRY,
)
RECONCILES = Counter(
    "routegate_reconciles_total", "Reconcile runs by outcome (promoted, unchanged, rejected, held, undecided).",
    ("outcome",), registry=REGISTRY,
)
PROMOTIONS_REJECTED = Counter(
    "routegate_promotions_rejected_total", "Renders not promoted (haproxy -c failed or the render was refused); "
    "the last-known-good version stays live.", registry=REGISTRY,
)
ISOLATED = Gauge(
    "routegate_isolated_objects", "Objects whose stored version broke haproxy -c and that the last reconcile "
    "held back at their last promoted version (held-back) or left out (left-out), so the rest was promoted.",
    ("treatment",), registry=REGISTRY,
)
SHRINK_HELD = Gauge(
    "routegate_reconcile_shrink_held", "1 while the shrink guard holds a candidate that drops more routes or "
    "backends than the source can vouch for (last-known-good stays live; --allow-mass-delete overrides).",
    registry=REGISTRY,
)
SHRINK_HOLDS = Counter(
    "routegate_reconcile_shrink_holds_total", "Reconcile runs whose candidate the shrink guard held.",
    registry=REGISTRY,
)
LAST_PROMOTION = Gauge(
    "routegate_last_promotion_timestamp_seconds", "Unix time of the last promotion into --output-dir.",
    registry=REGISTRY,
)
OBJECTS_AT_FAULT = Gauge(
    "routegate_objects_at_fault", "Stored objects with admission denials or left out of the output in part, "
    "by kind, in the last reconcile.", ("kind",), registry=REGISTRY,
)
VIOLATIONS = Gauge(
    "routegate_violations", "Findings on stored objects by rule code and severity, in the last audit.",
    ("code", "severity"), registry=REGISTRY,
)
PROPAGATION_SECONDS = Histogram(
    "routegate_reconcile_propagation_seconds", "From the first change the reconciler saw (watch event or file "
    "change) to the data plane updated: runtime commands answered, reload signalled (reload), or promoted (no "
    "--runtime-socket: promotion is the load); none when the data plane already ran it.",
    ("how",), buckets=(0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
RELOADS_DEFERRED = Counter(
    "routegate_reloads_deferred_total", "Reloads put off because the previous one was less than "
    "--min-reload-interval ago (coalesced into one reload at the end of the interval).", registry=REGISTRY,
)
DATAPLANE_UPDATES = Counter(
    "routegate_dataplane_updates_total", "How promotions reached the data plane (--runtime-socket): none (it runs "
    "that already), runtime (Runtime API commands), reload (signalled), reload_failed (could not be signalled).",
    ("how",), registry=REGISTRY,
)
RUNTIME_COMMANDS = Counter(
    "routegate_runtime_commands_total", "Runtime API commands sent after promotions, by answer (ok, failed).",
    ("result",), registry=REGISTRY,
)
EVENTS = Counter(
    "routegate_events_total", "Kubernetes Warning Events by outcome (written, deduplicated, rate_limited, failed).",
    ("outcome",), registry=REGISTRY,
)
STATUS_WRITES = Counter(
    "routegate_status_writes_total", "Gateway API status writes by outcome (written; unchanged: what is stored is "
    "already right; conflict: 409, read again and retried; failed: 403, 5xx or unreachable, retried later; stale: "
    "the object changed since it was judged; gone: deleted).", ("outcome",), registry=REGISTRY,
)
STATUS_PENDING = Gauge(
    "routegate_status_pending", "Objects whose status is waiting to be written (or retried).", registry=REGISTRY,
)
