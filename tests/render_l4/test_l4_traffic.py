"""Real traffic through the rendered TLS passthrough and TCP frontends: SNI routing by exact name and
wildcard, unclaimed names rejected, TCP forwarding; the rendered config runs in a real haproxy."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.render.conftest import render, write
from tests.render_l4 import livegw
from tests.render_l4.conftest import key_and_cert
from validators.objects import Obj

GW = "gateway.networking.k8s.io/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(tmp: Path, tag: str, tls: bool) -> int:
    """A one-line server on 127.0.0.1 answering ``tag`` (over TLS with a *.example.com cert when tls)."""
    return livegw.tls_server(tmp, "*.example.com", tag) if tls else livegw.tcp_server(tag)


service = livegw.service


def route(kind: str, name: str, svc: str, port: int, **spec: Any) -> Obj:
    return {"apiVersion": GW, "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": "edge"}], **spec,
                     "rules": [{"backendRefs": [{"name": svc, "port": port}]}]}}


@pytest.fixture
def running(haproxy_path: str, tmp_path: Path) -> Iterator[tuple[int, int]]:
    tls_port, tcp_port = free_port(), free_port()
    a, b, c = serve(tmp_path, "exact", True), serve(tmp_path, "wild", True), serve(tmp_path, "tcp", False)
    objs: list[Obj] = [
        {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "default"},
         "spec": {"gatewayClassName": "haptic", "listeners": [
             {"name": "pt", "protocol": "TLS", "port": tls_port, "tls": {"mode": "Passthrough"}},
             {"name": "tcp", "protocol": "TCP", "port": tcp_port}]}},
        *service("a", a), *service("b", b), *service("c", c),
        route("TLSRoute", "exact", "a", a, hostnames=["secure.example.com"]),
        route("TLSRoute", "wild", "b", b, hostnames=["*.example.com"]),
        route("TCPRoute", "tcp", "c", c),
    ]
    where = write(render(objs), tmp_path / "cfg")
    proc = subprocess.Popen([haproxy_path, "-db", "-f", "haproxy.cfg"], cwd=where, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "OPENSSL_CONF": "/dev/null"})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", tcp_port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "haproxy did not start"
                time.sleep(0.05)
        yield tls_port, tcp_port
    finally:
        proc.kill()
        proc.wait()


def hello(port: int, sni: str) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname=sni) as tls:
        return tls.recv(16).decode()


def test_passthrough_routes_by_sni_and_rejects_unclaimed(running: tuple[int, int]) -> None:
    tls_port, tcp_port = running
    assert hello(tls_port, "secure.example.com") == "exact"
    assert hello(tls_port, "x.y.example.com") == "wild"
    with pytest.raises((ssl.SSLError, OSError)):
        hello(tls_port, "unclaimed.org")
    with socket.create_connection(("127.0.0.1", tcp_port), timeout=5) as s:
        assert s.recv(16) == b"tcp"


def test_terminate_then_reencrypt_with_backend_tls_policy(haproxy_path: str, tmp_path: Path) -> None:
    """Terminate at the gateway, verify the backend against the policy's CA and hostname; a wrong
    hostname fails verification (no plaintext, no unverified fallback)."""
    from tests.render_l4.conftest import tls_secret

    port = free_port()
    backend = serve(tmp_path, "verified", True)  # presents *.example.com, self-signed
    _, cert = key_and_cert("*.example.com")

    def policy(name: str, svc: str, hostname: str) -> Obj:
        return {"apiVersion": GW, "kind": "BackendTLSPolicy", "metadata": {"name": name, "namespace": "default"},
                "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": svc}],
                         "validation": {"hostname": hostname,
                                        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}]}}}

    objs: list[Obj] = [
        {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "default"},
         "spec": {"gatewayClassName": "haptic", "listeners": [
             {"name": "t", "protocol": "TLS", "port": port, "tls": {"certificateRefs": [{"name": "front"}]}}]}},
        tls_secret("front", "*.example.com"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "default"},
         "data": {"ca.crt": cert.decode()}},
        *service("good", backend), *service("bad", backend),
        policy("good", "good", "b.example.com"), policy("bad", "bad", "b.other.org"),
        route("TLSRoute", "good", "good", backend, hostnames=["good.example.com"]),
        route("TLSRoute", "bad", "bad", backend, hostnames=["bad.example.com"]),
    ]
    where = write(render(objs), tmp_path / "cfg")
    proc = subprocess.Popen([haproxy_path, "-db", "-f", "haproxy.cfg"], cwd=where, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "OPENSSL_CONF": "/dev/null"})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                got = hello(port, "good.example.com")
                break
            except (OSError, ssl.SSLError):
                assert proc.poll() is None and time.monotonic() < deadline, "haproxy did not start"
                time.sleep(0.05)
        # the client speaks TLS to the gateway; the gateway re-encrypts; the backend's TLS payload is the tag
        assert got == "verified"
        with pytest.raises((ssl.SSLError, OSError, AssertionError)):
            assert hello(port, "bad.example.com") == "verified"
    finally:
        proc.kill()
        proc.wait()
