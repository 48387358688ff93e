"""Live-traffic helpers: run a rendered config in a real haproxy, tiny TLS/HTTP servers on loopback, and
TLS clients that report which certificate they were served."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.render.conftest import render, write
from tests.render_l4.conftest import key_and_cert
from validators.objects import Obj

GW = "gateway.networking.k8s.io/v1"


def sockets_prefix() -> str:
    """Abstract sockets are per network namespace, which tests running at once share: one prefix each."""
    return f"abns@rgtest-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def tls_server(tmp: Path, cn: str, tag: str, *, client_ca: bytes | None = None) -> int:
    """A loopback TLS server presenting a self-signed ``cn`` certificate and sending ``tag``."""
    key, cert = key_and_cert(cn)
    (tmp / f"{cn}.key").write_bytes(key)
    (tmp / f"{cn}.crt").write_bytes(cert)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp / f"{cn}.crt", tmp / f"{cn}.key")
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.decode())
        ctx.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                tls = ctx.wrap_socket(conn, server_side=True)
                tls.sendall(tag.encode())
                tls.close()
            except (OSError, ssl.SSLError):
                conn.close()

    threading.Thread(target=loop, daemon=True).start()
    return int(listener.getsockname()[1])


def tcp_server(tag: str) -> int:
    """A loopback plaintext server sending ``tag`` on every connection."""
    listener = socket.create_server(("127.0.0.1", 0))

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with contextlib.suppress(OSError):
                conn.sendall(tag.encode())
            conn.close()

    threading.Thread(target=loop, daemon=True).start()
    return int(listener.getsockname()[1])


def service(name: str, port: int, ns: str = "default") -> list[Obj]:
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
             "spec": {"ports": [{"port": port}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": f"{name}-1", "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
             "addressType": "IPv4", "ports": [{"name": "", "port": port}],
             "endpoints": [{"addresses": ["127.0.0.1"]}]}]


def peer_cn(tls: ssl.SSLSocket) -> str:
    der = tls.getpeercert(binary_form=True)
    assert der is not None
    names = x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value)


def client_context(cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(cert[0], cert[1])
    return ctx


def tls_get(port: int, sni: str, *, http_host: str | None = None,
            cert: tuple[Path, Path] | None = None) -> tuple[str, str]:
    """(CN of the certificate served, first bytes received); with ``http_host`` an HTTP/1.1 GET first."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            client_context(cert).wrap_socket(raw, server_hostname=sni) as tls:
        cn = peer_cn(tls)
        if http_host is not None:
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {http_host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        with contextlib.suppress(OSError, ssl.SSLError):
            while chunk := tls.recv(4096):
                data += chunk
        return cn, data.decode(errors="replace")


@contextlib.contextmanager
def haproxy_process(binary: str, where: Path, wait_port: int) -> Iterator[subprocess.Popen[bytes]]:
    """haproxy in the foreground on ``where``/haproxy.cfg until ``wait_port`` accepts; yields the process
    (its stdout and stderr are one pipe)."""
    proc = subprocess.Popen([binary, "-db", "-f", "haproxy.cfg"], cwd=where, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null"})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", wait_port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read() if proc.stdout else b""
                    raise AssertionError(f"haproxy did not start: {out.decode(errors='replace')}") from None
                time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def running(binary: str, objs: Sequence[Obj], where: Path, wait_port: int, **settings: Any) -> Iterator[Any]:
    """Render ``objs``, run haproxy in the foreground until the ``wait_port`` accepts; yields the render."""
    result = render(objs, **settings)
    write(result, where)
    with haproxy_process(binary, where, wait_port):
        yield result
