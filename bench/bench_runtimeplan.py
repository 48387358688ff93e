"""What the runtime plan costs next to the render it follows: the frame digest every render records,
a render with the previous description (stable slots), and plan + stabilize between two renders.

For each size (``bench_render.realistic`` states), one EndpointSlice moves one endpoint; printed, best
of ``--repeat`` in one run (the machine is shared and noisy, so ratios, not absolute numbers, matter):
the incremental render, the same render with ``previous=``, the frame digest alone, and
``runtimeplans.plan(old, slots.stabilize(new, old))``, each with its ratio to the incremental render.

Run: ``python bench/bench_runtimeplan.py [--sizes 100,1000,5000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from typing import Any

from bench.bench_render import realistic
from haproxy_check.render.rendering import Renderer
from haproxy_check.runtime import frames, runtimeplans, slots
from validators.states import MemoryState


def best(repeat: int, run: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def moved(objs: list[Any]) -> list[Any]:
    out = copy.deepcopy(objs)
    eps = next(o for o in out if o["kind"] == "EndpointSlice")
    eps["endpoints"][0]["addresses"] = ["10.250.0.1"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'routes':>7} {'render':>9} {'+previous':>10} {'frame':>9} {'plan':>9}  (ratios to render)")
    for n in (int(s) for s in args.sizes.split(",")):
        measure(n, args.repeat)


def measure(n: int, repeat: int) -> None:
    objs = realistic(n)
    renderer = Renderer()
    old = renderer.render(MemoryState(objs))
    state = MemoryState(moved(objs))
    renderer.render(state)  # warm the cache for the moved slice's routes
    plain = best(repeat, lambda: renderer.render(state))
    new = renderer.render(state, previous=old.description)
    stable = best(repeat, lambda: renderer.render(state, previous=old.description))
    cfg = new.files["haproxy.cfg"].decode()
    names = [b.name for b in new.description.backends], [p.name for p in new.description.profiles]
    frame = best(repeat, lambda: frames.digest(cfg, *names))
    unstable = renderer.render(state)
    planned = best(repeat, lambda: runtimeplans.plan(
        old.description, slots.stabilize(unstable.description, old.description), dataplane_version=(3, 4)))
    plan = runtimeplans.plan(old.description, new.description, dataplane_version=(3, 4))
    print(f"{n:>7} {plain * 1000:>7.1f}ms {stable / plain:>9.2f}x {frame / plain:>8.1%} {planned / plain:>8.1%}"
          f"  -> {plan.action}, {len(plan.commands)} command(s)")


if __name__ == "__main__":
    main()
