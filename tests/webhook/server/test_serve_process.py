"""``routegate serve`` as users start it: a real process, self-signed certs, HTTPS, clean shutdown."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects

pytestmark = pytest.mark.haproxy


@pytest.fixture
def served(tmp_path: Path, haproxy_path: str) -> Iterator[tuple[str, Path, str]]:
    port, metrics_port = free_port(), free_port()
    cert_dir = tmp_path / "certs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", f"127.0.0.1:{metrics_port}", "--cert-dir", str(cert_dir),
         "--state", str(STATE_DIR)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        context = None
        for _ in range(300):
            if proc.poll() is not None:
                pytest.fail(f"routegate serve exited: {proc.stderr.read() if proc.stderr else ''}")
            if (cert_dir / "ca.crt").exists():
                context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
                try:
                    urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2)
                    break
                except OSError:
                    pass
            time.sleep(0.05)
        else:
            pytest.fail("routegate serve did not answer /healthz")
        yield f"https://127.0.0.1:{port}", cert_dir, f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("routegate serve did not stop on SIGTERM")
    assert proc.returncode == 0
    assert proc.stderr is not None and "ca.crt" in proc.stderr.read()


def test_serve_with_no_cert_flags_generates_certs_and_judges_reviews(served: tuple[str, Path, str]) -> None:
    base, cert_dir, metrics_url = served
    assert (cert_dir / "tls.key").stat().st_mode & 0o777 == 0o600
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    route = next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == "broken")  # type: ignore[index]
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "proc-1", "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
        "operation": "CREATE", "namespace": "capture", "name": "broken", "object": route}}).encode()
    request = urllib.request.Request(base + "/validate", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        answer = json.load(resp)
    assert answer["response"]["uid"] == "proc-1" and answer["response"]["allowed"] is False
    assert "spec.rules[1].matches[0].path.value" in answer["response"]["status"]["message"]
    with urllib.request.urlopen(base + "/readyz", context=context, timeout=5) as resp:
        ready = json.load(resp)
    assert ready["ready"] is True and ready["haproxy"]["version"]
    with urllib.request.urlopen(metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    assert 'routegate_reviews_total{kind="HTTPRoute",operation="CREATE",verdict="deny"} 1.0' in text
    assert "routegate_webhook_certificate_expiry_timestamp_seconds" in text
