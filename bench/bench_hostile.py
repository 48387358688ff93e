"""Hostile inputs: ReDoS values against every bundled CRD pattern, hostile objects through all validators,
and what a noisy tenant's EndpointSlices cost an unrelated review.

Every time is printed as a ratio to the *floor*: ``haproxy -c`` of a trivial config, same binary, same
sandbox, same run (the machine is shared and noisy: only ratios measured together compare).

1. patterns: each bundled CRD pattern against the known ReDoS shapes (a long run the pattern almost
   accepts, then a breaking character) at the field's ``maxLength`` (100,000 characters where the
   schema has none); the worst time per pattern: worst over values of the best of 3 runs per value,
   after one warm pass (RE2 builds DFA states lazily, a few milliseconds once per pattern and
   process). Python's ``re`` needed seconds for 27 characters on the header-value pattern:
   ``--compare-re`` runs that case in a subprocess with a deadline.
2. objects: hostile objects through every validator (schema, CEL, HAProxy rules, cross-object); the
   worst of ``--repeat`` runs per object, after one warm run (a kind's schema and CEL rules compile
   once per process), wall time and the thread's CPU time (what the 2 s budget counts).
3. tenant: an unrelated tenant's review (``Gate.review``: validate, render, haproxy -c) with a hostile
   tenant in the state whose Service has 20 EndpointSlices x 1,000 endpoints: without that tenant,
   with it under the default ``limits.serversPerBackend`` (500), and with the limit lifted (the
   behaviour before the limit). The delta check, which leaves unrelated backends out of a review's
   ``haproxy -c``, will shrink the middle line further.

Run: ``python bench/bench_hostile.py [--repeat 3] [--compare-re]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from haproxy_check.check import binaries
from haproxy_check.check.checker import Checker
from haproxy_check.results import HAProxyBinary, RenderResult
from validators.changes import Change, Operation
from validators.limits import Limits
from validators.schema.crds import SchemaSet
from validators.schema.schemaformats import go_pattern
from validators.states import MemoryState
from webhook.gate import assembly

BUNDLE = Path(__file__).resolve().parents[1] / "webhook" / "bundled" / "crds.json.gz"
RUNS = ("a", "a-", "a.", "a.a-", "0", "0s", "! ", "!\t!", "-", "A_", "%2", "a/", "*.", "http://a.")
BREAKERS = ("\x00", "!", "\n", " ", "-", ".", "\u00e9", "/", "$")
TRIVIAL = b"global\n    maxconn 100\n\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n" \
          b"    timeout server 1s\n\nfrontend f\n    bind 127.0.0.1:8080\n    default_backend b\n\nbackend b\n" \
          b"    server s1 127.0.0.1:8081\n"
HEADER_VALUE = r"^[!-~]+([\t ]?[!-~]+)*$"


def crds() -> list[Any]:
    items: list[Any] = json.loads(gzip.decompress(BUNDLE.read_bytes()))["items"]
    return items


def patterns(node: Any) -> Iterator[tuple[str, int | None]]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            limit = node.get("maxLength")
            yield node["pattern"], limit if isinstance(limit, int) else None
        for value in node.values():
            yield from patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from patterns(value)


def evil(length: int) -> Iterator[str]:
    for run in RUNS:
        for end in BREAKERS:
            yield (run * (length // len(run) + 1))[: length - 1] + end


async def floor(checker: Checker, repeat: int) -> float:
    times = []
    for _ in range(max(5, repeat)):
        started = time.perf_counter()
        result = await checker.check(RenderResult(files={"haproxy.cfg": TRIVIAL}))
        times.append(time.perf_counter() - started)
        assert result.ok, result.alerts
    return statistics.median(times)


def bench_patterns(base: float) -> None:
    found: dict[str, int | None] = {}
    for text, limit in patterns(crds()):
        found[text] = max(found.get(text) or 0, limit or 0) or None
    print(f"\n1. CRD patterns on RE2, worst ReDoS shape per pattern ({len(found)} patterns)")
    worst_all = 0.0
    for text, limit in sorted(found.items(), key=lambda p: p[0]):
        compiled = go_pattern(text)
        assert compiled is not None, text
        length = limit or 100_000
        values = list(evil(length))
        for value in values:  # RE2 builds its DFA states lazily (a few ms once): time the searches after
            compiled.search(value)
        worst = 0.0
        for value in values:  # best of 3 per value (a preempted run says nothing about RE2), worst over values
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                compiled.search(value)
                best = min(best, time.perf_counter() - started)
            worst = max(worst, best)
        worst_all = max(worst_all, worst)
        shown = text if len(text) <= 60 else text[:57] + "..."
        print(f"   {worst * 1e6:9.1f} us = {worst / base:8.5f} x floor  len {length:>6}  {shown}")
    print(f"   worst of all patterns: {worst_all / base:.5f} x floor")


def compare_re(deadline: float) -> None:
    print(f"\n   Python re on the header-value pattern (before RE2), {deadline:g} s deadline:")
    for n in (20, 24, 27):
        code = (f"import re,time; v='!'*{n}+'\\x00'; t=time.perf_counter(); re.search({HEADER_VALUE!r}, v); "
                "print(time.perf_counter()-t)")
        try:
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=deadline,
                                 check=True).stdout.strip()
            print(f"   {n:>3} characters: {float(out):8.3f} s")
        except subprocess.TimeoutExpired:
            print(f"   {n:>3} characters: > {deadline:g} s (killed)")


def _route(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "edge", "namespace": "infra"}], **spec}}


def hostile_objects() -> dict[str, dict[str, Any]]:
    header_values = [{"name": f"X-H{i}", "value": "!" * 4094 + "\x00"} for i in range(16)]
    biggest_rules = [{"matches": [{"path": {"type": "PathPrefix", "value": f"/{r}/{m}"},
                                   "headers": [{"name": f"x-{h}", "value": "!" * 4000 + " "} for h in range(16)]}
                                  for m in range(8)],
                      "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": header_values}}],
                      "backendRefs": [{"name": "svc", "port": 80}]} for r in range(16)]
    gateway_protocol = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                        "metadata": {"name": "evil", "namespace": "tenant"},
                        "spec": {"gatewayClassName": "c", "listeners": [
                            {"name": f"l{i}", "port": 8000 + i, "protocol": "a-" * 15_000 + "!"} for i in range(64)]}}
    return {
        "HTTPRoute, 16 header values of 4,095 ReDoS characters": _route(
            "tenant", "headers", rules=[{"filters": [{"type": "RequestHeaderModifier",
                                                      "requestHeaderModifier": {"set": header_values}}]}]),
        "HTTPRoute at the schema's maxima, ReDoS values everywhere": _route(
            "tenant", "maxima", hostnames=[f"h{i}.example.com" for i in range(16)], rules=biggest_rules),
        "Gateway, 64 listeners with a 30,001-character protocol": gateway_protocol,
        "HTTPRoute, a 27-character header value (the issue's case)": _route(
            "tenant", "short", rules=[{"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-A", "value": "!" * 26 + "\x00"}]}}]}]),
    }


def bench_objects(base: float, repeat: int) -> None:
    from validators.checks import Checks

    checks = Checks(schemas=SchemaSet.from_documents(crds()))
    state = MemoryState()
    print("\n2. Hostile objects through every validator (schema, CEL, rules, cross-object), worst of runs")
    for label, obj in hostile_objects().items():
        checks.check(Change(Operation.CREATE, obj), state)  # warm: the kind's schema and CEL compile once per process
        worst = worst_cpu = 0.0
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.thread_time()
            found = checks.check(Change(Operation.CREATE, obj), state)
            worst_cpu = max(worst_cpu, time.thread_time() - cpu)
            worst = max(worst, time.perf_counter() - started)
        codes = sorted({f.code for f in found})
        print(f"   {worst * 1000:8.1f} ms = {worst / base:7.2f} x floor (CPU {worst_cpu * 1000:7.1f} ms = "
              f"{worst_cpu / base:6.2f} x)  {label}  ({len(found)} findings: {', '.join(codes[:6])})")


def tenant_state(*, hostile: bool) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "edge", "namespace": "infra"},
         "spec": {"gatewayClassName": "c", "listeners": [
             {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}]
    for ns in ("alice", "bob"):
        objects += [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
                     "spec": {"ports": [{"name": "http", "port": 80}]}},
                    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                     "metadata": {"name": "web-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
                     "ports": [{"name": "http", "port": 8080}],
                     "endpoints": [{"addresses": [f"10.1.{n}.1"]} for n in range(3)]}]
    objects.append(_route("alice", "shop", hostnames=["shop.example.com"],
                          rules=[{"backendRefs": [{"name": "web", "port": 80}]}]))
    if hostile:
        objects += [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "big", "namespace": "mallory"},
                     "spec": {"ports": [{"name": "http", "port": 80}]}},
                    _route("mallory", "noisy", hostnames=["noisy.example.com"],
                           rules=[{"backendRefs": [{"name": "big", "port": 80}]}])]
        objects += [{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                     "metadata": {"name": f"big-{s}", "namespace": "mallory",
                                  "labels": {"kubernetes.io/service-name": "big"}},
                     "ports": [{"name": "http", "port": 8080}],
                     "endpoints": [{"addresses": [f"10.{100 + s}.{e // 250}.{e % 250 + 1}"]} for e in range(1000)]}
                    for s in range(20)]
    return objects


async def bench_tenant(binary: HAProxyBinary, base: float, repeat: int) -> None:
    bob = _route("bob", "blog", hostnames=["blog.example.com"], rules=[{"backendRefs": [{"name": "web", "port": 80}]}])
    print("\n3. An unrelated tenant's review (bob/blog) while mallory's Service has 20 x 1,000 endpoints")
    cases = [("no hostile tenant", False, Limits()),
             ("hostile tenant, default limits (500 servers)", True, Limits()),
             ("hostile tenant, no server limit (before)", True, Limits(servers_per_backend=10**9))]
    for label, hostile, limits in cases:
        gate = assembly.build_gate(binary, assembly.GateSettings(render={"limits": limits}, check_timeout=60))
        state = MemoryState(tenant_state(hostile=hostile), version=f"bench-{label}")
        checks, totals = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            verdict = await gate.review(Change(Operation.CREATE, bob), state=state, reload_note=False)
            totals.append(time.perf_counter() - started)
            checks.append(verdict.timings.get("check", float("nan")))
            assert verdict.allowed, verdict.message
        check, total = statistics.median(checks), statistics.median(totals)
        print(f"   haproxy -c {check * 1000:8.1f} ms = {check / base:6.2f} x floor; whole review "
              f"{total * 1000:8.1f} ms = {total / base:6.2f} x floor  {label}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare-re", action="store_true", help="time Python's re on the header pattern")
    parser.add_argument("--re-deadline", type=float, default=20.0)
    args = parser.parse_args()
    binary = await binaries.detect(None)
    base = await floor(Checker(binary), args.repeat)
    print(f"floor: haproxy -c of a trivial config = {base * 1000:.1f} ms (haproxy {binary.version})")
    bench_patterns(base)
    if args.compare_re:
        compare_re(args.re_deadline)
    bench_objects(base, args.repeat)
    await bench_tenant(binary, base, args.repeat)
    after = await floor(Checker(binary), args.repeat)
    print(f"\nfloor again at the end: {after * 1000:.1f} ms ({after / base:.2f} x the first: load drift)")


if __name__ == "__main__":
    asyncio.run(main())
