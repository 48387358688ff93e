"""Latency of one AdmissionReview through the real Gate at 100, 1,000 and 10,000 routes in the state,
with the delta check (the change's closure, the default) and the full check (the whole state).

Prints, per size, operation (CREATE/UPDATE/DELETE) and mode, the median and p99 of ``--runs`` reviews as
a ratio to the haproxy -c floor (a trivial configuration) measured in the same run, and how the time
splits between validation, closure, rendering and haproxy -c. The first review of a state version
builds the per-version indexes and is reported on its own; ``--churn`` gives every review a new
version, as a busy cluster does.
Run: ``python bench/bench_review.py [--crds FILE] [--sizes 100,1000,10000] [--modes delta,full] [--churn]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from haproxy_check.check import binaries
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate


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


async def floor(gate: Any, runs: int) -> float:
    """Median seconds of haproxy -c on a trivial configuration (one Gateway, no routes): the floor every
    review pays, measured in the same run so ratios survive a noisy shared machine."""
    render = gate.renderer.render(MemoryState([gateway()], version="floor"))
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await gate.checker.check(render)
        times.append(time.perf_counter() - started)
        assert result.ok
    return statistics.median(times)


def change_of(op: str, size: int, objects: list[dict[str, Any]]) -> Change:
    if op == "create":
        return Change(Operation.CREATE, route(size + 1))
    old = route(size // 2)
    if op == "delete":
        return Change(Operation.DELETE, None, old)
    new = route(size // 2)
    new["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/api/changed"
    return Change(Operation.UPDATE, new, old)


async def bench(size: int, *, crds: list[str], runs: int, churn: bool, modes: list[str], ops: list[str],
                full_runs: int) -> None:
    binary = await binaries.detect(None)
    # A long haproxy -c deadline: the full check of 10,000 routes takes seconds on a loaded machine.
    gate = assembly.build_gate(binary, assembly.GateSettings(crds=crds, check_timeout=120.0))
    full = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=False)
    base = await floor(gate, 20)
    objects = [gateway(), *(service(i) for i in range(size + 2)), *(route(i) for i in range(size))]
    print(f"{size:>6} routes: haproxy -c floor (trivial config) {base * 1000:.1f} ms; haproxy {binary.version}")
    for mode in modes:
        judge = gate if mode == "delta" else full
        for op in ops:
            state = MemoryState(objects, version=f"bench-{size}")
            change = change_of(op, size, objects)
            totals: list[float] = []
            parts: dict[str, list[float]] = {}
            first = None
            count = runs if mode == "delta" else min(runs, full_runs)
            for run in range(count + 1):
                if churn:  # a cluster under churn: every review sees a new state version (no cached index)
                    state = MemoryState(objects, version=f"bench-{size}-{run}")
                started = time.perf_counter()
                verdict = await judge.review(change, state=state)
                took = time.perf_counter() - started
                assert verdict.allowed, verdict.message
                if run == 0 and not churn:  # builds the per-version indexes: reported on its own
                    first = took
                    continue
                totals.append(took)
                for key, value in verdict.timings.items():
                    parts.setdefault(key, []).append(value)
            ms = sorted(totals)
            median, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
            split = ", ".join(f"{k} {statistics.median(v) * 1000:.1f}" for k, v in parts.items() if k != "total")
            extra = f"; first review of the version {first * 1000:.0f} ms ({first / base:.1f}x)" if first else ""
            print(f"  {mode:>5} {op:<6}{' churn' if churn else ''}: median {median * 1000:8.1f} ms = "
                  f"{median / base:6.1f}x floor, p99 {p99 / base:6.1f}x (n={len(ms)}; {split}){extra}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crds", action="append", default=[])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--full-runs", type=int, default=5, help="reviews per case on the full path (slow)")
    parser.add_argument("--modes", default="delta,full", help="delta (the closure), full (the whole state)")
    parser.add_argument("--ops", default="create,update,delete")
    parser.add_argument("--churn", action="store_true",
                        help="a new state version per review (no cached baseline render), as under cluster churn")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        asyncio.run(bench(size, crds=args.crds, runs=args.runs, churn=args.churn, modes=args.modes.split(","),
                          ops=args.ops.split(","), full_runs=args.full_runs))


if __name__ == "__main__":
    main()
