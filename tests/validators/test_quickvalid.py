"""The compiled yes/no schema check (quickvalid) against jsonschema's KubeValidator, the from-scratch path.

Its one promise: "clean" only when the validator reports no error (and, for the keyword set it
mirrors, exactly then). Checked three ways: one case per keyword form; drawn small schemas of every
mirrored keyword (plus unmirrored ones, which must never pass as clean) against drawn JSON values;
and the real Gateway API v1.6.1 CRDs and the Route CRD against objects drawn from their schemas and
the captured fixtures, then mutated (wrong types, nulls, out-of-range numbers, bad patterns and
formats, duplicate list keys, unknown fields, missing required fields, huge strings), where
``schemas.check`` must give the same Outcome with and without the quick path.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from validatorbuilders import fixture_requests, need

from validators import budgets
from validators.schema import quickvalid, schemas, structural
from validators.schema.crds import SchemaKey, SchemaSet
from validators.schema.schemaformats import FORMATS, go_pattern

ROUTE_CRD = Path(__file__).resolve().parents[2] / "manifests" / "base" / "route-crd.yaml"


def validator_errors(schema: dict[str, Any], value: Any) -> list[Any] | None:
    """jsonschema's errors, or None when it raises (the schema check then reports an internal error)."""
    try:
        return list(schemas.KubeValidator(dict(schema)).iter_errors(value))
    except Exception:
        return None


def quick(schema: dict[str, Any], value: Any) -> bool:
    return quickvalid.compile_clean(schema)(value)


def agree(schema: dict[str, Any], value: Any, *, exact: bool = True) -> bool:
    """The quick answer, asserted against jsonschema's: never clean when it finds an error."""
    clean = quick(schema, value)
    errors = validator_errors(schema, value)
    if clean:
        assert errors == [], f"quick says clean, jsonschema says {errors}"
    elif exact and errors is not None:
        assert errors, "quick says not clean, jsonschema finds nothing"
    return clean


# ----------------------------------------------------------------------------- one case per keyword

