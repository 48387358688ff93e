"""celmirror against the C++ engine: each mirrored rule gives exactly the engine's value or no answer,
and a mirrored whole-object program proves an object only where the engine's program is true.
The validators' findings with and without the mirror are compared in test_cel_fastpath.py (against
the per-rule reference walk) and here (mirror on and off, including values the engine cannot take)."""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.validators.test_cel_fastpath import SEEDS, key_of, mutated, schema_sets, validators
from validators.cel import celchecks, celengines, celfunctions, celmirror, celprograms
from validators.schema import structural

if "cel-expr-python" not in celengines.installed():
    pytest.skip("the mirror is compared with cel-expr-python", allow_module_level=True)

ENGINE = celengines.CppEngine()


@functools.cache
def all_rules() -> list[str]:
    """Every rule text of every served version of the bundled (and standard) CRDs."""
    texts: set[str] = set()
    for schemas in schema_sets().values():
        for key in schemas:
            validator = celchecks.CelValidator.compile(schemas.get(*key) or {}, kind=key[2], engine=ENGINE)
            texts.update(r.rule for site in validator._root.walk() for r in site.rules if r.program is not None)
    return sorted(texts)


@functools.cache
def mirrored_rules() -> list[tuple[str, Any, Any]]:
    out = []
    for text in all_rules():
        mirrored = celmirror.compile_rule(text)
        if mirrored is not None and "oldSelf" not in celfunctions.strip_strings(text):
            out.append((text, mirrored, ENGINE.compile(text)))
    return out


def names_in(text: str) -> list[str]:
    """Field names and string literals of a rule: the keys and values a random node should use."""
    blank = celfunctions.strip_strings(text)
    fields = set(re.findall(r"\.\s*([A-Za-z_][A-Za-z0-9_]*)", blank)) | set(re.findall(r"has\(\w+\.(\w+)", blank))
    literals = set(re.findall(r"'([^'\\]*)'", text))
    return sorted(fields - {"all", "exists", "exists_one", "filter", "map", "size", "startsWith", "endsWith",
                            "contains", "matches", "bind"}) + sorted(literals)


@functools.cache
def values_for(text: str) -> st.SearchStrategy[Any]:
    words = [*names_in(text), "x", "y"]
    strings = st.sampled_from(words) | st.sampled_from(["", "/", "/a//b", "/x/./y", "/a/..", "%2f", "#", "/ok",
                                                        "0s", "1s", "*", "Service", ""])
    scalars = (st.none() | st.booleans() | st.integers(-3, 300) | st.sampled_from([2**62, 2**63 - 1, -(2**63)])
               | st.floats(allow_nan=False, allow_infinity=False) | strings | strings | strings)
    return st.recursive(  # mostly maps keyed by the rule's own field names, so its tests meet real values
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(words), inner, min_size=1,
                                                                    max_size=6)
        | st.dictionaries(st.sampled_from(words), inner, min_size=2, max_size=6),
        max_leaves=14,
    )


def engine_value(program: Any, node: Any) -> tuple[bool, Any]:
    """(answered, value) of the engine's own program for one rule on ``node``."""
    try:
        bound = ENGINE.bind({"self": node, "oldSelf": None, "__old": None, "__hasOld": False})
        return True, program.run(bound)
    except celengines.CelEvalError:
        return False, None


def mirror_value(rule: Any, node: Any) -> tuple[bool, Any]:
    try:
        return True, rule(node)
    except celmirror.Unsure:
        return False, None


def test_every_gateway_api_route_rule_is_mirrored() -> None:
    """Guards the speed: a rule outside the subset leaves its kind's objects to the engine."""
    for kind in ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"):
        validator, _ = validators("bundled", "gateway.networking.k8s.io",
                                  "v1alpha2" if kind in ("TCPRoute", "UDPRoute") else "v1", kind)
        assert celmirror.compile_mirror(validator._root) is not None, kind
    assert len(mirrored_rules()) >= 60


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_mirrored_rule_gives_the_engines_value_or_none(data: st.DataObject) -> None:
    text, rule, program = data.draw(st.sampled_from(mirrored_rules()))
    for _ in range(6):
        node = data.draw(values_for(text))
        answered, value = mirror_value(rule, node)
        if answered:
            engine_answered, expected = engine_value(program, node)
            assert engine_answered, (text, node, value)
            assert type(value) is type(expected) and value == expected, (text, node)


