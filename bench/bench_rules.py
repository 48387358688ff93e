"""The per-object rules, cross-object checks and statuses ``routegate check`` runs for every input,
timed over every object of a generated state: this tree against a baseline tree, in one process.

    python3 bench/bench_rules.py --sizes 2000 --baseline /tmp/base   # a tree holding an older validators/

Each input is judged the way ``routegate check`` judges it: rules.run on the object against the state
of all the other inputs, Checks._cross on it put back, statuses.status_of against the combined state.
Both trees must give the same findings and statuses (checked); the figures are per-phase seconds and
the baseline/this ratio, medians of rounds that alternate the two trees (the machine is shared), in
CPU seconds of the thread (time.thread_time: the other processes on the machine count less).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import bench_gate  # noqa: E402

MODULES = ("validators.rules", "validators.checks", "validators.states", "validators.changes",
           "validators.contexts", "validators.enforcement", "validators.crossobject.statuses",
           "validators.objects")


def load_tree(tree: Path | None) -> dict[str, ModuleType]:
    """The validators modules of ``tree`` (None: this one), kept apart from whatever else is loaded: the
    modules bind their imports at load time, so both trees can run side by side."""
    if tree is None:
        return {name: importlib.import_module(name) for name in MODULES}
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "validators" or k.startswith("validators.")}
    sys.path.insert(0, str(tree))
    try:
        mods = {name: importlib.import_module(name) for name in MODULES}
    finally:
        sys.path.remove(str(tree))
        for k in [k for k in sys.modules if k == "validators" or k.startswith("validators.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    return mods


def defaulted_objects(objs: list[dict[str, Any]]) -> list[Any]:
    """Each object as the schema step leaves it (rules and cross-object checks see that one)."""
    from validators.changes import Change, Operation
    from validators.checks import Checks
    from validators.objects import REVIEWED_KINDS
    from webhook.gate.assembly import load_schemas

    checks = Checks(schemas=load_schemas(()))
    return [checks.defaulted(Change(Operation.CREATE, o)) if o["kind"] in REVIEWED_KINDS else None for o in objs]


def judge_all(m: dict[str, ModuleType], objs: list[dict[str, Any]], defaulted: list[Any],
              clock: Callable[[], float] = time.thread_time) -> tuple[dict[str, float], list[Any]]:
    states, changes, contexts = m["validators.states"], m["validators.changes"], m["validators.contexts"]
    Change, Operation = changes.Change, changes.Operation
    rules, statuses = m["validators.rules"], m["validators.crossobject.statuses"]
    checks = m["validators.checks"].Checks(schemas=None)
    limits = m["validators.enforcement"].Enforcement().limits
    reviewed = m["validators.objects"].REVIEWED_KINDS
    everything = states.MemoryState(objs, version="check")
    items = [(o, d, states.Overlay(everything, Change(Operation.DELETE, None, o)))
             for o, d in zip(objs, defaulted, strict=True) if o["kind"] in reviewed]
    out: list[Any] = []
    spent = {"rules": 0.0, "cross": 0.0, "status": 0.0}
    for obj, d, state in items:
        change = Change(Operation.CREATE, obj, None, dry_run=True)
        ctx = contexts.Context(state=state, haproxy_version=(2, 8), http_ports=(80, 443), old=None, limits=limits)
        t0 = clock()
        found = rules.run(d, ctx)
        t1 = clock()
        cross = list(checks._cross(change, d, state))
        t2 = clock()
        status = statuses.status_of(obj, everything) if obj["kind"] in statuses.STATUS_KINDS else None
        t3 = clock()
        spent["rules"] += t1 - t0
        spent["cross"] += t2 - t1
        spent["status"] += t3 - t2
        out.append(([_plain(f) for f in found], [_plain(f) for f in cross], status))
    spent["total"] = sum(spent.values())
    return spent, out


def _plain(f: Any) -> tuple[Any, ...]:
    return (f.code, str(f.severity), f.path, f.message, f.subject, f.about)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000")
    parser.add_argument("--baseline", type=Path, help="a tree with the validators package to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    new = load_tree(None)
    old = load_tree(args.baseline) if args.baseline else None
    for n in (int(s) for s in args.sizes.split(",")):
        objs = bench_gate.objects(n)
        defaulted = defaulted_objects(objs)
        runs: dict[str, list[dict[str, float]]] = {"new": [], "old": []}
        for k in range(args.rounds):
            if old is not None and k % 2:  # every other round the baseline goes first
                spent_old, want = judge_all(old, objs, defaulted)
                runs["old"].append(spent_old)
            spent, got = judge_all(new, objs, defaulted)
            runs["new"].append(spent)
            if old is not None:
                if not k % 2:
                    spent_old, want = judge_all(old, objs, defaulted)
                    runs["old"].append(spent_old)
                if got != want:
                    bad = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
                    raise SystemExit(f"{n} routes: input {bad} differs:\n  new {got[bad]}\n  old {want[bad]}")
        for phase in ("rules", "cross", "status", "total"):
            now = statistics.median(r[phase] for r in runs["new"])
            line = f"{n} routes {phase:>6}: this {now:7.3f} s"
            if runs["old"]:
                before = statistics.median(r[phase] for r in runs["old"])
                ratios = [o[phase] / max(r[phase], 1e-9) for o, r in zip(runs["old"], runs["new"], strict=True)]
                line += f"  baseline {before:7.3f} s  baseline/this {statistics.median(ratios):5.2f}x"
            print(line, flush=True)


if __name__ == "__main__":
    main()
