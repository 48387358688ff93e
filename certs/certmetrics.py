"""Prometheus metrics owned by the certificate code (registered in the default registry)."""

from prometheus_client import Gauge

CERT_NOT_AFTER = Gauge(
    "routegate_webhook_certificate_expiry_timestamp_seconds",
    "notAfter of the serving certificate currently loaded, in unix seconds (alert when it gets close).",
)
