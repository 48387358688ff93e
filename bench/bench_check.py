"""``routegate check`` on large inputs, this checkout beside another one (``--base``), measured in one run.

Two scenarios, each run as the CLI runs (a process per check, the default rule workers):

- **cost**: ``check -f`` of bench_render's ``objects(N)`` (per route: the HTTPRoute, 2 Services, 2
  EndpointSlices). Printed: the wall time, the time of the combined render + ``haproxy -c``
  (``Gate._checked``, timed inside the process), and the cost per input object and per route beyond
  that render and check, with the ratio base/this of that cost (issue 31's target: at least 3). The
  process runs as the ``routegate`` entry point runs it: it ends with ``os._exit`` once the report is
  out (a process that tore down its 50,000 objects paid about a second the command never pays).
  Also printed per tree: the wall time in phases (start, load, setup, render+check, after, report, exit:
  ``_phases``), so the time beyond render+check shows where it goes; the main thread's CPU time; and
  the CPU time of every process of the run (main, rule workers, ``haproxy -c``) less the render's
  thread and the checks' children: the per-object work in CPU seconds, which the load of a shared
  machine stretches far less than wall time (the wall ratio of one pair of runs moved 0.96x-1.7x with
  it). ``--repeat N`` alternates N runs of each tree and compares the medians.
- **state**: ``check --state`` of ``objects(N)`` stored, with ``--changed`` of its routes changed (one more
  rule each): the check of a pull request against the cluster, with its traffic diff and prediction.
  Printed: the wall time, render+check, the renders in all, the time beyond render+check and the ratio.
- **broken**: about ``--broken-objects`` objects of the same kind with two routes whose regex
  ``haproxy -c`` rejects (both in one map file: HAProxy names only the first). Printed: the wall time
  and the ``haproxy -c`` runs of the batch's settling (``Gate._checked`` calls), and the ratio.

Both checkouts must give the same report (text, one line per object with a finding, and the summary),
which the bench compares. The machine's load is printed: the figures are ratios measured in one run.

    python bench/bench_check.py --base /tmp/ccbase [--routes 10000] [--broken-objects 3000] [--only cost] [--repeat 3]

(``git worktree add /tmp/ccbase <commit>`` makes the base tree.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_render

# Run inside the checked checkout: the CLI as the ``routegate`` console entry runs it (``exit_when_done``:
# the process ends with ``os._exit`` once the report is out, without freeing what the run built), with
# Gate._checked timed. The figures are written just before that exit.
_DRIVER = r"""
import json, os, sys, time
imports = time.time()
from haproxy_check.render import rendering
try:  # this tree's layout (webhook in subpackages)
    from webhook.cli import checking
    from webhook.cli import routegate as cli
    from webhook.gate import gates, ruleworkers
except ImportError:  # a base tree from before the subpackages (e.g. ea1b916, issue 31's base)
    from webhook import checking, cli, gates, ruleworkers
figures = {"checked": 0.0, "checks": 0, "renders": 0, "imported": time.time(), "imports": imports,
           "render_cpu": 0.0, "check_children_cpu": 0.0}
def children_cpu():
    t = os.times()
    return t.children_user + t.children_system
render = rendering.Renderer.render
def counted(self, *args, **kwargs):
    figures["renders"] += 1
    cpu = time.thread_time()  # the render's own thread
    try:
        return render(self, *args, **kwargs)
    finally:
        figures["render_cpu"] += time.thread_time() - cpu
rendering.Renderer.render = counted
inner = gates.Gate._checked
async def timed(self, *args, **kwargs):
    started, children = time.perf_counter(), children_cpu()
    figures.setdefault("first_check", time.time())
    try:
        return await inner(self, *args, **kwargs)
    finally:
        figures["checked"] += time.perf_counter() - started
        # haproxy -c and its sandbox, reaped within the check (rule workers are reaped at the end)
        figures["check_children_cpu"] += children_cpu() - children
        figures["checks"] += 1
        figures["last_check"] = time.time()
gates.Gate._checked = timed
judge = checking.judge
async def judged(*args, **kwargs):
    figures.setdefault("judge", time.time())
    try:
        return await judge(*args, **kwargs)
    finally:
        figures["judged"] = time.time()
checking.judge = judged
def save(code):
    figures["code"] = code
    figures.setdefault("saved", time.time())
    figures["main_cpu"] = time.thread_time()  # this thread: everything but the render (a worker thread)
    ruleworkers.end_all()  # reaped, so that their CPU time is counted among the children's
    t = os.times()
    figures["tree_cpu"] = t.user + t.system + t.children_user + t.children_system
    with open(sys.argv[1], "w") as out:
        json.dump(figures, out)
