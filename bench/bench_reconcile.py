"""The reconcile gate at scale: one run's steps (audit, render, check, promote) at N routes, and a second
run after one route changed (the render is patched from the first run's where the change is local:
haproxy_check.render.patching; the audit re-judges only the objects whose content or reads changed).

    python3 bench/bench_reconcile.py [N ...]      (default 100 1000)

The change is an UPDATE of one route's header value (``bench_gate.route(i, variant=1)``), or with
``--hostname`` its hostname moved within its listener's wildcard.

Prints seconds per step, the audit's share and how many objects it judged again, measured in one run
(the machine is shared and noisy: compare the ratios, not the absolute numbers).
"""

from __future__ import annotations

import asyncio
import copy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_gate import objects
from bench.bench_gate import route as make_route
from haproxy_check.check import binaries
from haproxy_check.runtime.promotion import Promoter
from validators.objects import ref_of
from validators.states import MemoryState
from webhook import assembly, metrics
from webhook.reconcile import Reconciler

HOSTNAME = "--hostname" in sys.argv


def _renders() -> dict[str, float]:
    """routegate_reconcile_renders_total by ``how`` (empty on a tree without patched renders)."""
    counter = getattr(metrics, "RECONCILE_RENDERS", None)
    if counter is None:
        return {}
    return {sample.labels["how"]: sample.value for metric in counter.collect() for sample in metric.samples
            if sample.name.endswith("_total")}


async def main(sizes: list[int]) -> None:
    binary = await binaries.detect(None)
    # a long check timeout: on a loaded shared machine haproxy -c of 10,000 routes can take over the default 5 s
    gate = assembly.build_gate(binary, assembly.GateSettings(render={"stats_socket": "/var/run/haproxy.sock"},
                                                             check_timeout=60.0))
    print(f"haproxy {binary.version}")
    for n in sizes:
        objs = objects(n)
        with tempfile.TemporaryDirectory() as out:
            reconciler = Reconciler(gate, Promoter(Path(out)))
            started = time.perf_counter()
            first = await reconciler.reconcile(MemoryState(objs, version=f"{n}-a"))
            total = time.perf_counter() - started
            changed = copy.deepcopy(objs)
            k, route = next((k, o) for k, o in enumerate(changed) if o["kind"] == "HTTPRoute")
            if HOSTNAME:
                route["spec"]["hostnames"] = ["changed." + route["spec"]["hostnames"][0].split(".", 1)[1]]
            else:
                route = changed[k] = make_route(int(route["metadata"]["name"].rsplit("-", 1)[1]), variant=1)
            renders = _renders()
            started = time.perf_counter()
            second = await reconciler.reconcile(MemoryState(changed, version=f"{n}-b"))
            again = time.perf_counter() - started
            how = {h: v - renders.get(h, 0.0) for h, v in _renders().items() if v != renders.get(h, 0.0)}
        routes = sum(1 for o in objs if o["kind"] == "HTTPRoute")
        for label, outcome, seconds in (("first", first, total), ("one changed", second, again)):
            steps = "  ".join(f"{k} {v:.3f}s" for k, v in outcome.timings.items())
            share = outcome.timings.get("audit", 0.0) / seconds if seconds else 0.0
            print(f"{routes:>6} routes  {label:<12} {outcome.result:<9} total {seconds:.3f}s  {steps}  "
                  f"audit share {share:.0%}  judged {reconciler._audits.judged} reused {reconciler._audits.reused}  "
                  f"changed {ref_of(route)}  render {how}" if label != "first" else
                  f"{routes:>6} routes  {label:<12} {outcome.result:<9} total {seconds:.3f}s  {steps}  "
                  f"audit share {share:.0%}")


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:] if not a.startswith("--")] or [100, 1000]))
