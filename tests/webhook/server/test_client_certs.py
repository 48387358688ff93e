"""``routegate serve --client-ca``: only a client with a certificate from that CA may talk to the
webhook port (real process, real TLS); probes are answered on the metrics port."""

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs import generation
from tests.conftest import free_port
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects

pytestmark = pytest.mark.haproxy


def client_pair(ca: generation.Issued, out: Path, name: str) -> tuple[Path, Path]:
    """A client certificate (clientAuth) for ``name`` signed by ``ca``, as the apiserver would hold."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    issued = generation.Issued(cert, key)
    cert_file, key_file = out / f"{name}.crt", out / f"{name}.key"
    cert_file.write_bytes(issued.cert_pem())
    key_file.write_bytes(issued.key_pem())
    return cert_file, key_file


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    now = datetime.now(UTC)
    ca = generation.new_ca(now=now, common_name="apiserver client CA")
    (tmp_path / "client-ca.crt").write_bytes(ca.cert_pem())
    client_pair(ca, tmp_path, "kube-apiserver")
    client_pair(generation.new_ca(now=now, common_name="someone else"), tmp_path, "intruder")
    port, metrics_port = free_port(), free_port()
    cert_dir = tmp_path / "certs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", f"127.0.0.1:{metrics_port}", "--cert-dir", str(cert_dir), "--state", str(STATE_DIR),
         "--client-ca", str(tmp_path / "client-ca.crt")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"routegate serve exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=2)
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("routegate serve did not answer /healthz on the metrics port")
        yield port, metrics_port, tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0


def post(port: int, context: ssl.SSLContext) -> dict[str, object]:
    route = next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == "shop")  # type: ignore[index]
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "mtls-1", "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
        "operation": "CREATE", "namespace": "capture", "name": "shop", "object": route}}).encode()
    request = urllib.request.Request(f"https://127.0.0.1:{port}/validate", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        answer: dict[str, object] = json.load(resp)
        return answer


def trust(tmp_path: Path, client: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
    if client is not None:
        context.load_cert_chain(tmp_path / f"{client}.crt", tmp_path / f"{client}.key")
    return context


def test_only_a_client_certificate_from_the_ca_is_accepted(served: tuple[int, int, Path]) -> None:
    port, metrics_port, tmp_path = served
    with pytest.raises(OSError):  # no certificate: the handshake is refused (TLS alert)
        post(port, trust(tmp_path))
    with pytest.raises(OSError):  # a certificate from another CA
        post(port, trust(tmp_path, "intruder"))
    response = post(port, trust(tmp_path, "kube-apiserver"))["response"]
    assert isinstance(response, dict) and response["uid"] == "mtls-1" and response["allowed"] is True, response
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=10) as resp:
        assert resp.status == 200 and json.load(resp)["ready"] is True


def test_an_unreadable_client_ca_is_a_setup_error(tmp_path: Path) -> None:
    (tmp_path / "bad.crt").write_text("not a certificate")
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{free_port()}",
         "--metrics-listen", f"127.0.0.1:{free_port()}", "--cert-dir", str(tmp_path / "certs"),
         "--client-ca", str(tmp_path / "bad.crt")],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 2 and f"--client-ca {tmp_path / 'bad.crt'}" in proc.stderr, proc.stderr