exit_now = checking.exit_now
def saved_then_exit(code):
    save(code)
    exit_now(code)
checking.exit_now = saved_then_exit
code = cli.main(sys.argv[2:], exit_when_done=True)
sys.stdout.flush()
ruleworkers.end_all()
save(code)
"""

BROKEN_RULE = {"matches": [{"path": {"type": "RegularExpression", "value": "/a{2,1}"}}],
               "backendRefs": [{"name": "app0", "port": 80}]}


def broken_objects(count: int) -> list[Any]:
    """About ``count`` objects (5 per route) with two routes that ``haproxy -c`` rejects."""
    objects: list[Any] = bench_render.objects(max(2, count // 5))
    routes = [o for o in objects if o["kind"] == "HTTPRoute"]
    for route in (routes[len(routes) // 3], routes[2 * len(routes) // 3]):
        route["spec"]["rules"].append(json.loads(json.dumps(BROKEN_RULE)))
    return objects


def run(tree: str, path: str, workdir: str, *more: str) -> tuple[float, dict[str, Any], str]:
    figures = os.path.join(workdir, "figures.json")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    started, launched = time.perf_counter(), time.time()
    done = subprocess.run([sys.executable, "-c", _DRIVER, figures, "check", "-f", path, *more],
                          env=env, cwd=tree, capture_output=True, text=True)
    wall, ended = time.perf_counter() - started, time.time()
    if not os.path.exists(figures):
        raise SystemExit(f"{tree}: check failed: {done.stderr[-2000:]}")
    with open(figures) as f:
        got: dict[str, Any] = json.load(f)
    os.unlink(figures)
    got["phases"] = _phases(got, launched, ended)
    return wall, got, done.stdout


# The wall time of a run in consecutive phases (wall clock stamps taken in the driver), so that the time
# beyond render+check shows where it goes: every phase but "render+check" is part of it.
PHASES = ("start", "load", "setup", "render+check", "after", "report", "exit")


def _phases(got: dict[str, Any], launched: float, ended: float) -> dict[str, float]:
    """``start``: interpreter and the CLI's imports; ``load``: inputs read, duplicates, policies, the gate
    built; ``setup``: from judging's start to the first render (changes, states, the rules' warm-up, the
    rule workers' fork); ``render+check``: from the first render to the last check's end, less what of
    it no render or check took (counted in ``after``); ``after``: the rule workers' tail and the verdicts;
    ``report``: prediction, placing and writing the report; ``exit``: the process's end."""
    first, last = got.get("first_check", got["judged"]), got.get("last_check", got["judged"])
    checked = float(got["checked"])
    return {"start": got["imported"] - launched, "load": got["judge"] - got["imported"],
            "setup": first - got["judge"], "render+check": checked,
            "after": (last - first - checked) + got["judged"] - last,
            "report": got["saved"] - got["judged"], "exit": ended - got["saved"]}


def _cpu_beyond(got: dict[str, Any]) -> float:
    """The CPU time of the run's every process (this one's threads, its rule workers, haproxy -c) less the
    render's thread and the checks' children: the work beyond render and ``haproxy -c`` in CPU seconds,
    which a loaded machine does not stretch as it stretches wall time."""
    return float(got["tree_cpu"] - got["render_cpu"] - got["check_children_cpu"])


def _phase_line(phases: dict[str, float]) -> str:
    return ", ".join(f"{name} {phases[name]:.2f}" for name in PHASES)


