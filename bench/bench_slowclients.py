"""How long slow and idle clients can hold a real ``routegate serve`` (default bounds unless given).

Measured in one run, over TLS: N idle connections that never send a byte, a client that sends one
header byte every 2 s, a client that sends its body one byte every 2 s, and one more connection than
the cap. Prints, for each, when the server cut it off next to the bound that applies.

Run: ``PYTHONPATH=$PWD python bench/bench_slowclients.py [--idle 200] [--header-timeout 10] ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.conftest import free_port
from tests.webhook.conftest import STATE_DIR
from webhook.server.connections import LINGERING


def start(home: Path, extra: list[str]) -> tuple[subprocess.Popen[bytes], int, ssl.SSLContext]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}", "--metrics-listen",
         f"127.0.0.1:{free_port()}", "--cert-dir", str(home / "certs"), "--state", str(STATE_DIR),
         "--log-level", "error", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "HOME": str(home)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ca = home / "certs" / "ca.crt"
        if ca.exists():
            context = ssl.create_default_context(cafile=str(ca))
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2)
                return proc, port, context
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("routegate serve did not start")


async def held(reader: asyncio.StreamReader, started: float, limit: float) -> float:
    try:
        async with asyncio.timeout(limit):
            while await reader.read(65536):
                pass
    except (ConnectionError, ssl.SSLError):
        pass
    except TimeoutError:
        return float("inf")
    return time.monotonic() - started


async def measure(port: int, context: ssl.SSLContext, args: argparse.Namespace) -> None:
    limit = max(args.header_timeout, args.body_timeout) + 60

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")

    started = time.monotonic()
    idle = await asyncio.gather(*(connect() for _ in range(args.idle)), return_exceptions=True)
    opened = [c for c in idle if not isinstance(c, BaseException)]
    print(f"{args.idle} idle TLS connections: {len(opened)} handshakes done in {time.monotonic() - started:.2f}s")

    async def trickle(writer: asyncio.StreamWriter, data: bytes) -> None:
        for byte in data:
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except (ConnectionError, ssl.SSLError):
                return
            await asyncio.sleep(2.0)

    r_head, w_head = await connect()
    head_started = time.monotonic()
    head_feed = asyncio.create_task(trickle(w_head, b"POST /validate HTTP/1.1\r\nHost: x\r\n" * 10))
    r_body, w_body = await connect()
    w_body.write(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n")
    body_started = time.monotonic()
    body_feed = asyncio.create_task(trickle(w_body, b" " * 1000))
    waits = await asyncio.gather(*(held(r, started, limit) for r, _ in opened))
    head = await held(r_head, head_started, limit)
    body = await held(r_body, body_started, limit)
    for task in (head_feed, body_feed):
        task.cancel()
    finite = [w for w in waits if w != float("inf")]
    print(f"  idle connections cut after {min(finite, default=0):.2f}..{max(finite, default=0):.2f}s "
          f"(bound: --header-timeout {args.header_timeout:g}s from the handshake); "
          f"never cut: {len(waits) - len(finite)}")
    print(f"one header byte every 2 s: cut after {head:.2f}s (bound: --header-timeout {args.header_timeout:g}s)")
    print(f"one body byte every 2 s: answered 408 and closed after {body:.2f}s "
          f"(bound: --body-timeout {args.body_timeout:g}s + {LINGERING:g}s lingering)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=10.0)
    parser.add_argument("--max-connections", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="routegate-slow-") as tmp:
        proc, port, context = start(Path(tmp), [
            "--header-timeout", str(args.header_timeout), "--body-timeout", str(args.body_timeout),
            "--max-connections", str(args.max_connections)])
        try:
            asyncio.run(measure(port, context, args))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
