"""Latency of one AdmissionReview through the real Gate at 10, 100 and 1000 routes in the state.

Prints the median of 20 reviews (and p90) per size, plus how the time splits between validation,
rendering and haproxy -c. The baseline render (for the reload note) is cached per state version;
``--churn`` gives every review a new version, as a busy cluster does.
Run: ``python bench/bench_review.py [--crds FILE] [--sizes 10,100,1000] [--churn]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from haproxy_check import binaries
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook import assembly


def gateway() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "bench", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"gatewayClassName": "haproxy", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "Same"}}}]}}


def service(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}", "namespace": "bench"},
            "spec": {"ports": [{"name": "http", "port": 8080}]}}


def route(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": f"route-{i}", "namespace": "bench",
                     "creationTimestamp": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"},
        "spec": {
            "parentRefs": [{"name": "edge"}],
            "hostnames": [f"app-{i}.example.com"],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": f"/api/{i}"}}],
                 "filters": [{"type": "RequestHeaderModifier",
                              "requestHeaderModifier": {"set": [{"name": "X-Route", "value": f"r{i}"}]}}],
                 "backendRefs": [{"name": f"svc-{i}", "port": 8080, "weight": 90},
                                 {"name": f"svc-{(i + 1)}", "port": 8080, "weight": 10}]},
                {"matches": [{"path": {"type": "Exact", "value": f"/health/{i}"}, "method": "GET"}],
                 "backendRefs": [{"name": f"svc-{i}", "port": 8080}]},
            ],
        },
    }


async def bench(size: int, *, crds: list[str], runs: int, churn: bool) -> None:
    binary = await binaries.detect(None)
    gate = assembly.build_gate(binary, assembly.GateSettings(crds=crds))
    objects = [gateway(), *(service(i) for i in range(size + 2)), *(route(i) for i in range(size))]
    state = MemoryState(objects, version=f"bench-{size}")
    new = route(size + 1)
    totals: list[float] = []
    parts: dict[str, list[float]] = {}
    for run in range(runs):
        if churn:  # a cluster under churn: every review sees a new state version, so no cached baseline
            state = MemoryState(objects, version=f"bench-{size}-{run}")
        started = time.perf_counter()
        verdict = await gate.review(Change(Operation.CREATE, new), state=state)
        totals.append(time.perf_counter() - started)
        for key, value in verdict.timings.items():
            parts.setdefault(key, []).append(value)
        assert verdict.allowed, verdict.message
    ms = sorted(t * 1000 for t in totals)
    split = ", ".join(f"{k} {statistics.median(v) * 1000:.1f}" for k, v in parts.items() if k != "total")
    label = " churn" if churn else ""
    print(f"{size:>5} routes{label}: median {statistics.median(ms):7.1f} ms  p90 {ms[int(len(ms) * 0.9) - 1]:7.1f} ms"
          f"  ({split}; haproxy {binary.version})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crds", action="append", default=[])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--churn", action="store_true",
                        help="a new state version per review (no cached baseline render), as under cluster churn")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        asyncio.run(bench(size, crds=args.crds, runs=args.runs, churn=args.churn))


if __name__ == "__main__":
    main()
