"""``routegate serve --dataplane-state DIR`` as the shipped deployment runs it (a real process, HTTPS): a
new route on a 3.4 data plane is "unknown: ..." until reconcile publishes what the data plane runs,
before and after the background full check alike (the note no longer depends on when it ran), and the
same review afterwards, not answered from the verdict cache, says "applies at runtime (N commands)"."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.check import binaries
from haproxy_check.runtime.runtimeplans import Loaded
from tests.attachments import gwbuilders as gb
from tests.conftest import free_port
from validators.objects import Obj
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.loadedindex import Published

pytestmark = pytest.mark.haproxy


def route(name: str, host: str, service: str) -> Obj:
    return gb.route("HTTPRoute", name, gb.parent("edge", namespace="infra"), hosts=[host],
                    rules=[{"backendRefs": [{"name": service, "port": 80}]}])


STATE = [gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra"),
         gb.service("web", "default", ("http", 80)), gb.service("api", "default", ("http", 80)),
         gb.endpoint_slice("web-a", "web", "default", [("http", 8080)], [("10.0.0.1", True)]),
         gb.endpoint_slice("api-a", "api", "default", [("http", 8080)], [("10.0.0.2", True)]),
         route("one", "a.example.com", "web")]


def review(base: str, context: ssl.SSLContext, uid: str) -> list[str]:
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
        "operation": "CREATE", "namespace": "default", "name": "two",
        "object": route("two", "b.example.com", "api")}}).encode()
    request = urllib.request.Request(base + "/validate", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        answer: dict[str, Any] = json.load(resp)["response"]
    assert answer["allowed"] is True and answer["uid"] == uid, answer
    return list(answer.get("warnings", []))


def test_the_webhook_follows_what_reconcile_publishes(tmp_path: Path, haproxy_path: str) -> None:
    state, published = tmp_path / "state", tmp_path / "reconcile-output"
    state.mkdir()
    published.mkdir()
    (state / "all.yaml").write_text(yaml.safe_dump_all(STATE))
    port, metrics_port = free_port(), free_port()
    cert_dir = tmp_path / "certs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}", "--haproxy", haproxy_path,
         "--metrics-listen", f"127.0.0.1:{metrics_port}", "--cert-dir", str(cert_dir), "--state", str(state),
         "--dataplane-version", "3.4", "--dataplane-state", str(published), "--full-check-debounce", "0.5",
         "--reload-note-budget", "60"],  # a cold render on a busy machine: the skip is not under test
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(tmp_path)})
    try:
        base = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "routegate serve did not answer /healthz"
            if (cert_dir / "ca.crt").exists():
                context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
                try:
                    urllib.request.urlopen(f"{base}/healthz", context=context, timeout=2)
                    break
                except OSError:
                    pass
            time.sleep(0.05)
        first = [w for w in review(base, context, "u1") if w.startswith(("unknown", "needs a reload", "applies"))]
        assert len(first) == 1 and first[0].startswith("unknown: applies at runtime ("), first
        time.sleep(3)  # the background full check runs (0.5 s debounce): the answer does not change
        assert [w for w in review(base, context, "u2") if w.startswith("unknown")] == first
        # reconcile publishes that the data plane runs this state
        gate = assembly.build_gate(asyncio.run(binaries.detect(haproxy_path)), assembly.GateSettings())
        render = gate.renderer.render(gate.scope.view(MemoryState(STATE)), subject=None)
        record = Published(Loaded.of(render.description), "..v000001-0123456789ab", "3.4")
        (published / "dataplane.json").write_text(json.dumps(record.as_dict()))
        deadline = time.monotonic() + 10
        while True:
            notes = [w for w in review(base, context, "u3") if w.startswith(("unknown", "needs", "applies"))]
            if notes != first or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert len(notes) == 1 and notes[0].startswith("applies at runtime ("), notes
        # the commands the unknown note said it would take if the profile was loaded
        assert first[0].startswith(f"unknown: {notes[0]} if the data plane has loaded profile "), (first, notes)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
