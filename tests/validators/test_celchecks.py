"""The CEL adapter on hand-written schemas: reasons, fieldPath, messageExpression, transitions,
escaping, the Kubernetes libraries, compile errors, the budget, and arbitrary input."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators.cel import celchecks, celengines
from validators.findings import Finding, Severity

ENGINES = celengines.installed()
if not ENGINES:
    pytest.skip("no CEL engine installed (extra `cel`)", allow_module_level=True)
PREFERRED = next(iter(ENGINES))
HAS_FALLBACK = "common-expression-language" in ENGINES and len(ENGINES) > 1


def obj_schema(*rules: dict[str, Any], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "x-kubernetes-validations": list(rules)}


def check(schema: dict[str, Any], obj: Any, *, old: Any = None, engine: str = PREFERRED,
          budget: float = 0.5) -> list[Finding]:
    validator = celchecks.CelValidator.compile(schema, kind="Thing", engine=ENGINES[engine])
    return validator.validate(obj, old=old, budget_seconds=budget)


def texts(findings: list[Finding]) -> list[str]:
    return sorted(f"{f.code} {f.severity} {f.field}: {f.message}" for f in findings)


STR, INT = {"type": "string"}, {"type": "integer"}
SPEC = obj_schema(
    {"rule": "self.a != 'bad'", "message": "a must not be bad", "fieldPath": ".a", "reason": "FieldValueForbidden"},
    {"rule": "has(self.b)", "message": "b is needed", "fieldPath": "['b']", "reason": "FieldValueRequired"},
    {"rule": "self.a.size() < 5", "messageExpression": "'a is ' + string(self.a.size()) + ' long'"},
    {"rule": "self.a != 'dup'", "reason": "FieldValueDuplicate", "message": "dropped by the API server"},
    {"rule": "self.a != 'x'"},
    {"rule": "self.a != 'y'", "message": "fallback message", "messageExpression": "self.nope"},
    a=STR, b=INT,
)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"a": "ok", "b": 1}, [], id="a passing object has no findings"),
    pytest.param({"a": "bad", "b": 1}, ["RG0300 deny spec.a: Forbidden: a must not be bad"],
                 id="reason Forbidden and fieldPath .a"),
    pytest.param({"a": "ok"}, ["RG0300 deny spec.b: Required value: b is needed"],
                 id="reason Required and fieldPath ['b']"),
    pytest.param({"a": "toolong", "b": 1}, ['RG0300 deny spec: Invalid value: a is 7 long'],
                 id="messageExpression gives the message"),
    pytest.param({"a": "dup", "b": 1}, ['RG0300 deny spec: Duplicate value'],
                 id="reason Duplicate prints no detail, as field.Duplicate does"),
    pytest.param({"a": "x", "b": 1}, ["RG0300 deny spec: Invalid value: failed rule: self.a != 'x'"],
                 id="no message gives the default"),
    pytest.param({"a": "y", "b": 1}, ['RG0300 deny spec: Invalid value: fallback message'],
                 id="a failing messageExpression falls back to message"),
])
def test_failing_rules_read_like_the_api_server(engine: str, spec: dict[str, Any], expected: list[str]) -> None:
    assert texts(check(obj_schema(spec=SPEC), {"spec": spec}, engine=engine)) == expected


@pytest.mark.parametrize(("node", "value", "expected"), [
    pytest.param(STR, 'a "b"', 'v: Invalid value: "a \\"b\\"": no', id="a string node shows its quoted value"),
    pytest.param(INT, 7, "v: Invalid value: 7: no", id="an integer node shows its value"),
    pytest.param({"type": "boolean"}, False, "v: Invalid value: false: no", id="a boolean node shows its value"),
    pytest.param({"type": "array", "items": INT}, [1], "v: Invalid value: no", id="an array node omits its value"),
])
def test_a_failed_rule_shows_scalar_values_and_omits_complex_ones(node: dict[str, Any], value: Any,
                                                                    expected: str) -> None:
    schema = obj_schema(v={**node, "x-kubernetes-validations": [{"rule": "false", "message": "no"}]})
    assert [f"{f.field}: {f.message}" for f in check(schema, {"v": value})] == [expected]


def test_duplicate_reason_on_a_scalar_shows_the_value_only() -> None:
    schema = obj_schema(v={**STR, "x-kubernetes-validations": [
        {"rule": "false", "message": "dropped", "reason": "FieldValueDuplicate"}]})
    assert [f.message for f in check(schema, {"v": "x"})] == ['Duplicate value: "x"']


@pytest.mark.parametrize("engine", list(ENGINES))
def test_transition_rules_need_an_old_value_unless_old_self_is_optional(engine: str) -> None:
    schema = obj_schema(n={"type": "integer", "x-kubernetes-validations": [
        {"rule": "self >= oldSelf", "message": "may only grow"},
        {"rule": "oldSelf.hasValue() || self != 13", "message": "13 only on update", "optionalOldSelf": True}]})
    assert check(schema, {"n": 1}, engine=engine) == []
    assert check(schema, {"n": 2}, old={"n": 1}, engine=engine) == []
    assert texts(check(schema, {"n": 1}, old={"n": 2}, engine=engine)) == [
        'RG0300 deny n: Invalid value: 1: may only grow']
    assert check(schema, {"n": 13}, old={"n": 12}, engine=engine) == []
    assert texts(check(schema, {"n": 13}, engine=engine)) == [
        'RG0300 deny n: Invalid value: 13: 13 only on update']


def test_property_names_are_escaped_and_unknown_fields_pruned_before_cel_sees_them() -> None:
    schema = obj_schema(
        {"rule": "self.__namespace__ == 'n' && self.x__dash__y == 1 && self.a__dot__b == 2", "message": "escaped"},
        {"rule": "!has(self.extra)", "message": "unknown fields are pruned"},
        {"rule": "self.free.all(k, k.startsWith('k-'))", "message": "map keys stay as they are"},
        {"rule": "!has(self.metadata.labels) && self.metadata.name == 'x'", "message": "root metadata is cut"},
        **{"namespace": STR, "x-y": INT, "a.b": INT,
           "free": {"type": "object", "additionalProperties": STR},
           "metadata": {"type": "object", "properties": {"name": STR, "labels": {"type": "object"}}}},
    )
    good = {"namespace": "n", "x-y": 1, "a.b": 2, "extra": True, "free": {"k-1": "v"},
            "metadata": {"name": "x", "labels": {"a": "b"}}}
    assert check(schema, good) == []
    assert [f.message for f in check(schema, {**good, "free": {"z": "v"}})] == [
        'Invalid value: map keys stay as they are']


EXTENSIONS = [
    # Kubernetes IP / CIDR library
    ("isIP('10.0.0.1') && isIP('::1') && !isIP('10.0.0') && !isIP('fe80::1%eth0')", True),
    ("ip('10.0.0.1').family() == 4 && ip('::1').family() == 6", True),
    ("ip('127.0.0.1').isLoopback() && !ip('8.8.8.8').isLoopback() && ip('8.8.8.8').isGlobalUnicast()", True),
    ("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')", True),
    ("cidr('10.0.0.0/8').containsIP('10.1.2.3') && !cidr('10.0.0.0/8').containsIP('11.0.0.1')", True),
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && cidr('10.1.2.3/8').masked() == '10.0.0.0/8'", True),
    ("isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0') && cidr('::/0').prefixLength() == 0", True),
    ("ip('not-an-ip').family() == 4", "error"),
    # URL library
    ("url('https://a.example:8443/p%20q?x=1&x=2').getHost() == 'a.example:8443'", True),
    ("url('https://[::1]:80/').getHostname() == '::1' && url('https://[::1]:80/').getPort() == '80'", True),
    ("url('https://a.example/p?x=1&x=2').getQuery()['x'] == ['1', '2']", True),
    ("url('/relative/path').getScheme() == '' && url('https://a/b%2Fc').getEscapedPath() == '/b%2Fc'", True),
    ("isURL('https://a.example') && !isURL('a.example') && !isURL('')", True),
    # format library
    ("!format.dns1123Label().validate('good-name').hasValue()", True),
    ("format.dns1123Label().validate('Bad_Name').hasValue()", True),
    ("format.dns1123Subdomain().validate('a.b.example').orValue([]).size() == 0", True),
    ("format.dns1035Label().validate('1abc').value().size() == 1", True),
    ("!format.qualifiedName().validate('example.com/My.Name').hasValue()", True),
    ("format.labelValue().validate('-x').hasValue() && !format.uuid().validate("
     "'123e4567-e89b-12d3-a456-426614174000').hasValue()", True),
    # strings library (cel-go ext.Strings)
    ("'a/b/c'.split('/')[1] == 'b' && 'ABC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'", True),
    ("'abcd'.substring(1, 3) == 'bc' && '*.a'.substring(2) == 'a' && '  x '.trim() == 'x'", True),
    ("'abc'.indexOf('c') == 2 && 'abcabc'.lastIndexOf('a') == 3 && 'a-b'.replace('-', '_') == 'a_b'", True),
    ("['a', 'b'].join(',') == 'a,b' && 'abc'.charAt(1) == 'b'", True),
    # regex: RE2 semantics (unanchored, inline flags)
    ("'xabcx'.matches('abc') && 'ABC'.matches('^(?i)abc$') && !'abc'.matches('^b')", True),
    # lists and sets libraries
    ("[1, 2, 3].isSorted() && ![3, 1].isSorted() && [1, 2, 3].sum() == 6", True),
    ("[1, 5, 3].max() == 5 && [4, 2].min() == 2 && [1, 2, 1].lastIndexOf(1) == 2 && [1, 2].indexOf(2) == 1", True),
    ("sets.contains([1, 2, 3], [2]) && sets.equivalent([1, 2], [2, 1]) && !sets.intersects([1], [2])", True),
    # macros and duration
    ("[1, 2, 3].all(x, x > 0) && [1, 2, 3].exists_one(x, x == 2) && ![1, 1].exists_one(x, x == 1)", True),
    ("duration('1h30m') == duration('90m') && duration('1s') < duration('1500ms')", True),
    ("has(self.v) && !has(self.w)", True),
    ("[1].all(x, x > 5)", False),
]


@pytest.mark.parametrize(("expr", "expected"), EXTENSIONS, ids=[e[0][:60] for e in EXTENSIONS])
def test_the_kubernetes_cel_libraries(expr: str, expected: bool | str) -> None:
    schema = obj_schema({"rule": expr, "message": "no"}, v=STR)
    codes = [f.code for f in check(schema, {"v": "x"})]
    assert codes == {True: [], False: ["RG0300"], "error": ["RG0301"]}[expected]


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize(("rule", "code", "words"), [
    pytest.param("self.missing == 1", "RG0303", "no such key: missing evaluating rule: m", id="unset field read"),
    pytest.param("self.l[3] == 1", "RG0303", "index '3' out of range", id="index out of range"),
    pytest.param("duration(self.s) > duration('1s')", "RG0303", "String to Duration conversion failed",
                 id="unparsable duration"),
    pytest.param("self.n / 0 == 1", "RG0303", "division by zero", id="division by zero"),
    pytest.param("self.l[0] + 'a' == 'b'", "RG0301", "no such overload", id="type mismatch is the schema's to report"),
])
def test_runtime_errors_deny_when_the_object_causes_them(engine: str, rule: str, code: str, words: str) -> None:
    schema = obj_schema({"rule": rule, "message": "m"}, l={"type": "array"}, s=STR, n=INT, missing=INT)
    [finding] = check(schema, {"l": [1], "s": "soon", "n": 4}, engine=engine)
    assert finding.code == code
    assert words in finding.message
    assert finding.message.startswith('Invalid value: "object": ') == (code == "RG0303")


def test_a_rule_that_does_not_compile_is_a_counted_warning_at_every_node_it_guards() -> None:
    before = celchecks.COUNTERS["compile_errors"]
    schema = obj_schema(items={"type": "array", "items": obj_schema({"rule": "self.a ==", "message": "m"})})
    validator = celchecks.CelValidator.compile(schema, kind="Thing")
    assert celchecks.COUNTERS["compile_errors"] == before + 1
    assert len(validator.compile_errors) == 1
    findings = validator.validate({"items": [{}, {}]})
    assert [(f.code, f.severity, f.field) for f in findings] == [
        ("RG0301", Severity.WARN, "items[0]"), ("RG0301", Severity.WARN, "items[1]")]
    assert "self.a ==" in findings[0].message


def test_a_rule_with_a_non_bool_result_is_not_a_silent_pass() -> None:
    [finding] = check(obj_schema({"rule": "self.v"}, v=STR), {"v": "x"})
    assert (finding.code, finding.severity) == ("RG0301", Severity.WARN)


def test_the_estimated_cost_stops_a_quadratic_rule_on_a_huge_list_before_running_it() -> None:
    schema = obj_schema(xs={"type": "array", "items": INT, "x-kubernetes-validations": [
        {"rule": "self.all(a, self.exists_one(b, a == b))", "message": "unique"}]})
    start = time.perf_counter()
    findings = check(schema, {"xs": list(range(5000))})
    assert time.perf_counter() - start < 0.5
    assert [(f.code, f.severity, f.field) for f in findings] == [("RG0302", Severity.DENY, "xs")]
    assert "running out of cost budget" in findings[0].message
    assert check(schema, {"xs": list(range(90))}) == []
    assert [f.code for f in check(schema, {"xs": [1, 1]})] == ["RG0300"]
    # within the API server's limit but past cel-expr-python's fixed 10000-iteration cap: the rule
    # re-runs on the fallback engine, so the verdict still comes (without it: a warning, never a pass)
    if HAS_FALLBACK or PREFERRED != "cel-expr-python":
        assert check(schema, {"xs": list(range(300))}) == []
        assert [f.code for f in check(schema, {"xs": [*range(300), 7]})] == ["RG0300"]
    else:
        assert [f.code for f in check(schema, {"xs": list(range(300))})] == ["RG0301"]


def test_the_time_budget_stops_evaluation_and_denies() -> None:
    schema = obj_schema(xs={"type": "array", "items": obj_schema({"rule": "self.n >= 0"}, n=INT)})
    findings = check(schema, {"xs": [{"n": i} for i in range(2000)]}, budget=0.0)
    assert [(f.code, f.severity) for f in findings] == [("RG0302", Severity.DENY)]
    assert "longer than 0s" in findings[0].message
    assert check(schema, {"xs": [{"n": i} for i in range(2000)]}) == []


def test_a_huge_object_is_stopped_while_it_is_being_converted() -> None:
    schema = obj_schema(xs={"type": "array", "items": obj_schema(n=INT), "x-kubernetes-validations": [
        {"rule": "self.size() >= 0"}]})
    huge = {"xs": [{"n": i} for i in range(5000)]}
    # the deadline is checked every 1024 converted nodes, so an expired budget stops the conversion
    findings = check(schema, huge, budget=0.0)
    assert [(f.code, f.severity, f.field) for f in findings] == [("RG0302", Severity.DENY, "xs")]
    assert "converting the object for CEL took too long (1024 nodes so far)" in findings[0].message
    assert check(schema, huge) == []


def test_values_cel_cannot_take_are_warnings_not_crashes() -> None:
    schema = obj_schema({"rule": "true"}, v={"x-kubernetes-preserve-unknown-fields": True})
    deep: Any = "leaf"
    for _ in range(200):
        deep = {"d": deep}
    for value in (deep, {1: "int key"}, {"s": {1, 2}}, 2**80):
        assert all(f.severity is Severity.WARN for f in check(schema, {"v": value})), value


def test_the_engine_is_named_and_counters_are_plain_ints() -> None:
    assert celchecks.engine_name() == PREFERRED
    assert all(isinstance(v, int) for v in celchecks.COUNTERS.values())
    assert {i.code for i in celchecks.RULE_INFOS} == {"RG0300", "RG0301", "RG0302", "RG0303"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=6) | st.sampled_from(["rules", "matches", "path", "type", "value", "listeners",
                                               "namespace", "tls", "mode", "filters", "a", "b"]),
        inner, max_size=5),
    max_leaves=30,
)

FUZZ_SCHEMA = obj_schema(
    {"rule": "self.rules.all(r, r.matches.exists_one(m, m.path.value.startsWith('/')))"},
    {"rule": "duration(self.t) < duration('1h')", "messageExpression": "'t is ' + self.t"},
    {"rule": "self.n / self.d > 1 && self.s.matches(self.p)"},
    {"rule": "isIP(self.ip) && url(self.u).getHost() != '' && format.dns1123Label().validate(self.l).hasValue()"},
    {"rule": "self == oldSelf"},
    rules={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
           "items": obj_schema({"rule": "self.matches.size() < 3"}, name=STR,
                               matches={"type": "array", "items": {"type": "object",
                                                                   "x-kubernetes-preserve-unknown-fields": True}})},
    free={"type": "object", "additionalProperties": obj_schema({"rule": "self.a == self.b"}, a=INT, b=INT)},
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=json_values, old=json_values, engine=st.sampled_from(list(ENGINES)))
def test_arbitrary_objects_never_make_the_evaluator_raise(obj: Any, old: Any, engine: str) -> None:
    validator = celchecks.CelValidator.compile(FUZZ_SCHEMA, kind="Thing", engine=ENGINES[engine])
    for candidate in (obj, {"rules": obj, "free": old, "t": obj, "n": 1, "d": obj}):
        if isinstance(candidate, dict):
            findings = validator.validate(candidate, old=old if isinstance(old, dict) else None)
            assert all(isinstance(f, Finding) for f in findings)


@settings(max_examples=40, deadline=None)
@given(schema=json_values)
def test_arbitrary_schemas_never_make_compile_raise(schema: Any) -> None:
    validator = celchecks.CelValidator.compile(schema if isinstance(schema, dict) else {}, kind="Thing")
    assert isinstance(validator.validate({"a": 1}), list)
