"""Probe a rendered configuration in a real HAProxy, inside a private network namespace.

``python -m tests.render.trafficprobes SPEC.json`` is run under ``unshare -n`` (``probe`` does that): it
brings the namespace's loopback up, starts one small echo server per Service endpoint port (each answers
with the Service it stands for), then for each run of the spec starts ``haproxy`` on the run's rendered
directory, sends every probe and writes what answered. Inside its own namespace the configuration may
bind any port (``:80``, pod ports) without meeting another process on the machine.

The spec: ``{"binary", "echo": {"<port>": "<ns>/<service>"}, "runs": [{"dir", "ports": [...],
"probes": [{"port", "host", "target", "method", "headers": [[name, value]]}]}]}``. The answer per probe:
``{"status": int, "server": str}``; status 0: the connection was refused.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import socket
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
