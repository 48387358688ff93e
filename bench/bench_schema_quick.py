"""The schema check's OpenAPI part (prune, default, validate) old vs new, on every CRD object of a state.

Old: ``structural.apply`` then jsonschema's ``iter_errors``. New: the compiled prune/default
(``structural.compile_apply``) then the compiled yes/no check (``quickvalid``), jsonschema only for
objects it does not show clean. Also the whole ``schemas.check`` (which adds CEL) with ``quick=False``
and ``quick=True``. Both sides run in the same process, interleaved round by round (the machine is
shared and noisy), and the ratio is of the medians. The findings are compared while timing.

Run: ``python bench/bench_schema_quick.py [--state DIR | --routes 2000] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import bench_gate  # noqa: E402

from validators.schema import schemas, structural  # noqa: E402
from webhook.gate.assembly import load_schemas  # noqa: E402

Work = list[tuple[dict[str, Any], Any, str]]


def state_objects(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.state:
        found: list[dict[str, Any]] = []
        for path in sorted(Path(args.state).glob("*.json")):
            doc = json.loads(path.read_text())
            found += doc.get("items", [doc])
        return found
    return bench_gate.objects(args.routes)


def old_path(work: Work) -> list[int]:
    out = []
    for obj, schema, kind in work:
        entry = schemas.compiled(schema, kind=kind)
        value = structural.apply(obj, schema).value
        out.append(len(list(entry.validator.iter_errors(value))))
    return out


def new_path(work: Work) -> list[int]:
    out = []
    for obj, schema, kind in work:
        entry = schemas.compiled(schema, kind=kind)
        assert entry.shape is not None
        value = entry.shape(obj).value
        out.append(0 if entry.clean(value) else len(list(entry.validator.iter_errors(value))))
    return out


def median_ms(fn: Callable[[], object], samples: list[float]) -> object:
    start = time.perf_counter()
    result = fn()
    samples.append((time.perf_counter() - start) * 1000)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--state", help="a state directory (bench_gate.write_state); default: generated")
    parser.add_argument("--routes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--with-check", action="store_true", help="also time the whole schemas.check (CEL)")
    args = parser.parse_args()
    crds = load_schemas([])
    work: Work = []
    for obj in state_objects(args):
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        schema = crds.get(group, version, str(obj.get("kind")))
        if schema is not None:
            work.append((obj, schema, str(obj["kind"])))
    assert old_path(work) == new_path(work)  # warm-up (compiles), and the same error counts
    old: list[float] = []
    new: list[float] = []
    for _ in range(args.rounds):
        median_ms(lambda: old_path(work), old)
        median_ms(lambda: new_path(work), new)
    n = len(work)
    o, w = statistics.median(old), statistics.median(new)
    print(f"{n} CRD objects; prune+default+OpenAPI per object: old {o / n * 1000:.0f} us, "
          f"new {w / n * 1000:.0f} us, ratio {o / w:.1f}x (medians of {args.rounds} interleaved rounds)")
    if args.with_check:
        slow: list[float] = []
        quick: list[float] = []
        for _ in range(max(1, args.rounds // 2)):
            a = median_ms(lambda: [schemas.check(o, s, kind=k, quick=False) for o, s, k in work], slow)
            b = median_ms(lambda: [schemas.check(o, s, kind=k) for o, s, k in work], quick)
            assert a == b
        s, q = statistics.median(slow), statistics.median(quick)
        print(f"schemas.check (with CEL) per object: quick=False {s / n * 1000:.0f} us, "
              f"quick {q / n * 1000:.0f} us, ratio {s / q:.2f}x")


if __name__ == "__main__":
    main()