def _changed(stored: list[Any], count: int) -> list[Any]:
    """``count`` stored routes, each with one more rule (a new path to the same backend): changes that
    a check of a pull request against the cluster (``--state``) judges, with traffic and a prediction."""
    routes = [o for o in stored if o["kind"] == "HTTPRoute"]
    out = []
    for route in routes[:: max(1, len(routes) // count)][:count]:
        copy = json.loads(json.dumps(route))
        rule = json.loads(json.dumps(copy["spec"]["rules"][0]))
        rule["matches"] = [{"path": {"type": "PathPrefix", "value": "/new"}}]
        copy["spec"]["rules"].append(rule)
        out.append(copy)
    return out


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write(objects: Sequence[Any], workdir: str, name: str) -> str:
    path = os.path.join(workdir, name)
    with open(path, "w") as out:
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, out)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the checkout to compare with (e.g. the commit before)")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--routes", type=int, default=10000)
    parser.add_argument("--broken-objects", type=int, default=3000)
    parser.add_argument("--only", choices=("cost", "broken", "state"))
    parser.add_argument("--changed", type=int, default=100, help="state: routes the inputs change")
    parser.add_argument("--repeat", type=int, default=1, help="cost: runs of each tree, alternating; medians compared")
    args = parser.parse_args()
    print(f"load: {_load()} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as workdir:
        if args.only in (None, "cost"):
            objects = bench_render.objects(args.routes)
            path = write(objects, workdir, "cost.json")
            beyond: dict[str, float] = {}
            main_cpu: dict[str, float] = {}
            cpu_beyond: dict[str, float] = {}
            reports: dict[str, str] = {}
            runs: dict[str, list[tuple[float, float, float, dict[str, Any]]]] = {"base": [], "this": []}
            # --repeat: the runs alternate (base, this, base, ...) so both meet the same load; each tree's
            # median run (by the time beyond render+check) is printed and compared
            for _ in range(args.repeat):
                for label, tree in (("base", args.base), ("this", args.tree)):
                    wall, got, reports[label] = run(tree, path, workdir)
                    runs[label].append((wall - got["checked"], wall, got["main_cpu"], got))
                    if args.repeat > 1:
                        print(f"cost   {label} run: beyond render+check {wall - got['checked']:.2f} s; "
                              f"{_phase_line(got['phases'])}; load now {_load()}")
            for label in ("base", "this"):
                runs[label].sort(key=lambda r: r[0])
                beyond[label], wall, main_cpu[label], got = runs[label][len(runs[label]) // 2]
                print(f"cost   {label}: {len(objects)} objects ({args.routes} routes): wall {wall:6.2f} s, "
                      f"render+check {wall - beyond[label]:6.2f} s; "
                      f"beyond them {beyond[label] / len(objects) * 1e3:.3f} ms/object, "
                      f"{beyond[label] / args.routes * 1e3:.3f} ms/route; CPU of the main thread "
                      f"(start, loading, verdicts, report; not the render, not the rule workers) "
                      f"{main_cpu[label]:6.2f} s")
                print(f"cost   {label} phases (s): {_phase_line(got['phases'])}")
                cpu_beyond[label] = _cpu_beyond(got)
                print(f"cost   {label} CPU (s) of every process (main, rule workers, haproxy -c): "
                      f"{got['tree_cpu']:.2f}, of which the render {got['render_cpu']:.2f} and haproxy -c "
                      f"{got['check_children_cpu']:.2f}; beyond them {cpu_beyond[label]:.2f} "
                      f"({cpu_beyond[label] / args.routes * 1e3:.3f} ms/route)")
            print(f"cost   per-object cost beyond render+check, base/this: {beyond['base'] / beyond['this']:.2f}x "
                  f"(target >= 3); main thread CPU base/this: {main_cpu['base'] / main_cpu['this']:.2f}x; "
                  f"CPU beyond render and haproxy -c base/this: {cpu_beyond['base'] / cpu_beyond['this']:.2f}x; "
                  f"reports {'equal' if reports['this'] == reports['base'] else 'DIFFER'}; load now {_load()}")
        if args.only in (None, "state"):
            stored = bench_render.objects(args.routes)
            state = write(stored, workdir, "state.json")
            changed = _changed(stored, args.changed)
            path = write(changed, workdir, "changed.json")
            spent: dict[str, float] = {}
            reports = {}
            for label, tree in (("base", args.base), ("this", args.tree)):
                wall, got, reports[label] = run(tree, path, workdir, "--state", state)
                spent[label] = wall - got["checked"]
                print(f"state  {label}: {len(changed)} changed routes on {args.routes} stored: wall {wall:6.2f} s, "
                      f"render+check {got['checked']:6.2f} s, {got['renders']} renders in all; beyond render+check "
                      f"{spent[label]:6.2f} s")
            print(f"state  beyond render+check, base/this: {spent['base'] / spent['this']:.2f}x; "
                  f"reports {'equal' if reports['this'] == reports['base'] else 'DIFFER'}; load now {_load()}")
        if args.only in (None, "broken"):
            objects = broken_objects(args.broken_objects)
            path = write(objects, workdir, "broken.json")
            walls: dict[str, float] = {}
            reports = {}
            for label, tree in (("base", args.base), ("this", args.tree)):
                walls[label], got, reports[label] = run(tree, path, workdir)
                print(f"broken {label}: {len(objects)} objects, 2 rejected routes: wall {walls[label]:6.2f} s, "
                      f"{got['checks']} combined renders+checks ({got['checked']:.2f} s), exit {got['code']}")
            print(f"broken this/base wall: {walls['this'] / walls['base']:.2f}x; "
                  f"reports {'equal' if reports['this'] == reports['base'] else 'DIFFER'}")


if __name__ == "__main__":
    main()
