"""RG0127 (a change may not move another Gateway's address) on its port-adding path: O(change), not O(pairs).

Run: ``python bench/bench_podports.py [--pairs 1000,4000] [--reviews 30]``.

For each size, a state of that many isolated pairs (Gateways sharing ports 80 and 443, pod ports from
their hash slots) is built; the base's indexes are warmed by one review (they are built once per state
version, as a cluster snapshot's), then ``--reviews`` updates of old Gateways that each add a listener on a
shared port (the path that can push younger pairs off their pod ports) are reviewed by
``addressmoves.findings``. Printed per size: the median review, and the same review's from-scratch
assignment of the whole proposed state (what the rule did before: ``_sources`` + ``assign_ages`` of every
pair) in the same run. The ratio of the medians between sizes is the target: ~1 for O(change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from validators.changes import Change, Operation  # noqa: E402
from validators.crossobject import addressmoves  # noqa: E402
from validators.objects import Obj  # noqa: E402
from validators.podranges import PodRange  # noqa: E402
from validators.states import MemoryState, Overlay  # noqa: E402

PORTS = (80, 443)
PODS = PodRange(20000, 10000)


def gateway(n: int, *ports: int) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": f"g{n}", "namespace": f"ns{n % 50}",
                         "creationTimestamp": f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T00:00:{n % 60:02d}Z"},
            "spec": {"gatewayClassName": "haptic", "listeners": [
                {"name": f"l{p}", "protocol": "HTTP", "port": p} for p in ports]}}


def run(pairs: int, reviews: int) -> dict[str, Any]:
    objs = [gateway(n, 80 if n % 2 else 8080) for n in range(pairs)]
    state = MemoryState(objs, version=f"bench-{pairs}")
    times: list[float] = []
    scratch: list[float] = []
    moved = 0
    for k in range(reviews + 1):
        old = objs[(k * 7919) % pairs]
        new = json.loads(json.dumps(old))
        port = 8080 if new["spec"]["listeners"][0]["port"] == 80 else 80
        new["spec"]["listeners"].append({"name": "added", "protocol": "HTTP", "port": port})
        proposed = Overlay(state, Change(Operation.UPDATE, new, old))
        started = time.perf_counter()
        found = list(addressmoves.findings(new, state, proposed, http_ports=PORTS, pods=PODS))
        took = time.perf_counter() - started
        started = time.perf_counter()
        addressmoves._addresses(addressmoves._sources(proposed, PORTS, PODS), PODS)
        whole = time.perf_counter() - started
        if k:  # the first review builds the base state's indexes (once per state version)
            times.append(took)
            scratch.append(whole)
            moved += len(found)
    return {"review": statistics.median(times), "scratch": statistics.median(scratch), "findings": moved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", default="1000,4000")
    parser.add_argument("--reviews", type=int, default=30)
    args = parser.parse_args()
    sizes = [int(x) for x in args.pairs.split(",")]
    got = {n: run(n, args.reviews) for n in sizes}
    for n, r in got.items():
        print(f"{n} pairs: RG0127 review {r['review'] * 1000:.2f} ms (median of {args.reviews} port-adding updates, "
              f"{r['findings']} findings); the whole assignment from scratch {r['scratch'] * 1000:.1f} ms", flush=True)
    first, last = sizes[0], sizes[-1]
    print(f"ratio {last}/{first} pairs: review {got[last]['review'] / got[first]['review']:.2f} "
          f"(from scratch {got[last]['scratch'] / got[first]['scratch']:.2f})")


if __name__ == "__main__":
    main()
