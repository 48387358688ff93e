"""Probe a rendered configuration in a real HAProxy, inside a private network namespace.

``python -m tests.render.trafficprobes SPEC.json`` is run under ``unshare -n`` (``probe`` does that): it
brings the namespace's loopback up, starts one small echo server per Service endpoint port (each answers
with the Service it stands for), then for each run of the spec starts ``haproxy`` on the run's rendered
directory, sends every probe and writes what answered. Inside its own namespace the configuration may
bind any port (``:80``, pod ports) without meeting another process on the machine.

The spec: ``{"binary", "echo": {"<port>": "<ns>/<service>"}, "raw": {"<port>": "<ns>/<service>"}, "runs":
[{"dir", "ports": [...], "probes": [{"port", "host", "target", "method", "headers": [[name, value]]}]}]}``;
a probe with ``"kind": "tls"`` (and ``"sni"``) opens a TLS connection by server name, ``"kind": "tcp"`` a
plain one; ``raw`` servers answer any first bytes with ``RG-ECHO <name>``. The answer per probe:
``{"status": int, "server": str}``; status 0: the connection was refused; 1: a raw echo answered;
-1: the connection was closed (rejected) without an answer.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HOSTILE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null"}


def _echo(port: int, name: str) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = name.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Served-By", name)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


ECHO_MARK = b"RG-ECHO "  # what a raw (TCP) echo server answers first, then its name


def _raw_echo(port: int, name: str) -> None:
    """A TCP echo for TLSRoute/TCPRoute backends: reads what arrives first (a ClientHello passed through,
    or bytes HAProxy decrypted), answers ``RG-ECHO <name>`` and closes."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(3)
            with contextlib.suppress(OSError):
                self.request.recv(65536)
                self.request.sendall(ECHO_MARK + name.encode() + b"\n")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            out += chunk
    return out


def _echo_answer(data: bytes) -> dict[str, Any] | None:
    if data.startswith(ECHO_MARK):
        return {"status": 1, "server": data[len(ECHO_MARK):].decode(errors="replace").strip()}
    return None


def _tcp(probe: dict[str, Any]) -> dict[str, Any]:
    """A plain TCP connection: 1 and the echo's name, 0 refused, -1 closed without an echo."""
    try:
        sock = socket.create_connection(("127.0.0.1", probe["port"]), timeout=5)
    except ConnectionRefusedError:
        return {"status": 0, "server": ""}
    with sock:
        with contextlib.suppress(OSError):
            sock.sendall(b"rg-probe\n")
        return _echo_answer(_read_all(sock)) or {"status": -1, "server": ""}


def _tls(probe: dict[str, Any]) -> dict[str, Any]:
    """A TLS connection with server name ``sni``, driven through memory BIOs so that a passed-through
    ClientHello answered by a raw echo is seen as such: 1 and the echo's name (passed through, or
    decrypted by a Terminate frontend to a raw echo), the HTTP status and X-Served-By when the HTTP
    engine decrypts it (then ``GET target`` with Host ``host`` is sent), 0 refused, -1 closed."""
    try:
        sock = socket.create_connection(("127.0.0.1", probe["port"]), timeout=5)
    except ConnectionRefusedError:
        return {"status": 0, "server": ""}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=probe["sni"])
    closed = {"status": -1, "server": ""}
    with sock:
        try:
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    sock.sendall(outgoing.read())
                    data = sock.recv(65536)
                    if not data:
                        return closed
                    if (echoed := _echo_answer(data)) is not None:
                        return echoed
                    incoming.write(data)
            request = (f"GET {probe['target']} HTTP/1.1\r\nHost: {probe['host']}\r\nConnection: close\r\n"
                       "\r\n").encode()
            tls.write(request)
            sock.sendall(outgoing.read())
            plain = b""
            while True:
                try:
                    chunk = tls.read(65536)
                    if not chunk:
                        break
                    plain += chunk
                except ssl.SSLWantReadError:
                    if outgoing.pending:
                        sock.sendall(outgoing.read())
                    data = sock.recv(65536)
                    if not data:
                        break
                    incoming.write(data)
        except (ssl.SSLError, OSError):
            return closed
    if (echoed := _echo_answer(plain)) is not None:
        return echoed
    head = plain.split(b"\r\n\r\n", 1)[0].decode(errors="replace").split("\r\n")
    if not head[0].startswith("HTTP/1."):
        return closed
    server = next((line.split(":", 1)[1].strip() for line in head[1:]
                   if line.lower().startswith("x-served-by:")), "")
    return {"status": int(head[0].split()[1]), "server": server}


def _wait(ports: list[int], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read() if proc.stdout else b""
                    raise SystemExit(f"haproxy did not listen on {port}: {out.decode(errors='replace')}") from None
                time.sleep(0.02)


def _send(probe: dict[str, Any]) -> dict[str, Any]:
    kind = probe.get("kind", "http")
    if kind == "tcp":
        return _tcp(probe)
    if kind == "tls":
        return _tls(probe)
    conn = http.client.HTTPConnection("127.0.0.1", probe["port"], timeout=5)
    try:
        conn.putrequest(probe["method"], probe["target"], skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", probe["host"])
        for name, value in probe["headers"]:
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        return {"status": response.status, "server": response.getheader("X-Served-By") or ""}
    except ConnectionRefusedError:
        return {"status": 0, "server": ""}
    finally:
        conn.close()


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for port, name in spec["echo"].items():
        _echo(int(port), name)
    for port, name in spec.get("raw", {}).items():
        _raw_echo(int(port), name)
    answers = []
    for run in spec["runs"]:
        proc = subprocess.Popen([spec["binary"], "-db", "-f", "haproxy.cfg"], cwd=run["dir"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=HOSTILE_ENV)
        try:
            _wait(run["ports"], proc)
            answers.append([_send(p) for p in run["probes"]])
        finally:
            proc.kill()
            proc.wait()
    sys.stdout.write(json.dumps(answers))


def probe(spec: dict[str, Any], where: Path) -> list[list[dict[str, Any]]]:
    """Run ``spec`` in a new network namespace; the answers per run, per probe."""
    path = where / "spec.json"
    path.write_text(json.dumps(spec))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(["unshare", "-n", sys.executable, "-m", "tests.render.trafficprobes", str(path)],
                          capture_output=True, text=True, timeout=120, env=env, check=False, cwd=root)
    if done.returncode != 0:
        raise AssertionError(f"probe run failed ({done.returncode}): {done.stderr or done.stdout}")
    answers: list[list[dict[str, Any]]] = json.loads(done.stdout)
    return answers


if __name__ == "__main__":
    main(sys.argv[1])
