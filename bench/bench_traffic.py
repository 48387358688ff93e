"""The long profile of the routing-table differential test (tests/render/test_traffic_live.py).

Run: ``python bench/bench_traffic.py [--examples 200] [--binaries PATH,...]`` (root: it probes inside a
private network namespace made with ``unshare -n``).

For each HAProxy binary (default: 2.8 and, where present, ``.haproxy3/haproxy``), hypothesis draws
``--examples`` states and changes (Gateways sharing a port on pod ports, listener hostnames, wildcard
and exact hosts, header and method matches, cross-namespace backends through a ReferenceGrant), runs
the configuration before and after the change in a real HAProxy, sends a request for every request
class of both routing tables plus requests that should match nothing, and compares the answering
Service (or status) with the table's. The ``l4`` profile does the same for TLS connections by server
name (passthrough, Terminate, names an HTTPS listener keeps), TCP ports and custom Routes. Printed per
binary and profile: the states (two per example), the probes sent, the request classes covered, and
every disagreement (a bug in the model) with its request.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from haproxy_check.check import binaries  # noqa: E402
from tests.render.test_traffic_live import l4_scenarios, run_scenario, scenarios, unshare_works  # noqa: E402

PROFILES = {"http": scenarios, "l4": l4_scenarios}


def profile(binary: str, examples: int, work: Path, which: str = "http") -> dict[str, Any]:
    totals: dict[str, Any] = {"examples": 0, "states": 0, "probes": 0, "classes": 0, "connections": 0,
                              "disagreements": []}

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(PROFILES[which]())
    def run(scenario: Any) -> None:
        n = totals["examples"]
        totals["examples"] += 1
        try:
            before, after = scenario
            counts = run_scenario(binary, before, after, work / f"s{n}")
        except AssertionError as exc:  # a disagreement: kept, and the profile goes on
            totals["disagreements"].append(str(exc)[:2000])
            return
        totals["states"] += 2
        totals["probes"] += 2 * counts["requests"]
        totals["classes"] += counts["classes"]
        totals["connections"] += 2 * counts["connections"]

    run()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=200, help="scenarios per binary (default 200)")
    parser.add_argument("--profiles", default="http,l4",
                        help="http (HTTP routes, Gateways sharing ports), l4 (TLS by server name, TCP, custom Routes)")
    parser.add_argument("--binaries", default="", help="comma-separated haproxy paths (default: 2.8 and .haproxy3)")
    args = parser.parse_args()
    if not unshare_works():
        raise SystemExit("unshare -n is needed (run as root)")
    if args.binaries:
        paths = args.binaries.split(",")
    else:
        import asyncio

        paths = [asyncio.run(binaries.detect(None)).path]
        if (ROOT / ".haproxy3" / "haproxy").is_file():
            paths.append(str(ROOT / ".haproxy3" / "haproxy"))
    for path in paths:
        version = subprocess.run([path, "-v"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
        for which in args.profiles.split(","):
            with tempfile.TemporaryDirectory(prefix="bench-traffic-") as tmp:
                started = time.perf_counter()
                got = profile(path, args.examples, Path(tmp), which)
                took = time.perf_counter() - started
            print(f"{version} [{which}]: {got['examples']} scenarios, {got['states']} states run, {got['probes']} "
                  f"probes ({got['connections']} TLS/TCP connections), {got['classes']} request classes; "
                  f"{len(got['disagreements'])} disagreements; {took:.0f} s", flush=True)
        for text in got["disagreements"]:
            print(f"  disagreement: {text}", flush=True)


if __name__ == "__main__":
    main()