CASES: list[tuple[dict[str, Any], Any, bool]] = [
    ({"type": "string"}, "a", True), ({"type": "string"}, 1, False), ({"type": "string"}, None, False),
    ({"type": "string", "nullable": True}, None, True), ({"type": ["string", "null"]}, None, True),
    ({"type": "integer"}, 3, True), ({"type": "integer"}, 3.0, True), ({"type": "integer"}, 3.5, False),
    ({"type": "integer"}, True, False), ({"type": "number"}, 1.5, True), ({"type": "number"}, False, False),
    ({"type": "boolean"}, True, True), ({"type": "boolean"}, 1, False), ({"type": "object"}, [], False),
    ({"type": "array"}, [], True), ({"type": "null"}, None, True),
    ({"enum": ["A", "B"]}, "A", True), ({"enum": ["A", "B"]}, "C", False), ({"enum": [1]}, True, False),
    ({"enum": [1]}, 1.0, True), ({"enum": [True]}, 1, False), ({"enum": [{"a": [1]}]}, {"a": [1]}, True),
    ({"enum": ["A"], "nullable": True}, None, True), ({"enum": ["A"]}, None, False),
    ({"format": "int32"}, 2**31, False), ({"format": "int32"}, 2**31 - 1, True),
    ({"format": "int64"}, -(2**63) - 1, False), ({"format": "date-time"}, "2026-01-01T00:00:00Z", True),
    ({"format": "date-time"}, "yesterday", False), ({"format": "ipv4"}, "10.0.0.1", True),
    ({"format": "ipv4"}, "::1", False), ({"format": "ipv6"}, "::1", True), ({"format": "unknown"}, "x", True),
    ({"format": "ipv4", "nullable": True}, None, True),
    ({"pattern": "^[a-z]+$"}, "abc", True), ({"pattern": "^[a-z]+$"}, "abc\n", False),
    ({"pattern": "^[a-z]+$"}, 5, True), ({"pattern": "(?<=a)b"}, "ab", False),
    ({"pattern": "(?<=a)b", "maxLength": 1}, "ab", False), ({"pattern": "^a$", "maxLength": 1}, "aa", False),
    ({"pattern": "^.$"}, "\ud800", True),
    ({"minLength": 2}, "a", False), ({"minLength": 2}, "ab", True), ({"maxLength": 2}, "abc", False),
    ({"maxLength": 2}, 123, True), ({"minItems": 1}, [], False), ({"maxItems": 1}, [1, 2], False),
    ({"minProperties": 1}, {}, False), ({"maxProperties": 1}, {"a": 1, "b": 2}, False),
    ({"minimum": 1}, 1, True), ({"minimum": 1}, 0.5, False), ({"minimum": 1, "exclusiveMinimum": True}, 1, False),
    ({"maximum": 5}, 5, True), ({"maximum": 5, "exclusiveMaximum": True}, 5, False), ({"maximum": 5}, "9", True),
    ({"multipleOf": 3}, 9, True), ({"multipleOf": 3}, 10, False), ({"multipleOf": 0.5}, 1.5, True),
    ({"multipleOf": 0.1}, 0.3, False), ({"multipleOf": 0.5}, 10**20, True), ({"multipleOf": 0.5}, 10**400, False),
    ({"required": ["a"]}, {"a": None}, True), ({"required": ["a"]}, {}, False), ({"required": ["a"]}, [], True),
    ({"properties": {"a": {"type": "string"}}}, {"a": 1}, False),
    ({"properties": {"a": {"type": "string"}}}, {"b": 1}, True),
    ({"properties": {"a": {}}, "additionalProperties": False}, {"b": 1}, False),
    ({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1}, True),
    ({"additionalProperties": {"type": "string"}}, {"b": 1}, False),
    ({"additionalProperties": {"type": "string"}}, {"b": "x"}, True),
    ({"items": {"type": "string"}}, ["a", 1], False), ({"items": {"type": "string"}}, ["a"], True),
    ({"items": False}, [1], False), ({"items": True}, [1], False),  # jsonschema's Draft 4 items crashes
    ({"allOf": [{"minimum": 1}, {"maximum": 2}]}, 3, False), ({"allOf": []}, 3, True),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 3, True), ({"anyOf": []}, 3, False),
    ({"oneOf": [{"minimum": 1}, {"minimum": 2}]}, 3, False), ({"oneOf": [{"minimum": 1}, {"minimum": 2}]}, 1, True),
    ({"not": {"enum": ["IPAddress"]}}, "IPAddress", False), ({"not": {"enum": ["IPAddress"]}}, "x", True),
    ({"x-kubernetes-int-or-string": True}, "80", True), ({"x-kubernetes-int-or-string": True}, 80, True),
    ({"x-kubernetes-int-or-string": True}, 8.5, False), ({"x-kubernetes-int-or-string": True}, True, False),
    ({"x-kubernetes-int-or-string": True}, None, False), ({"x-kubernetes-int-or-string": False}, [], True),
    ({"x-kubernetes-list-type": "set"}, ["a", "a"], False), ({"x-kubernetes-list-type": "set"}, [1, 1.0], True),
    ({"x-kubernetes-list-type": "set"}, [1, True], True), ({"x-kubernetes-list-type": "atomic"}, [1, 1], True),
    ({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
     [{"name": "a"}, {"name": "a", "x": 1}], False),
    ({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}, [{"name": 1}, {"name": 1.0}], True),
    ({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}, [{"name": "a"}, "a", "a"], True),
    ({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"]},
     [{"name": "a"}, {"name": "a", "port": None}], False),
    ({"$ref": "#/definitions/x", "type": "string"}, 1, False),  # $ref is ignored, its siblings are not
    ({"description": "x", "default": 1, "x-kubernetes-validations": []}, 1, True),
]


@pytest.mark.parametrize(("schema", "value", "clean"), CASES)
def test_each_keyword_form_answers_as_jsonschema_does(schema: dict[str, Any], value: Any, clean: bool) -> None:
    assert agree(schema, value) is clean


@pytest.mark.parametrize("schema", [
    {"uniqueItems": True}, {"patternProperties": {"^a": {}}}, {"dependencies": {"a": ["b"]}},
    {"additionalItems": False, "items": [{}]}, {"items": [{"type": "string"}]}, {"type": "any"},
    {"minLength": "2"}, {"properties": [1]}, {"allOf": {"type": "string"}}, {"not": 5},
])
def test_a_keyword_or_shape_it_does_not_mirror_is_never_clean(schema: dict[str, Any]) -> None:
    for value in ("a", 1, [1], {"a": 1}, None):
        assert quick({"properties": {"x": schema}}, {"x": value}) is False
    assert quick({"properties": {"x": schema}}, {"y": 1}) is True  # not reached: the rest stays quick


def test_a_subschema_of_an_unexpected_shape_is_unsure_only_where_a_value_reaches_it() -> None:
    schema = {"properties": {"a": 5}}
    assert quick(schema, {"a": 1}) is False and validator_errors(schema, {"a": 1}) is None
    assert quick(schema, {"b": 1}) is True and quick(schema, "a") is True


def test_values_that_are_not_plain_json_types_are_never_clean() -> None:
    assert quick({"type": "array"}, (1, 2)) is False
    assert quick({"type": "object"}, {"a": frozenset()}) is True  # not descended into: as jsonschema
    assert quick({"additionalProperties": {}}, {"a": frozenset()}) is False


def test_a_value_nested_past_the_recursion_limit_is_not_clean() -> None:
    schema: dict[str, Any] = {"type": "array"}
    schema["items"] = schema  # a self-referencing schema: compiled lazily, so it terminates
    value: list[Any] = []
    for _ in range(5000):
        value = [value]
    assert quick(schema, [[[]]]) is True
    assert quick(schema, value) is False


def test_the_budget_is_checked_first_and_while_walking() -> None:
    with budgets.limited(-1.0), pytest.raises(budgets.OverBudget):
        quick({"type": "object"}, {})
    schema = {"items": {"properties": {"a": {"type": "string"}}}}
    check = quickvalid.compile_clean(schema)
    with budgets.limited(0.05), pytest.raises(budgets.OverBudget):
        for _ in range(10**6):  # a million object nodes, each counted
            check([{"a": "x"}] * 100)


# ----------------------------------------------------------------------- drawn schemas and values

NAMES = ("a", "b", "name", "port")
PATTERNS = ("^[a-z]+$", "^a", "b$", "^$", "(?<=a)b", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", ".", "\\d")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**33) | st.sampled_from([0.5, 1.0, 2.5, -1.5, 1e300])
    | st.sampled_from(["", "a", "ab", "abc", "a\n", "80", "10.0.0.1", "::1", "2026-01-01T00:00:00Z", "\ud800",
                       "é", "x" * 300]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=4),
    max_leaves=12,
)
SMALL = st.integers(0, 4)
NUM = st.integers(-3, 5) | st.sampled_from([0.5, 1.5, 2**31])


@st.composite
def drawn_schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    sub = drawn_schemas(depth + 1) if depth < 3 else st.just({})
    options: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])
        | st.lists(st.sampled_from(["string", "integer", "null"]), min_size=1, max_size=2),
        "nullable": st.booleans(),
        "enum": st.lists(JSON, max_size=3),
        "format": st.sampled_from([*FORMATS, "unknown"]),
        "pattern": st.sampled_from(PATTERNS),
        "minLength": SMALL, "maxLength": SMALL, "minItems": SMALL, "maxItems": SMALL,
        "minProperties": SMALL, "maxProperties": SMALL,
        "minimum": NUM, "maximum": NUM, "exclusiveMinimum": st.booleans(), "exclusiveMaximum": st.booleans(),
        "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.1]),
        "required": st.lists(st.sampled_from(NAMES), max_size=2),
        "properties": st.dictionaries(st.sampled_from(NAMES), sub, max_size=3),
        "additionalProperties": st.booleans() | sub,
        "items": sub,
        "allOf": st.lists(sub, max_size=2), "anyOf": st.lists(sub, max_size=2),
        "oneOf": st.lists(sub, max_size=3), "not": sub,
        "x-kubernetes-int-or-string": st.booleans(),
        "x-kubernetes-list-type": st.sampled_from(["set", "map", "atomic"]),
        "x-kubernetes-list-map-keys": st.lists(st.sampled_from(NAMES), max_size=2),
        "uniqueItems": st.booleans(),  # not mirrored: such a node is never clean
    }
    keys = draw(st.lists(st.sampled_from(sorted(options)), max_size=4, unique=True))
    return {key: draw(options[key]) for key in keys}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn_schemas(), st.lists(JSON, min_size=1, max_size=4))