@pytest.mark.parametrize(("text", "node"), [
    ("self.a == 1", {"a": True}), ("self.a == 1", {"a": 1.0}), ("self.a == self.b", {"a": 1, "b": 1.0}),
    ("self.a == self.b", {"a": [1], "b": [1]}), ("self.a in [1, 2]", {"a": 1.0}),
    ("self.a in ['x', 'y']", {"a": 1}), ("self.a in self.b", {"a": "x", "b": [1, "x"]}),
    ("self.a + 1 > 0", {"a": 2**63 - 1}), ("self.a < 2", {"a": 1.5}), ("self.a", {}),
    ("has(self.a.b)", {"a": "x"}), ("self[0] == 1", []), ("self.a.size() == 1", {"a": 1}),
    ("self.a.startsWith('x')", {"a": 1}), ("self.a.matches('[')", {"a": "x"}),
    ("self.all(x, x == 1)", "abc"), ("self.filter(x, true).size() == 0", {"a": 1}),
    ("duration(self.a) > duration('1s')", {"a": "2s"}), ("self.a * 2 == 2", {"a": 1}),
    ("self.all(x, x)", [True, 1]), ("self.exists_one(x, x)", [True, 1]), ("!self.a", {"a": 1}),
])
def test_what_the_mirror_does_not_answer(text: str, node: Any) -> None:
    rule = celmirror.compile_rule(text)
    assert rule is not None
    answered, value = mirror_value(rule, node)
    assert not answered, value


@pytest.mark.parametrize("text", [
    "oldSelf == self", "self.a == 1u", "self.a == 1.5", "self.a == b'x'", "self.a == 'a\\u0041'", "self.a ==",
    "self.all(x.y, true)", "has(self)", "self.a == 0x10", "unknownName == 1",
])
def test_texts_outside_the_subset_give_no_rule(text: str) -> None:
    assert celmirror.compile_rule(text) is None


def test_iterations_past_the_cap_give_no_answer() -> None:
    rule = celmirror.compile_rule("self.all(x, self.all(y, true))")
    assert rule is not None
    assert rule(list(range(40))) is True
    with pytest.raises(celmirror.Unsure):
        rule(list(range(50)))  # 50 + 50 * 50 > ITERATIONS


def _converted(validator: celchecks.CelValidator, obj: Any) -> tuple[Any, celprograms.Memo]:
    memo = celprograms.Memo(keep=False)
    value, _ = celprograms.whole_to_cel(obj, validator._root, memo)
    return value, memo


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS), shaped=st.booleans())
def test_the_mirror_proves_only_what_the_engines_program_holds(data: st.DataObject, seed: dict[str, Any],
                                                                shaped: bool) -> None:
    validator, schema = validators("bundled", *key_of(seed))
    obj = data.draw(mutated(seed))
    if shaped:
        obj = structural.apply(obj, schema).value
    validator.validate(obj)  # builds the whole-object program and its mirror
    whole, mirror = validator._whole, validator._mirror
    if whole is None or mirror is None:
        return
    try:
        value, memo = _converted(validator, obj)
    except celprograms.ConversionError:
        return
    if memo.plain and mirror.proves(value):
        bound = ENGINE.bind({"self": value, "oldSelf": None, "__old": None, "__hasOld": False})
        assert whole.program.holds(bound)


def test_the_mirror_proves_the_valid_seeds() -> None:
    proven = 0
    for seed in SEEDS:
        validator, schema = validators("bundled", *key_of(seed))
        validator.validate(seed)
        if validator._mirror is None:
            continue
        value, memo = _converted(validator, structural.apply(seed, schema).value)
        proven += memo.plain and validator._mirror.proves(value)
    assert proven >= 10


