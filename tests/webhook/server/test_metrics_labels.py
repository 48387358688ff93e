"""Metric labels anyone who can scrape may read carry no binary paths (issue 16, item 9)."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest

from haproxy_check.results import HAProxyBinary
from webhook import metrics


def test_the_haproxy_info_metric_has_the_version_and_not_the_path() -> None:
    metrics.haproxy_info(HAProxyBinary(path="/opt/secret-layout/bin/haproxy", version="2.8.25"))
    text = generate_latest(REGISTRY).decode()
    assert 'routegate_haproxy_info{version="2.8.25"} 1.0' in text
    assert "/opt/secret-layout" not in text
    assert all("path" not in line.split("{", 1)[1] for line in text.splitlines()
               if line.startswith("routegate_haproxy_info{"))