def test_drawn_schemas_and_values_answer_as_jsonschema_does(schema: dict[str, Any], values: list[Any]) -> None:
    for value in values:
        agree(schema, value, exact=mirrored(schema))


def mirrored(schema: Any) -> bool:
    """No keyword anywhere in ``schema`` that quickvalid leaves to jsonschema."""
    if not isinstance(schema, dict):
        return True
    if any(k in schemas.KubeValidator.VALIDATORS and k not in quickvalid.SUPPORTED for k in schema):
        return False
    subs = [*schema.get("properties", {}).values(), schema.get("items"), schema.get("additionalProperties"),
            schema.get("not"), *schema.get("allOf", []), *schema.get("anyOf", []), *schema.get("oneOf", [])]
    return all(mirrored(sub) for sub in subs)


# --------------------------------------------------------------- the real CRDs and mutated objects


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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crd_objects())
def test_crd_objects_get_the_same_outcome_with_and_without_the_quick_path(
        drawn: tuple[SchemaKey, dict[str, Any]]) -> None:
    key, obj = drawn
    schema = crd_schemas().get(*key)
    assert schema is not None
    shaped = structural.apply(obj, schema).value
    agree(dict(schema), shaped)  # the CRDs use only mirrored keywords: the answer is exact
    kind = key[2]
    assert schemas.check(obj, schema, kind=kind) == schemas.check(obj, schema, kind=kind, quick=False)


def test_every_fixture_object_is_clean_on_the_quick_path() -> None:
    for key, obj in fixture_objects():
        schema = crd_schemas().get(*key)
        assert schema is not None
        assert agree(dict(schema), structural.apply(obj, schema).value), key