@functools.cache
def unmirrored(kind_key: tuple[str, str, str]) -> celchecks.CelValidator:
    schema = schema_sets()["bundled"].get(*kind_key)
    assert schema is not None
    validator = celchecks.CelValidator.compile(schema, kind=kind_key[2], engine=ENGINE)
    validator.mirrored = False
    return validator


@pytest.mark.parametrize("odd", ["\ud800", 2**63, -(2**63) - 1, 2**64])
def test_values_the_engine_cannot_take_as_they_are_get_the_same_findings(odd: Any) -> None:
    """A lone surrogate or an int outside int64 where no rule looks: the engine still converts it
    (and fails, or makes a uint), so the mirror must not answer for it."""
    seed = next(s for s in SEEDS if s["kind"] == "HTTPRoute" and s["spec"].get("rules"))
    validator, schema = validators("bundled", *key_of(seed))
    for where in ("hostnames", "rules"):
        obj = structural.apply(seed, schema).value
        obj = copy.deepcopy(obj)
        if where == "hostnames":
            obj["spec"]["hostnames"] = [odd]
        else:
            obj["spec"]["rules"][0]["name"] = odd
        assert validator.validate(obj) == unmirrored(key_of(seed)).validate(obj)
        assert not _converted(validator, obj)[1].plain


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS), shaped=st.booleans())
def test_findings_with_and_without_the_mirror_are_equal(data: st.DataObject, seed: dict[str, Any],
                                                        shaped: bool) -> None:
    validator, schema = validators("bundled", *key_of(seed))
    obj = data.draw(mutated(seed))
    if shaped:
        obj = structural.apply(obj, schema).value
    assert validator.validate(obj) == unmirrored(key_of(seed)).validate(obj)


# --- the shaped reading: the object as structural leaves it, CEL's escaped names mapped back -------------


def _nodes(value: Any, site: celprograms.Site, cel_value: Any) -> list[tuple[Any, celprograms.Site, Any]]:
    """(shaped node, its site, CEL's copy of it) for every node of ``value`` that has rules."""
    out = []
    if value is None or not site.live:
        return out
    if site.rules:
        out.append((value, site, cel_value))
    if isinstance(value, dict) and isinstance(cel_value, dict):
        for name, child in site.properties.items():
            cel_name = celprograms.escape(name)
            if name in value and cel_name is not None and cel_name in cel_value:
                out += _nodes(value[name], child, cel_value[cel_name])
    elif isinstance(value, list) and isinstance(cel_value, list) and site.items is not None:
        for item, cel_item in zip(value, cel_value, strict=True):
            out += _nodes(item, site.items, cel_item)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS))
def test_a_shaped_rule_gives_the_engines_value_on_cels_copy_or_none(data: st.DataObject, seed: dict[str, Any]) -> None:
    validator, schema = validators("bundled", *key_of(seed))
    obj = structural.apply(data.draw(mutated(seed)), schema).value
    if celprograms.plain_size(obj, 10_000) is None:
        return  # the engine cannot take it as it is; celchecks never asks the mirror then
    cel_obj, _ = _converted(validator, obj)
    for node, site, cel_node in _nodes(obj, validator._root, cel_obj)[1:]:  # the root sees metadata cut
        for rule in site.rules:
            if rule.program is None or rule.transition or rule.optional_old_self:
                continue
            mirrored = celmirror.compile_rule(rule.rule, site, shaped=True)
            assert mirrored is not None, rule.rule
            answered, value = mirror_value(mirrored, node)
            if answered:
                engine_answered, expected = engine_value(rule.program, cel_node)
                assert engine_answered and type(value) is type(expected) and value == expected, rule.rule


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS))
def test_the_shaped_mirror_proves_only_what_the_engines_program_holds(data: st.DataObject,
                                                                      seed: dict[str, Any]) -> None:
    validator, schema = validators("bundled", *key_of(seed))
    obj = structural.apply(data.draw(mutated(seed)), schema).value
    validator.validate(obj)
    whole, shaped = validator._whole, validator._shaped
    if whole is None or shaped is None or celprograms.plain_size(obj, 10_000) is None:
        return
    if shaped.proves(obj):
        value, _ = _converted(validator, obj)
        bound = ENGINE.bind({"self": value, "oldSelf": None, "__old": None, "__hasOld": False})
        assert whole.program.holds(bound)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS), update=st.booleans())
