"""Graceful shutdown of a real ``routegate serve`` process on SIGTERM and SIGUSR1 (the haproxy image's
STOPSIGNAL): the listener closes, a review in flight is still answered, the exit code is 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects

pytestmark = pytest.mark.haproxy


def slow_haproxy(tmp_path: Path, real: str, delay: float) -> str:
    """A haproxy whose ``-c`` takes ``delay`` seconds longer: a review is in flight for that long."""
    script = tmp_path / "slow-haproxy"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -c ] && /bin/sleep {delay}; done\nexec {real} "$@"\n')
    script.chmod(0o755)
    return str(script)


def start(tmp_path: Path, haproxy: str) -> tuple[subprocess.Popen[str], int, ssl.SSLContext]:
    port = free_port()
    cert_dir = tmp_path / "certs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", f"127.0.0.1:{free_port()}", "--cert-dir", str(cert_dir),
         "--state", str(STATE_DIR), "--haproxy", haproxy],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(tmp_path)},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"routegate serve exited: {proc.stderr.read() if proc.stderr else ''}")
        if (cert_dir / "ca.crt").exists():
            context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2)
                return proc, port, context
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    pytest.fail("routegate serve did not answer /healthz")


def review_body() -> bytes:
    route = next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == "shop")  # type: ignore[index]
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "drain-1", "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
        "operation": "CREATE", "namespace": "capture", "name": "shop", "object": route}}).encode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_a_stop_signal_drains_the_review_in_flight_and_exits_0(
        tmp_path: Path, haproxy_path: str, sig: signal.Signals) -> None:
    proc, port, context = start(tmp_path, slow_haproxy(tmp_path, haproxy_path, 1.5))
    answer: dict[str, Any] = {}

    def post() -> None:
        request = urllib.request.Request(f"https://127.0.0.1:{port}/validate", data=review_body(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as resp:
                answer.update(status=resp.status, body=json.load(resp))
        except OSError as exc:
            answer.update(error=repr(exc))

    try:
        client = threading.Thread(target=post)
        client.start()
        time.sleep(0.6)  # the review is waiting on the slow haproxy -c
        proc.send_signal(sig)
        time.sleep(0.3)
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # the listener closed at once: no new connection is accepted while draining
        client.join(timeout=30)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert answer.get("status") == 200, answer
    assert answer["body"]["response"]["uid"] == "drain-1" and answer["body"]["response"]["allowed"] is True
    logged = (proc.stderr.read() if proc.stderr else "") + (proc.stdout.read() if proc.stdout else "")
    assert f'"signal": "{sig.name}"' in logged and '"event": "stopped"' in logged
