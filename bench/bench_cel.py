"""Cost of offline CEL: compiling every rule of the Gateway API bundles, and judging one object.

Prints, per engine: the time to build the engine, to compile all rules of each bundle, and the
median/p90 of evaluating a typical HTTPRoute (4 rules, filters, backendRefs), a 16-listener Gateway
and a TLSRoute against the v1.6.1 standard CRDs. Objects are defaulted first, as the API server does.
Run: ``python bench/bench_cel.py [--crds-dir ../shared/gateway-api/v1.6.1] [--runs 200]``.

``--state DIR`` (a state written by ``bench_gate.write_state``) instead times ``CelValidator.validate``
on every object of the state that has a schema (the bundled CRDs, pruned and defaulted as
``schemas.check`` hands them over) against the original per-rule walk kept in
``tests/validators/celreference.py``: CPU time of alternating passes in this one process, and whether
their findings agree. Run from the repository root: ``python bench/bench_cel.py --state /tmp/p2/s2000``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from validators.cel import celchecks, celengines

HERE = Path(__file__).resolve().parents[1]
DEFAULT_DIRS = (HERE.parent / "shared" / "gateway-api" / "v1.6.1", Path("/work/shared/gateway-api/v1.6.1"))


def load(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            for version in doc["spec"]["versions"]:
                out[(doc["spec"]["names"]["kind"], version["name"])] = version["schema"]["openAPIV3Schema"]
    return out


def defaulted(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        for name, item in value.items():
            if name in props:
                defaulted(item, props[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            defaulted(item, schema["items"])
    return value


def httproute() -> dict[str, Any]:
    svc = {"name": "svc", "port": 8080}
    header = {"type": "RequestHeaderModifier",
              "requestHeaderModifier": {"set": [{"name": "X-A", "value": "1"}]}}
    rules = [
        {"matches": [{"path": {"type": "PathPrefix", "value": f"/api/v{i}"}, "headers": [{"name": "X-T",
                                                                                        "value": "a"}]}],
         "filters": [header], "backendRefs": [svc, {**svc, "name": "canary", "weight": 10}],
         "timeouts": {"request": "10s", "backendRequest": "5s"}}
        for i in range(3)
    ]
    rewrite = {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}
    rules.append({"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
                  "filters": [{"type": "URLRewrite", "urlRewrite": rewrite}], "backendRefs": [svc]})
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "bench", "namespace": "bench"},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "https"}], "hostnames": ["app.example.com"],
                     "rules": rules}}


def gateway() -> dict[str, Any]:
    listeners = [{"name": f"l{i}", "port": 443, "protocol": "HTTPS", "hostname": f"h{i}.example.com",
                  "tls": {"certificateRefs": [{"name": f"cert-{i}"}]}} for i in range(16)]
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "bench"},
            "spec": {"gatewayClassName": "haproxy", "listeners": listeners}}


def tlsroute() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
            "metadata": {"name": "t", "namespace": "bench"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com", "*.b.example.com"],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]}}


def timed(fn: Any, runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9)]


def state_objects(state: Path) -> list[tuple[celchecks.CelValidator, Any]]:
    """(validator, pruned and defaulted object) for every object of ``state`` with a bundled schema."""
    import json

    from validators.schema import schemas, structural
    from webhook.gate import assembly

    schema_set = assembly.load_schemas([])
    out = []
    for path in sorted(state.glob("*.json")):
        for obj in json.loads(path.read_text()).get("items", []):
            group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
            schema = schema_set.get(group, version, str(obj.get("kind")))
            if schema is None:
                continue
            cel = schemas.compiled(schema, kind=obj["kind"]).cel
            if isinstance(cel, celchecks.CelValidator):
                out.append((cel, structural.apply(obj, schema).value))
    return out


def compare_on_state(state: Path, passes: int) -> None:
    sys.path.insert(0, str(HERE))
    from tests.validators.celreference import ReferenceValidator

    work = state_objects(state)
    references = {id(v): ReferenceValidator(v) for v, _ in work}
    differ = sum(1 for v, obj in work if v.validate(obj) != references[id(v)].validate(obj))  # also warms up
    old, new = [], []
    for _ in range(passes):
        start = time.thread_time()
        for v, obj in work:
            references[id(v)].validate(obj)
        old.append(time.thread_time() - start)
        start = time.thread_time()
        for v, obj in work:
            v.validate(obj)
        new.append(time.thread_time() - start)
    n = len(work)
    print(f"{n} objects with CEL rules in {state}; CPU seconds per pass (min of {passes} alternating passes):")
    print(f"  per-rule walk (reference) {min(old):.3f}s = {min(old) / n * 1e6:.0f} us/object")
    print(f"  CelValidator.validate     {min(new):.3f}s = {min(new) / n * 1e6:.0f} us/object")
    print(f"  ratio {min(old) / min(new):.2f}x (median pass {statistics.median(old) / statistics.median(new):.2f}x); "
          f"objects whose findings differ: {differ}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--crds-dir", type=Path, default=next((d for d in DEFAULT_DIRS if d.is_dir()), None))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--state", type=Path, help="time validate on every object of this state instead")
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    if args.state is not None:
        compare_on_state(args.state, args.passes)
        return
    if args.crds_dir is None:
        raise SystemExit("Gateway API CRDs not found; pass --crds-dir")
    bundles = {name: load(args.crds_dir / f"{name}-install.yaml") for name in ("standard", "experimental")}
    for make in (celengines.CppEngine, celengines.RustEngine):
        start = time.perf_counter()
        engine = make()
        print(f"{engine.name}: engine built in {(time.perf_counter() - start) * 1e3:.1f} ms")
        compiled: dict[tuple[str, str], celchecks.CelValidator] = {}
        for name, schemas in bundles.items():
            start = time.perf_counter()
            validators = {key: celchecks.CelValidator.compile(s, kind=key[0], engine=engine)
                          for key, s in schemas.items()}
            took = time.perf_counter() - start
            rules = sum(v.rule_count for v in validators.values())
            errors = sum(len(v.compile_errors) for v in validators.values())
            print(f"  compile {name:12s} {rules:4d} rules in {len(schemas):2d} CRD versions: "
                  f"{took * 1e3:7.1f} ms ({took / max(rules, 1) * 1e6:.0f} us/rule, {errors} compile errors)")
            if name == "standard":
                compiled = validators
        for obj in (httproute(), gateway(), tlsroute()):
            kind = obj["kind"]
            validator = compiled[(kind, "v1")]
            ready = defaulted(copy.deepcopy(obj), bundles["standard"][(kind, "v1")])
            findings = validator.validate(ready)
            median, p90 = timed(lambda v=validator, o=ready: v.validate(o), args.runs)
            print(f"  evaluate {kind:10s}: median {median * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms"
                  f" ({len(findings)} findings)")


if __name__ == "__main__":
    main()
