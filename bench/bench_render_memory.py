"""Memory of the Gate with the incremental render cache: RSS with N realistic routes after R reviews.

Builds the real Gate (``webhook.gate.assembly.build_gate``: validators, Renderer, haproxy -c) in this
process, loads ``bench_render.realistic(N)`` as the state and sends R reviews (UPDATEs of random
routes, with some CREATEs and DELETEs) through ``Gate.review``, as ``routegate serve`` does after its
HTTP layer. Prints VmRSS after loading, after the first review (cache filled) and after all reviews,
and the peak (VmHWM), in MB. ``--from-scratch`` uses ``Renderer(incremental=False)`` for comparison
(run it as a separate process: RSS is per process).

Run: ``python bench/bench_render_memory.py [--routes 10000] [--reviews 100] [--from-scratch]``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_render import realistic

from haproxy_check.check import binaries
from haproxy_check.render.rendering import Renderer
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gate import assembly


def _mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--routes", type=int, default=10_000)
    parser.add_argument("--reviews", type=int, default=100)
    parser.add_argument("--from-scratch", action="store_true")
    args = parser.parse_args()
    gate = assembly.build_gate(await binaries.detect(), assembly.GateSettings(check_timeout=60.0))
    if args.from_scratch:
        gate.renderer = Renderer(settings=gate.renderer.settings, incremental=False)  # type: ignore[attr-defined]
    objs = realistic(args.routes)
    routes = [o for o in objs if o["kind"] == "HTTPRoute"]
    state = MemoryState(objs, version="v0")
    print(f"{args.routes} routes loaded: RSS {_mb('VmRSS'):.0f} MB", flush=True)
    rng = random.Random(7)
    times = []
    for n in range(args.reviews):
        pick = rng.choice(routes)
        roll = rng.random()
        if roll < 0.1:
            new = copy.deepcopy(pick)
            new["metadata"]["name"] += f"-new{n}"
            change = Change(Operation.CREATE, new)
        elif roll < 0.2:
            change = Change(Operation.DELETE, None, pick)
        else:
            new = copy.deepcopy(pick)
            new["spec"]["rules"][0]["matches"][0]["path"]["value"] = f"/v{n}"
            change = Change(Operation.UPDATE, new, pick)
        start = time.perf_counter()
        verdict = await gate.review(change, state=state)
        times.append(time.perf_counter() - start)
        if n == 0 or (n + 1) % 10 == 0:
            print(f"after review {n + 1} ({times[-1]:.1f} s, {verdict.decision}): "
                  f"RSS {_mb('VmRSS'):.0f} MB", flush=True)
    times.sort()
    print(f"after {args.reviews} reviews (median {times[len(times) // 2]:.2f} s): RSS {_mb('VmRSS'):.0f} MB, "
          f"peak {_mb('VmHWM'):.0f} MB ({'from scratch' if args.from_scratch else 'incremental'})")


if __name__ == "__main__":
    asyncio.run(main())
