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

from typing import Any

import pytest
from crdobjects import crd_objects, crd_schemas, fixture_objects, mutated
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators import budgets
from validators.schema import quickvalid, schemas, structural
from validators.schema.crds import SchemaKey
from validators.schema.schemaformats import FORMATS


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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crd_objects(), st.data())
def test_updates_get_the_same_outcome_with_and_without_the_quick_path(
        drawn: tuple[SchemaKey, dict[str, Any]], data: st.DataObject) -> None:
    key, old = drawn
    new = data.draw(mutated(old))
    schema = crd_schemas().get(*key)
    assert schema is not None
    kind = key[2]
    assert (schemas.check(new, schema, kind=kind, old=old)
            == schemas.check(new, schema, kind=kind, old=old, quick=False))


def test_every_fixture_object_is_clean_on_the_quick_path() -> None:
    for key, obj in fixture_objects():
        schema = crd_schemas().get(*key)
        assert schema is not None
        assert agree(dict(schema), structural.apply(obj, schema).value), key
