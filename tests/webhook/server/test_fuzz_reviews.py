"""A bounded version of ``bench/bench_fuzz.py``: random and mutated AdmissionReview bodies over HTTPS
against a real ``routegate serve``; every answer keeps the contract (200 with the uid, or a 4xx with a
JSON error), never a 5xx or a hang."""

from __future__ import annotations

import http.client
import os
import random
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import free_port
from tests.webhook import fuzzbodies
from tests.webhook.conftest import STATE_DIR

pytestmark = pytest.mark.haproxy
HANG = 30.0  # seconds without an answer that count as a hang


class Webhook:
    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.port, self.context = port, context
        self._conn: http.client.HTTPSConnection | None = None

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        for attempt in range(2):  # the server may close a kept-alive connection (e.g. after a 408/400)
            if self._conn is None:
                self._conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=HANG)
            try:
                self._conn.request("POST", "/validate", body=body, headers=headers)
                resp = self._conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self._conn.close()
                    self._conn = None
                return resp.status, data
            except (ConnectionError, http.client.HTTPException, ssl.SSLError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory, haproxy_path: str) -> Iterator[Webhook]:
    home = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", f"127.0.0.1:{free_port()}", "--cert-dir", str(home / "certs"),
         "--state", str(STATE_DIR), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(home)},
    )
    try:
        context = None
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"routegate serve exited: {proc.stderr.read() if proc.stderr else ''}")
            if Path(home / "certs" / "ca.crt").exists():
                context = ssl.create_default_context(cafile=str(home / "certs" / "ca.crt"))
                try:
                    urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2)
                    break
                except OSError:
                    pass
            time.sleep(0.05)
        else:
            pytest.fail("routegate serve did not start")
        assert context is not None
        yield Webhook(port, context)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**64 - 1))
def test_mutated_reviews_never_get_a_5xx_or_a_hang(webhook: Webhook, seed: int) -> None:
    body, headers = fuzzbodies.case(random.Random(seed))
    started = time.monotonic()
    status, answer = webhook.post(body, headers)
    assert time.monotonic() - started < HANG
    assert fuzzbodies.check_answer(status, answer, body) == "", (seed, body[:300])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40)
    | st.sampled_from(fuzzbodies.HOSTILE_STRINGS),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), value=json_values)
def test_any_json_value_anywhere_in_a_real_review_is_answered(webhook: Webhook, data: st.DataObject,
                                                              value: object) -> None:
    import copy
    import json

    doc = copy.deepcopy(data.draw(st.sampled_from(fuzzbodies.seed_reviews())))
    path = data.draw(st.sampled_from(fuzzbodies._paths(doc)))
    doc = fuzzbodies._set(doc, path, value)
    body = json.dumps(doc).encode()
    status, answer = webhook.post(body, fuzzbodies.JSON_HEADERS)
    assert fuzzbodies.check_answer(status, answer, body) == "", (path, value)
