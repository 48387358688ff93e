"""Objects for the real CRDs (Gateway API v1.6.1 experimental channel and the Route CRD), drawn from their
schemas and the captured AdmissionReview fixtures, then mutated: wrong types, nulls, out-of-range numbers,
strings that miss patterns and formats or run past maxLength, duplicate list-map keys, unknown fields,
missing required fields. Mostly near-valid, so each example exercises one or two problems."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st
from validatorbuilders import fixture_requests, need

from validators.schema.crds import SchemaKey, SchemaSet
from validators.schema.schemaformats import FORMATS, go_pattern

ROUTE_CRD = Path(__file__).resolve().parents[2] / "manifests" / "base" / "route-crd.yaml"


@functools.cache
def crd_schemas() -> SchemaSet:
    docs = list(yaml.safe_load_all(need("gateway-api", "v1.6.1", "experimental-install.yaml").read_text()))
    docs += list(yaml.safe_load_all(ROUTE_CRD.read_text()))
    return SchemaSet.from_documents(docs)


def key_of(obj: Any) -> SchemaKey | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str):
        return None
    group, _, version = obj["apiVersion"].rpartition("/")
    key = (group, version, str(obj.get("kind")))
    return key if crd_schemas().get(*key) is not None else None


@functools.cache
def fixture_objects() -> tuple[tuple[SchemaKey, dict[str, Any]], ...]:
    found = []
    for _, request in fixture_requests():
        for obj in (request.get("object"), request.get("oldObject")):
            key = key_of(obj)
            if key is not None:
                found.append((key, obj))
    return tuple(found)


STRINGS = ["a", "abc", "web", "example.com", "*.example.com", "/", "/api", "Exact", "PathPrefix", "http",
           "HTTP", "HTTPS", "Service", "IPAddress", "Hostname", "10.0.0.1", "::1", "2026-01-01T00:00:00Z",
           "gateway.networking.k8s.io", "Gateway", "HTTPRoute", "my-gw", "v1", "80", "", "A b",
           "a\n", "\ud800", "é", "x" * 70, "x" * 300, "x" * 5000]
JUNK = st.sampled_from([None, True, 0, -1, 1.5, 2**31, 2**63, 65536, "", "x" * 5000, [], {}, [None],
                        {"unknown": 1}, "\ud800", "a\n"])


def fitting(text: str, schema: dict[str, Any]) -> bool:
    """``text`` passes the string node's own limits, pattern and format (mostly-valid objects)."""
    pattern, fmt = schema.get("pattern"), schema.get("format")
    compiled = go_pattern(pattern) if isinstance(pattern, str) else None
    return (schema.get("minLength", 0) <= len(text) <= schema.get("maxLength", len(text))
            and (pattern is None or (compiled is not None and compiled.search(text)))
            and (fmt not in FORMATS or FORMATS[fmt](text)))


def numbers(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    edges = [0, 1, 80, 2**31]
    for key in ("minimum", "maximum"):
        if isinstance(schema.get(key), int):
            edges += [schema[key] - 1, schema[key], schema[key] + 1]
    low, high = schema.get("minimum", 0), schema.get("maximum", 2**31 - 1)
    return st.integers(low, high) | st.sampled_from(edges)


@st.composite
def from_schema(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """A value shaped by ``schema``: mostly valid, sometimes at or just past its limits."""
    if not isinstance(schema, dict) or draw(st.integers(0, 49)) == 0:
        return draw(JUNK)
    if isinstance(schema.get("enum"), list) and schema["enum"] and draw(st.integers(0, 5)):
        return draw(st.sampled_from(schema["enum"]))
    if schema.get("x-kubernetes-int-or-string") is True:
        return draw(st.sampled_from([80, 8080, "80", "http", "50%"]))
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        chosen = required + (draw(st.lists(st.sampled_from(sorted(props)), max_size=3, unique=True))
                             if props and depth < 7 else [])
        out = {k: draw(from_schema(props[k], depth + 1)) for k in dict.fromkeys(chosen)}
        if isinstance(schema.get("additionalProperties"), dict) and depth < 7:
            for k in draw(st.lists(st.sampled_from(["k1", "k2", "k3"]), max_size=2, unique=True)):
                out[k] = draw(from_schema(schema["additionalProperties"], depth + 1))
        return out
    if kind == "array":
        low = schema.get("minItems", 0)
        size = draw(st.integers(low, low + (2 if depth < 7 else 0)))
        items = [draw(from_schema(schema.get("items"), depth + 1)) for _ in range(size)]
        if items and draw(st.integers(0, 5)) == 0:
            items.append(copy.deepcopy(items[0]))  # a duplicate: set and map lists must reject it
        return items
    if kind in ("integer", "number"):
        return draw(numbers(schema))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "string":
        limit = schema.get("maxLength")
        pool = STRINGS + (["y" * limit, "y" * (limit + 1)] if isinstance(limit, int) else [])
        fits = [s for s in pool if fitting(s, schema)]
        mostly_valid = bool(fits) and draw(st.integers(0, 5)) > 0
        return draw(st.sampled_from(fits if mostly_valid else pool))
    return draw(JUNK)


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*at, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(paths(out)[1:] or [("spec",)]))
        parent: Any = out
        for part in where[:-1]:
            parent = parent[part]
        last = where[-1]
        if isinstance(parent, dict) and last not in parent:
            continue
        op = draw(st.sampled_from(["junk", "delete", "unknown", "duplicate", "string"]))
        if op == "junk":
            parent[last] = draw(JUNK)
        elif op == "string":
            parent[last] = draw(st.sampled_from(STRINGS))
        elif op == "delete":
            del parent[last]
        elif op == "unknown" and isinstance(parent[last], dict):
            parent[last]["notInSchema"] = draw(JUNK)
        elif op == "duplicate" and isinstance(parent[last], list) and parent[last]:
            parent[last].append(copy.deepcopy(parent[last][0]))
    return out


@st.composite
def crd_objects(draw: st.DrawFn) -> tuple[SchemaKey, dict[str, Any]]:
    seeds = fixture_objects()
    if seeds and draw(st.integers(0, 3)) == 0:
        key, base = draw(st.sampled_from(seeds))
    else:
        key = draw(st.sampled_from(list(crd_schemas())))
        schema = crd_schemas().get(*key)
        base = draw(from_schema(schema))
        if not isinstance(base, dict):
            base = {}
        base.update(apiVersion=f"{key[0]}/{key[1]}", kind=key[2], metadata={"name": "r", "namespace": "n"})
    return key, draw(mutated(base))