def test_shaped_findings_with_and_without_the_mirror_are_equal(data: st.DataObject, seed: dict[str, Any],
                                                               update: bool) -> None:
    validator, schema = validators("bundled", *key_of(seed))
    obj = structural.apply(data.draw(mutated(seed)), schema).value
    old = structural.apply(seed, schema).value if update else None
    assert (validator.validate(obj, old=old, shaped=True)
            == unmirrored(key_of(seed)).validate(obj, old=old, shaped=True))


def test_the_shaped_mirror_proves_the_valid_seeds() -> None:
    proven = 0
    for seed in SEEDS:
        validator, schema = validators("bundled", *key_of(seed))
        validator.validate(seed)
        if validator._shaped is not None:
            proven += validator._shaped.proves(structural.apply(seed, schema).value)
    assert proven >= 10


def _site_of(schema: dict[str, Any]) -> celprograms.Site:
    return celprograms.compile_schema(schema, ENGINE)


ESCAPED = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "refs": {"type": "array", "items": {"type": "object", "properties": {
        "namespace": {"type": "string"}, "name": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.all(r, !has(r.__namespace__) || r.__namespace__ == 'ok')"}]},
}}}}


def test_the_shaped_reading_maps_escaped_names_back() -> None:
    mirror = celmirror.compile_mirror(_site_of(ESCAPED), shaped=True)
    cel_view = celmirror.compile_mirror(_site_of(ESCAPED))
    assert mirror is not None and cel_view is not None
    assert mirror.proves({"spec": {"refs": [{"namespace": "ok"}, {"name": "a"}]}})
    assert not mirror.proves({"spec": {"refs": [{"namespace": "bad"}]}})
    assert cel_view.proves({"spec": {"refs": [{"__namespace__": "ok"}]}})
    assert not cel_view.proves({"spec": {"refs": [{"__namespace__": "bad"}]}})


def test_an_escaped_name_on_a_value_of_unknown_schema_gives_no_shaped_rule() -> None:
    assert celmirror.compile_rule("[self][0].__namespace__ == 'x'", shaped=True) is None
    assert celmirror.compile_rule("[self][0].__namespace__ == 'x'") is not None


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"spec": {"type": "object", "additionalProperties": True,
                                               "properties": {"a": {"type": "string"}},
                                               "x-kubernetes-validations": [{"rule": "has(self.a)"}]}}},
    {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-embedded-resource": True,
                                               "properties": {"a": {"type": "string"}},
                                               "x-kubernetes-validations": [{"rule": "has(self.a)"}]}}},
    {"type": "object", "properties": {"spec": {"type": "object"}},
     "x-kubernetes-validations": [{"rule": "has(self.spec)"}]},
])
def test_schemas_where_the_shaped_object_is_not_cels_copy_get_no_shaped_mirror(schema: dict[str, Any]) -> None:
    assert celmirror.compile_mirror(_site_of(schema), shaped=True) is None
    assert celmirror.compile_mirror(_site_of(schema)) is not None


def test_plain_size_counts_what_whole_to_cel_counts_at_most() -> None:
    seed = next(s for s in SEEDS if s["kind"] == "HTTPRoute" and s["spec"].get("rules"))
    validator, schema = validators("bundled", *key_of(seed))
    obj = structural.apply(seed, schema).value
    counted = celprograms.plain_size(obj, 10_000)
    _, size = celprograms.whole_to_cel(obj, validator._root, celprograms.Memo(keep=False))
    assert counted is not None and counted >= size
    assert celprograms.plain_size(obj, 3) is None
    assert celprograms.plain_size({"a": ("t",)}, 10) is None
    assert celprograms.plain_size({1: "a"}, 10) is None
    deep: Any = "x"
    for _ in range(celprograms.MAX_DEPTH):
        deep = [deep]
    assert celprograms.plain_size(deep, 10_000) is None
