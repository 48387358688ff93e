"""Median time of the schema check for one HTTPRoute (prune, default, OpenAPI, CEL), and of Checks.

Uses the captured HTTPRoute of the AdmissionReview fixtures and the Gateway API v1.6.1 experimental
CRDs beside the checkout. Run: ``python bench/bench_schema.py [--rounds 200]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from validators.changes import Change, Operation
from validators.checks import Checks
from validators.schema import schemas, structural
from validators.schema.crds import SchemaSet
from validators.states import MemoryState


def shared() -> Path:
    for candidate in (Path(__file__).resolve().parents[1].parent / "shared", Path("/work/shared")):
        if candidate.is_dir():
            return candidate
    raise SystemExit("shared/ (Gateway API CRDs, fixtures) is not beside the checkout")


def timed(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    fn()  # warm-up: compiles and caches the validator
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    base = shared()
    start = time.perf_counter()
    crds = SchemaSet.from_documents(
        yaml.safe_load_all((base / "gateway-api/v1.6.1/experimental-install.yaml").read_text()))
    load_ms = (time.perf_counter() - start) * 1000
    review = json.loads((base / "fixtures/admission-reviews/03-httproute-create.json").read_text())
    route = review["request"]["object"]
    schema = crds.get("gateway.networking.k8s.io", "v1", "HTTPRoute")
    assert schema is not None
    start = time.perf_counter()
    schemas.compiled(schema, kind="HTTPRoute")
    compile_ms = (time.perf_counter() - start) * 1000
    print(f"load CRDs (YAML parse + index): {load_ms:.0f} ms; "
          f"compile HTTPRoute schema + CEL: {compile_ms:.0f} ms")
    entry = schemas.compiled(schema, kind="HTTPRoute")
    med, p90 = timed(lambda: list(entry.validator.iter_errors(structural.apply(route, schema).value)),
                     args.rounds)
    print(f"prune+default+OpenAPI only (no CEL): median {med:.2f} ms, p90 {p90:.2f} ms")
    med, p90 = timed(lambda: schemas.check(route, schema, kind="HTTPRoute"), args.rounds)
    print(f"schema check, one HTTPRoute (prune+default+OpenAPI+CEL): median {med:.2f} ms, p90 {p90:.2f} ms")
    checks = Checks(schemas=crds, cross_object=False)
    change, state = Change(Operation.CREATE, route), MemoryState()
    med, p90 = timed(lambda: checks.check(change, state), args.rounds)
    print(f"Checks.check without cross-object: median {med:.2f} ms, p90 {p90:.2f} ms")


if __name__ == "__main__":
    main()
