"""CPU per request of the webhook's own request handler on the event loop (``servers.validate``):
reading and parsing the AdmissionReview, the verdict cache's key, the state-source checks, the
metrics, the log line and the response, with the judgement itself an instant stub, so that only the
handler's work is counted.

The requests are the real AdmissionReviews of /work/shared/fixtures/admission-reviews/, each object
renamed per request (a burst of new, distinct objects: every request misses the verdict cache, as in
a burst of independent routes). Two trees are measured in one run (``--base``, by default
/work/main, and this one), in alternating rounds of separate processes, and the ratio of their
medians is printed with the machine's load average.
Run: ``python bench/bench_handler.py [--base DIR] [--requests 3000] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FIXTURES = Path("/work/shared/fixtures/admission-reviews")
HERE = Path(__file__).resolve().parent.parent


def bodies(count: int) -> list[bytes]:
    """``count`` request bodies cycling over the fixtures, each object with its own name and uid."""
    docs = [json.loads(p.read_bytes()) for p in sorted(FIXTURES.glob("*.json"))]
    out = []
    for i in range(count):
        doc = json.loads(json.dumps(docs[i % len(docs)]))
        req = doc["request"]
        req["uid"] = f"bench-{i}"
        for key in ("object", "oldObject"):
            obj = req.get(key)
            if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
                obj["metadata"]["name"] = f"{obj['metadata'].get('name', 'x')}-{i}"
        out.append(json.dumps(doc).encode())
    return out


async def _measure(count: int) -> float:
    """Seconds of process CPU per request through ``servers.validate`` in this process's tree."""
    from aiohttp import streams
    from aiohttp.test_utils import make_mocked_request

    from validators.states import MemoryState
    from webhook import logs
    from webhook.gate.verdicts import Decision, Verdict
    from webhook.server import servers

    logs.configure("info", json_output=True)  # the server's own log line, written to stderr (discarded)

    class Loaded:
        def key(self) -> str:
            return "loaded"

    class StubGate:
        rules = None
        checker = None
        loaded = Loaded()

        async def review(self, change: Any, *, state: Any, **_: Any) -> Verdict:
            return Verdict(Decision.ALLOW, change.ref)

    class Queue:
        waiting = 0

        async def review(self, change: Any, state: Any, *, deadline: float, **_: Any) -> Verdict:
            return Verdict(Decision.ALLOW, change.ref)

    class ClusterLike:
        """The production source's shape: explains itself and reads references on demand."""

        ready = True
        _state = MemoryState()

        def snapshot(self) -> Any:
            return self._state

        def status(self) -> dict[str, Any]:
            return {}

        def why_not_ready(self) -> str:
            return ""

        def reference_problems(self, obj: Any) -> list[str]:
            return []

        async def read_references(self, obj: Any, *, deadline: float) -> None:
            return None

    app = servers.make_app(StubGate(), ClusterLike(), queue=Queue(), selftest=object())  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()

    class Protocol:
        transport = None

        def __init__(self) -> None:
            self._reading_paused = False

        def pause_reading(self) -> None:
            pass

        def resume_reading(self, **_: Any) -> None:
            pass

    requests = []
    for body in bodies(count):
        payload = streams.StreamReader(Protocol(), 2**16, loop=loop)  # type: ignore[arg-type]
        payload.feed_data(body)
        payload.feed_eof()
        requests.append(make_mocked_request("POST", "/validate?timeout=10s", app=app, payload=payload,
                                            headers={"Content-Type": "application/json"}))
    for request in requests[:50]:  # warm-up: imports, first-use caches
        await servers.validate(request)
    statuses = set()
    started = time.process_time()
    for request in requests[50:]:
        statuses.add((await servers.validate(request)).status)
    spent = time.process_time() - started
    if statuses != {200}:
        raise SystemExit(f"unexpected statuses {statuses}")
    return spent / (count - 50)


def _run_tree(tree: Path, count: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(count)], cwd=tree, env=env,
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="/work/main", help="the tree to compare against")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the log lines, for the whole worker's life
        print(asyncio.run(_measure(args.worker)))
        return
    trees = {"base": Path(args.base).resolve(), "this": HERE}
    samples: dict[str, list[float]] = {name: [] for name in trees}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for name, tree in trees.items():
            samples[name].append(_run_tree(tree, args.requests))
    load_after = os.getloadavg()
    print(f"load average (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
          f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}; cores {os.cpu_count()}")
    for name, tree in trees.items():
        values = samples[name]
        print(f"{name:5} {tree}: handler CPU per request median {statistics.median(values) * 1e6:7.1f} us "
              f"(min {min(values) * 1e6:.1f}, max {max(values) * 1e6:.1f}; {args.rounds} rounds x {args.requests})")
    ratio = statistics.median(samples["this"]) / statistics.median(samples["base"])
    print(f"ratio this/base: {ratio:.2f}")


if __name__ == "__main__":
    main()
