"""structural.compile_apply (pruning and defaulting compiled per schema) against structural.apply, the
reference: the same pruned and defaulted value and the same unknown-field paths, on the real CRDs'
drawn and mutated objects and on drawn small schemas of every structural feature (defaults, nullable,
preserve-unknown-fields, additionalProperties, embedded resources, metadata), including values that
are not plain JSON types, which the compiled form hands to the reference."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from crdobjects import crd_objects, crd_schemas
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators.cel import celprograms
from validators.schema import structural
from validators.schema.crds import SchemaKey


def same(obj: Any, schema: Any) -> structural.Structured:
    before = copy.deepcopy(obj)
    want = structural.apply(obj, schema)
    got = structural.compile_apply(schema)(obj)
    assert got == want
    assert obj == before  # the input is never mutated
    assert want.plain_nodes == structural.UNCOUNTED
    assert got.plain_nodes == celprograms.plain_size(got.value, 10**9)  # what celchecks would count
    return got


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crd_objects())
def test_crd_objects_are_pruned_and_defaulted_as_the_reference_does(
        drawn: tuple[SchemaKey, dict[str, Any]]) -> None:
    key, obj = drawn
    same(obj, crd_schemas().get(*key))


NAMES = ("a", "b", "metadata", "kind", "apiVersion")
# the values the CEL engine cannot take as they are (plain_nodes None) among the ordinary ones
ODD = st.sampled_from(["\ud800", "ü", 2**63, -(2**63) - 1, 2**63 - 1])
LEAF = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", 1.5]) | ODD
VALUES = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=4)
    | st.tuples(inner) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=2).map(OrderedDict),
    max_leaves=10,
)


@st.composite
def shape_schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    sub = shape_schemas(depth + 1) if depth < 3 else st.just({})
    options: dict[str, st.SearchStrategy[Any]] = {
        "properties": st.dictionaries(st.sampled_from(NAMES), sub | st.none() | st.just(True), max_size=3),
        "additionalProperties": st.booleans() | sub,
        "items": sub,
        "default": VALUES,
        "nullable": st.booleans(),
        "x-kubernetes-preserve-unknown-fields": st.booleans(),
        "x-kubernetes-embedded-resource": st.booleans(),
    }
    keys = draw(st.lists(st.sampled_from(sorted(options)), max_size=4, unique=True))
    return {key: draw(options[key]) for key in keys}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape_schemas(), VALUES)
def test_drawn_schemas_and_values_are_shaped_as_the_reference_does(schema: dict[str, Any], value: Any) -> None:
    same(value, schema)


def test_a_value_nested_past_the_depth_limit_is_copied_as_is() -> None:
    schema: dict[str, Any] = {"properties": {"a": {}}}
    schema["properties"]["a"] = schema  # self-referencing: compiled lazily, so it terminates
    value: dict[str, Any] = {"a": {"z": 1}}
    for _ in range(structural.MAX_DEPTH + 5):
        value = {"a": value}
    shaped = same(value, schema)
    assert len(shaped.unknown) == 0  # the innermost unknown field is past the limit: copied, not pruned


def test_defaults_and_pruning_report_paths_in_document_order() -> None:
    schema = {"properties": {"spec": {"properties": {
        "mode": {"default": "PathPrefix"}, "list": {"items": {"properties": {"n": {"default": 1}}}}}}}}
    shaped = same({"kind": "X", "spec": {"list": [{}, {"junk": 1}], "other": 2}, "extra": None}, schema)
    assert shaped.value == {"kind": "X", "spec": {"list": [{"n": 1}, {"n": 1}], "mode": "PathPrefix"}}
    assert shaped.unknown == (("spec", "list", 1, "junk"), ("spec", "other"), ("extra",))


def test_the_node_count_is_cels_and_marks_what_the_engine_cannot_take() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}},
                                               "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    shaped = structural.compile_apply(schema)
    assert shaped({"a": ["x", "y"], "b": {"c": [1]}}).plain_nodes == 7  # the root, a, x, y, b, c, 1
    assert shaped({"a": ["\ud800"]}).plain_nodes is None
    assert shaped({"b": {"\ud800": 1}}).plain_nodes is None
    assert shaped({"b": {1: 1}}).plain_nodes is None
    assert shaped({"b": {"c": 2**64}}).plain_nodes is None
    deep: Any = 1
    for _ in range(structural.CEL_DEPTH):
        deep = {"c": deep}
    assert shaped({"b": deep}).plain_nodes is None
    assert structural.CEL_DEPTH == celprograms.MAX_DEPTH
