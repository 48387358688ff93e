"""The reconcile gate at scale: one run's steps (audit, render, check, promote) at N routes, and a second
run after one route changed (the incremental renderer reuses every other route, and the audit re-judges
only the objects whose content or reads changed).

    python3 bench/bench_reconcile.py [N ...]      (default 100 1000)

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
from haproxy_check.check import binaries
from haproxy_check.runtime.promotion import Promoter
from validators.objects import ref_of
from validators.states import MemoryState
from webhook import assembly
from webhook.reconcile import Reconciler


async def main(sizes: list[int]) -> None:
    binary = await binaries.detect(None)
    gate = assembly.build_gate(binary, assembly.GateSettings(render={"stats_socket": "/var/run/haproxy.sock"}))
    print(f"haproxy {binary.version}")
    for n in sizes:
        objs = objects(n)
        with tempfile.TemporaryDirectory() as out:
            reconciler = Reconciler(gate, Promoter(Path(out)))
            started = time.perf_counter()
            first = await reconciler.reconcile(MemoryState(objs, version=f"{n}-a"))
            total = time.perf_counter() - started
            changed = copy.deepcopy(objs)
            route = next(o for o in changed if o["kind"] == "HTTPRoute")
            route["spec"]["hostnames"] = ["changed.example.com"]
            started = time.perf_counter()
            second = await reconciler.reconcile(MemoryState(changed, version=f"{n}-b"))
            again = time.perf_counter() - started
        routes = sum(1 for o in objs if o["kind"] == "HTTPRoute")
        for label, outcome, seconds in (("first", first, total), ("one changed", second, again)):
            steps = "  ".join(f"{k} {v:.3f}s" for k, v in outcome.timings.items())
            share = outcome.timings.get("audit", 0.0) / seconds if seconds else 0.0
            print(f"{routes:>6} routes  {label:<12} {outcome.result:<9} total {seconds:.3f}s  {steps}  "
                  f"audit share {share:.0%}  judged {reconciler._audits.judged} reused {reconciler._audits.reused}  "
                  f"changed {ref_of(route)}" if label != "first" else
                  f"{routes:>6} routes  {label:<12} {outcome.result:<9} total {seconds:.3f}s  {steps}  "
                  f"audit share {share:.0%}")


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [100, 1000]))
