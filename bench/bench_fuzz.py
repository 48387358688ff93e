"""Fuzz a real ``routegate serve`` over HTTPS with random and mutated AdmissionReview bodies.

Every answer must keep the contract: HTTP 200 with an AdmissionReview response carrying the request's
uid, or a 4xx (400, 408, 413, 415) with a JSON ``error``. Counted and printed: answers by status,
5xx (must be 0), hangs (no answer within --hang seconds; must be 0), contract violations (must be
0), transport errors, and the server's RSS at start, after a warm-up and at the end (the leak check
is the end/warm-up ratio, measured in this run). The bodies come from tests/webhook/fuzzbodies.py,
the generator the suite's hypothesis test uses; ``--seed`` replays a run.

Run: ``PYTHONPATH=$PWD python bench/bench_fuzz.py [--cases 100000] [--concurrency 8] [--seed 1]``.
Exit code 1 when any 5xx, hang or violation was seen.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import aiohttp

from tests.conftest import free_port
from tests.webhook import fuzzbodies
from tests.webhook.conftest import STATE_DIR


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def start_server(home: Path, haproxy: str | None) -> tuple[subprocess.Popen[bytes], int, ssl.SSLContext]:
    port = free_port()
    argv = [sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{port}",
            "--metrics-listen", f"127.0.0.1:{free_port()}", "--cert-dir", str(home / "certs"),
            "--state", str(STATE_DIR), "--log-level", "error"]
    if haproxy:
        argv += ["--haproxy", haproxy]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HOME": str(home)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"routegate serve exited with {proc.returncode}")
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


class Tally:
    def __init__(self) -> None:
        self.status: Counter[int] = Counter()
        self.hangs = 0
        self.transport: Counter[str] = Counter()
        self.violations: list[str] = []
        self.slowest = 0.0


async def one(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], hang: float,
              tally: Tally, seed: int) -> None:
    started = time.monotonic()
    try:
        async with asyncio.timeout(hang):
            async with session.post(url, data=body, headers=headers) as resp:
                answer = await resp.read()
                status = resp.status
    except TimeoutError:
        tally.hangs += 1
        tally.violations.append(f"seed {seed}: no answer within {hang:g}s")
        return
    except aiohttp.ClientError as exc:
        tally.transport[type(exc).__name__] += 1
        return
    tally.slowest = max(tally.slowest, time.monotonic() - started)
    tally.status[status] += 1
    problem = fuzzbodies.check_answer(status, answer, body)
    if problem:
        tally.violations.append(f"seed {seed}: {problem}")


async def fuzz(port: int, context: ssl.SSLContext, *, cases: int, concurrency: int, seed: int, hang: float,
               tally: Tally, progress: int, pid: int = 0) -> None:
    url = f"https://127.0.0.1:{port}/validate"
    master = random.Random(seed)
    queue: asyncio.Queue[tuple[int, bytes, dict[str, str]] | None] = asyncio.Queue(maxsize=concurrency * 4)

    async def produce() -> None:
        for i in range(cases):
            case_seed = master.getrandbits(64)
            body, headers = fuzzbodies.case(random.Random(case_seed))
            await queue.put((case_seed, body, headers))
            if progress and (i + 1) % progress == 0:
                rss = f", server RSS {rss_kib(pid) / 1024:.1f} MiB" if pid else ""
                print(f"  {i + 1} sent, {sum(tally.status.values())} answered, 5xx "
                      f"{sum(n for s, n in tally.status.items() if s >= 500)}, hangs {tally.hangs}{rss}", flush=True)
        for _ in range(concurrency):
            await queue.put(None)

    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                case_seed, body, headers = item
                await one(session, url, body, headers, hang, tally, case_seed)

        await asyncio.gather(produce(), *(consume() for _ in range(concurrency)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang", type=float, default=30.0, help="seconds without an answer that count as a hang")
    parser.add_argument("--warmup", type=int, default=2000, help="cases before the 'after warm-up' RSS")
    parser.add_argument("--haproxy", help="haproxy binary for the server (default: its own lookup)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="routegate-fuzz-") as tmp:
        proc, port, context = start_server(Path(tmp), args.haproxy)
        try:
            rss_start = rss_kib(proc.pid)
            tally = Tally()
            asyncio.run(fuzz(port, context, cases=min(args.warmup, args.cases), concurrency=args.concurrency,
                             seed=args.seed + 1, hang=args.hang, tally=Tally(), progress=0))
            rss_warm = rss_kib(proc.pid)
            started = time.monotonic()
            asyncio.run(fuzz(port, context, cases=args.cases, concurrency=args.concurrency, seed=args.seed,
                             hang=args.hang, tally=tally, progress=max(1, args.cases // 10), pid=proc.pid))
            elapsed = time.monotonic() - started
            rss_end = rss_kib(proc.pid)
            alive = proc.poll() is None
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = -9

    answered = sum(tally.status.values())
    five = sum(n for s, n in tally.status.items() if s >= 500)
    print(f"cases: {args.cases} (seed {args.seed}, concurrency {args.concurrency}) in {elapsed:.1f}s "
          f"= {answered / elapsed:.0f}/s; slowest answer {tally.slowest:.2f}s")
    print("status counts: " + ", ".join(f"{s}: {n}" for s, n in sorted(tally.status.items())))
    print(f"5xx: {five}   hangs: {tally.hangs}   contract violations: {len(tally.violations)}   "
          f"transport errors: {dict(tally.transport) or 0}")
    print(f"server RSS: start {rss_start / 1024:.1f} MiB, after {args.warmup} warm-up cases "
          f"{rss_warm / 1024:.1f} MiB, end {rss_end / 1024:.1f} MiB (end/warm-up {rss_end / max(rss_warm, 1):.2f})")
    print(f"server alive at the end: {alive}; exit code after SIGTERM: {code}")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} on {os.cpu_count()} cpus")
    for line in tally.violations[:20]:
        print("  " + line)
    return 1 if five or tally.hangs or tally.violations or not alive or code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
