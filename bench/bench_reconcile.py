"""The reconcile gate at scale: one run's steps (audit, render, check, promote, statuses) at N routes, and
runs after one route changed, with the second state shaped as the cluster's watch stores hand it out (every
unchanged object shared with the previous snapshot, which it names with the refs written since:
``ClusterSnapshot.prior``), so the audit and the statuses recompute only what the change touched.

    python3 bench/bench_reconcile.py [--changes K] [--check-timeout S] [--hostname] [N ...]

(default 100 1000; K = 3 one-route changes; S = 60 s). Each change is an UPDATE of one route's header value
(``bench_gate.route(i, variant=k + 1)``: the render is patched from the previous run's,
haproxy_check.render.patching), or with ``--hostname`` its hostname replaced.

Prints seconds per step, and for the audit and statuses steps the median over the K changes with how
many objects were judged or computed again, the machine's load beside. Measured in one run (the machine
is shared and noisy: compare trees alternated in one window, and ratios, not absolute numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_gate import objects
from bench.bench_gate import route as make_route
from haproxy_check.check import binaries
from haproxy_check.runtime.promotion import Promoter
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState, State
from webhook import metrics
from webhook.gate import assembly
from webhook.reconcile.reconciler import Reconciler

TREE = Path(__file__).resolve().parents[1]


class LinkedState(MemoryState):
    """A watch snapshot's shape: objects shared with the previous version, which it names (``prior``)."""

    def __init__(self, objs: Sequence[Obj], version: str, prior: tuple[State, frozenset[Ref]] | None = None) -> None:
        super().__init__(objs, version=version)
        self._prior = prior

    def prior(self) -> tuple[State, frozenset[Ref]] | None:
        return self._prior


def _renders() -> dict[str, float]:
    """routegate_reconcile_renders_total by ``how`` (empty on a tree without patched renders)."""
    counter = getattr(metrics, "RECONCILE_RENDERS", None)
    if counter is None:
        return {}
    return {sample.labels["how"]: sample.value for metric in counter.collect() for sample in metric.samples
            if sample.name.endswith("_total")}


def _labelled(name: str) -> dict[str, float]:
    counter = getattr(metrics, name, None)
    if counter is None:
        return {}
    return {"/".join(sample.labels.values()): sample.value for metric in counter.collect()
            for sample in metric.samples if sample.name.endswith("_total")}


def _full_checks() -> dict[str, float]:
    return _labelled("RECONCILE_FULL_CHECKS")


def _checks() -> dict[str, float]:
    return _labelled("RECONCILE_CHECKS")


def _counts(reconciler: Reconciler) -> str:
    audits: Any = reconciler._audits
    statuses: Any = getattr(reconciler, "_promoted_statuses", None)
    judged = f"judged {audits.judged} reused {audits.reused}"
    return judged + (f"  statuses computed {statuses.computed}" if statuses is not None else "")


async def main(sizes: list[int], changes: int, check_timeout: float, hostname: bool) -> None:
    binary = await binaries.detect(None)
    # a generous check deadline: on a loaded machine a 10,000-route haproxy -c passes 5 s, and an undecided
    # run stops before its statuses
    gate = assembly.build_gate(binary, assembly.GateSettings(render={"stats_socket": "/var/run/haproxy.sock"},
                                                             check_timeout=check_timeout))
    print(f"haproxy {binary.version}  tree {TREE}")
    for n in sizes:
        objs = objects(n)
        with tempfile.TemporaryDirectory() as out:
            reconciler = Reconciler(gate, Promoter(Path(out)))
            started = time.perf_counter()
            state: State = LinkedState(objs, f"{n}-0")
            first = await reconciler.reconcile(state)
            total = time.perf_counter() - started
            routes = [i for i, o in enumerate(objs) if o["kind"] == "HTTPRoute"]
            print(f"{len(routes):>6} routes  first        {first.result:<9} total {total:.3f}s  "
                  + "  ".join(f"{k} {v:.3f}s" for k, v in first.timings.items()))
            audit, status, totals = [], [], []
            writes: dict[str, list[float]] = {"serialize": [], "promote": [], "record": []}
            for k in range(changes):
                at = routes[(k * 7919) % len(routes)]
                changed = list(objs)
                if hostname:
                    route = copy.deepcopy(changed[at])
                    route["spec"]["hostnames"] = [f"changed{k}.example.com"]
                else:
                    route = make_route(int(changed[at]["metadata"]["name"].rsplit("-", 1)[1]), variant=k + 1)
                changed[at] = route
                renders = _renders()
                state = LinkedState(changed, f"{n}-{k + 1}", (state, frozenset({ref_of(route)})))
                started = time.perf_counter()
                outcome = await reconciler.reconcile(state)
                totals.append(time.perf_counter() - started)
                audit.append(outcome.timings.get("audit", 0.0))
                status.append(outcome.timings.get("statuses", 0.0))
                for step, seconds in writes.items():
                    seconds.append(outcome.timings.get(step, 0.0))
                objs = changed
                print(f"{len(routes):>6} routes  one changed  {outcome.result:<9} total {totals[-1]:.3f}s  "
                      + "  ".join(f"{k} {v:.3f}s" for k, v in outcome.timings.items())
                      + f"  {_counts(reconciler)}  changed {ref_of(route)}  render "
                      + str({h: v - renders.get(h, 0.0) for h, v in _renders().items() if v != renders.get(h, 0.0)}))
            mark = time.perf_counter()
            background = getattr(reconciler, "full_checks", None)  # a tree before the delta check has none
            if background is not None:
                await background.idle()  # the background full checks of the delta-checked promotions
            print(f"{len(routes):>6} routes  background full checks {_full_checks()} (waited "
                  f"{time.perf_counter() - mark:.3f}s after the last run), hot-path checks {_checks()}")
            load = os.getloadavg()[0]
            print(f"{len(routes):>6} routes  one changed, median of {changes}: audit {statistics.median(audit):.3f}s  "
                  f"statuses {statistics.median(status):.3f}s  "
                  + "".join(f"{step} {statistics.median(seconds):.3f}s  " for step, seconds in writes.items())
                  + f"run {statistics.median(totals):.3f}s  "
                  f"load {load:.1f}  max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--check-timeout", type=float, default=60.0)
    parser.add_argument("--hostname", action="store_true", help="replace a hostname instead of a header value")
    parser.add_argument("sizes", nargs="*", type=int)
    args = parser.parse_args()
    asyncio.run(main(args.sizes or [100, 1000], args.changes, args.check_timeout, args.hostname))
