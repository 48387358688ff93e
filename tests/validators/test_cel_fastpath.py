"""The one-call paths of CelValidator (the whole new object in one program, a node's rules in one
call) against the original per-rule walk (tests/validators/celreference.py), on the real Gateway API
v1.6.1 CRDs and the Route CRD: valid objects, mutated ones that fail rules or break their types,
UPDATEs with old objects (transition rules, ratcheting), and spent budgets. Findings must be equal:
code, severity, field path, message and order."""

from __future__ import annotations

import copy
import functools
import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.validators.celreference import ReferenceValidator
from tests.validators.test_cel_gatewayapi import _paths, _replaced
from validators.cel import celchecks, celengines, celfunctions, celwhole
from validators.schema import structural
from validators.schema.crds import SchemaSet

if "cel-expr-python" not in celengines.installed():
    pytest.skip("the one-call paths need cel-expr-python", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = next((p for p in (REPO.parent / "shared" / "fixtures" / "admission-reviews",
                             Path("/work/shared/fixtures/admission-reviews")) if p.is_dir()), None)
GATEWAY_API = next((p for p in (REPO.parent / "shared" / "gateway-api" / "v1.6.1",
                                Path("/work/shared/gateway-api/v1.6.1")) if p.is_dir()), None)


@functools.cache
def schema_sets() -> dict[str, SchemaSet]:
    """The bundled CRDs (experimental channel + Route CRD) and, when beside the checkout, standard."""
    data = (REPO / "webhook" / "bundled" / "crds.json.gz").read_bytes()
    out = {"bundled": SchemaSet.from_documents(json.loads(gzip.decompress(data))["items"])}
    if GATEWAY_API is not None:
        docs = list(yaml.safe_load_all((GATEWAY_API / "standard-install.yaml").read_text()))
        out["standard"] = SchemaSet.from_documents([d for d in docs if isinstance(d, dict)])
    return out


@functools.cache
def validators(bundle: str, group: str, version: str, kind: str) -> tuple[celchecks.CelValidator, Any]:
    schema = schema_sets()[bundle].get(group, version, kind)
    assert schema is not None
    return celchecks.CelValidator.compile(schema, kind=kind, engine=celengines.CppEngine()), schema


def _seeds() -> list[dict[str, Any]]:
    docs: list[Any] = []
    for name in ("render/basic.yaml", "render/filters.yaml", "render/grpc-https.yaml", "render/live-policies.yaml",
                 "render_l4/routes-crd.yaml", "render_l4/listenersets.yaml", "render_l4/tls.yaml",
                 "render_l4/backendtls.yaml"):
        docs += yaml.safe_load_all((REPO / "tests" / "data" / name).read_text())
    if FIXTURES is not None:
        for path in sorted(FIXTURES.glob("*.json")):
            request = json.loads(path.read_text())["request"]
            docs += [request.get("object"), request.get("oldObject")]
    kinds = {key[2] for key in schema_sets()["bundled"]}
    return [d for d in docs if isinstance(d, dict) and d.get("kind") in kinds and isinstance(d.get("spec"), dict)]


SEEDS = _seeds()


def key_of(obj: dict[str, Any]) -> tuple[str, str, str]:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    return group, version, obj["kind"]


def _deleted(value: Any, path: tuple[Any, ...]) -> Any:
    head, *rest = path
    copied = copy.copy(value)
    if rest:
        copied[head] = _deleted(value[head], tuple(rest))
    elif isinstance(copied, dict):
        del copied[head]
    else:
        copied.pop(head)
    return copied


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


# values that make Gateway API rules false or error: bad paths, wrong types for a filter, duplicate
# names, durations that do not parse or compare badly, integers CEL cannot hold
bad_strings = st.sampled_from([
    "", "/", "a", "/a//b", "/x/./y", "/x/../y", "/%2f", "/%2F", "/#", "/a/..", "/a/.", "x y", "/api",
    "Exact", "PathPrefix", "RegularExpression", "RequestRedirect", "URLRewrite", "RequestHeaderModifier",
    "ResponseHeaderModifier", "RequestMirror", "CORS", "ExtensionRef", "ReplaceFullPath", "ReplacePrefixMatch",
    "Service", "HTTPS", "HTTP", "TLS", "TCP", "Terminate", "Passthrough", "10s", "1h", "2h", "soon", "0s",
    "http", "https", "gw", "svc", "web", "core", "", "example.com", "*.example.com",
])
scalars = (st.none() | st.booleans() | st.integers(-5, 70000) | st.sampled_from([2**63, -(2**64)])
           | st.floats(allow_nan=False) | st.text(max_size=5) | bad_strings)
fuzz_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "value", "name", "path", "port", "kind", "group", "weight", "tls", "mode",
                         "protocol", "hostname", "matches", "filters", "backendRefs", "requestRedirect",
                         "urlRewrite", "replaceFullPath", "replacePrefixMatch", "timeouts", "request",
                         "backendRequest", "sectionName", "namespace", "x"]), inner, max_size=4),
    max_leaves=10,
)


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(seed)
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(obj["spec"])
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "duplicate", "bad", "bad", "bad"]))
        if action == "delete" and path:
            obj = {**obj, "spec": _deleted(obj["spec"], path)}
        elif action == "duplicate" and isinstance(_at(obj["spec"], path), list) and _at(obj["spec"], path):
            items = _at(obj["spec"], path)
            obj = {**obj, "spec": _replaced(obj["spec"], path, [*items, copy.deepcopy(draw(st.sampled_from(items)))])}
        elif action == "bad":  # a string leaf gets a value of the right type that a rule may refuse
            leaves = [p for p in paths if isinstance(_at(obj["spec"], p), str)] or [path]
            obj = {**obj, "spec": _replaced(obj["spec"], draw(st.sampled_from(leaves)), draw(bad_strings))}
        else:
            obj = {**obj, "spec": _replaced(obj["spec"], path, draw(fuzz_values))}
    return obj


def both(validator: celchecks.CelValidator, obj: Any, old: Any = None, budget: float = 0.5) -> tuple[Any, Any]:
    new = validator.validate(obj, old=old, budget_seconds=budget)
    reference = ReferenceValidator(validator).validate(obj, old=old, budget_seconds=budget)
    return new, reference


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS), bundle=st.sampled_from(["bundled", "standard"]),
       shaped=st.booleans(), update=st.sampled_from(["create", "old seed", "old mutated", "unchanged"]))
def test_findings_equal_the_per_rule_walk(data: st.DataObject, seed: dict[str, Any], bundle: str, shaped: bool,
                                          update: str) -> None:
    if bundle not in schema_sets() or schema_sets()[bundle].get(*key_of(seed)) is None:
        bundle = "bundled"
    validator, schema = validators(bundle, *key_of(seed))
    obj = data.draw(mutated(seed))
    old = {"create": None, "old seed": seed, "old mutated": data.draw(mutated(seed)), "unchanged": obj}[update]
    if shaped:  # as schemas.check hands them over: pruned and defaulted
        obj = structural.apply(obj, schema).value
        old = None if old is None else structural.apply(old, schema).value
    new, reference = both(validator, obj, old)
    assert new == reference


@pytest.mark.parametrize("seed", SEEDS, ids=[f"{s['kind']}-{s['metadata'].get('name')}" for s in SEEDS])
def test_every_seed_as_create_and_update(seed: dict[str, Any]) -> None:
    for bundle in schema_sets():
        if schema_sets()[bundle].get(*key_of(seed)) is None:
            continue
        validator, schema = validators(bundle, *key_of(seed))
        shaped = structural.apply(seed, schema).value
        for obj, old in ((seed, None), (shaped, None), (shaped, shaped), (shaped, {**shaped, "spec": {}})):
            new, reference = both(validator, obj, old)
            assert new == reference


def test_the_whole_object_program_exists_for_the_kinds_checked_most() -> None:
    """Guards the speed: without a program every object takes the walk (still correct, 4x slower)."""
    for kind in ("HTTPRoute", "Gateway", "GRPCRoute", "TLSRoute", "ListenerSet", "BackendTLSPolicy"):
        validator, _ = validators("bundled", "gateway.networking.k8s.io", "v1", kind)
        assert validator._engine is not None
        assert celwhole.compile_whole(validator._root, validator._engine) is not None, kind


def test_a_spent_budget_stops_both_the_same_way() -> None:
    seed = next(s for s in SEEDS if s["kind"] == "HTTPRoute")
    validator, schema = validators("bundled", *key_of(seed))
    new, reference = both(validator, structural.apply(seed, schema).value, budget=0.0)
    assert new == reference and [f.code for f in new] == ["RG0302"]


def test_a_failing_object_is_judged_by_the_walk_with_its_own_messages() -> None:
    seed = next(s for s in SEEDS if s["kind"] == "HTTPRoute" and s["spec"].get("rules"))
    validator, schema = validators("bundled", *key_of(seed))
    bad = copy.deepcopy(seed)
    bad["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/a//b"}}]
    new, reference = both(validator, structural.apply(bad, schema).value)
    assert new == reference
    assert [f.field for f in new] == ["spec.rules[0].matches[0].path"]


@pytest.mark.parametrize(("text", "pattern"), [
    ("/api/v1", r"^/api"), ("/x", r"^/api"), ("a.b", r"a\.b"), ("ab", r"a\.b"), ("ü", r"^.$"), ("", r"^$"),
    ("xAy", r"(?i)a"), ("line\nnext", r"^next$"), ("/p", r"""^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$"""),
])
def test_precompiled_matches_agrees_with_cel_matches(text: str, pattern: str) -> None:
    engine = celengines.CppEngine()
    plain = engine.compile("self.t.matches(self.p)")
    fast = engine.compile(celfunctions.precompiled_regexes("self.t.matches(self.p)"))
    bound = engine.bind({"self": {"t": text, "p": pattern}, "oldSelf": None, "__old": None, "__hasOld": False})
    assert fast.run(bound) == plain.run(bound)


def test_precompiled_regexes_rewrites_only_member_calls_outside_strings() -> None:
    text = "self.matches('x.matches(y)') && matches(self, 'a') && self . matches ('b')"
    rewritten = celfunctions.precompiled_regexes(text)
    assert rewritten == "self.__matchesRe2('x.matches(y)') && matches(self, 'a') && self .__matchesRe2('b')"


def _odd_olds(shaped: dict[str, Any]) -> list[Any]:
    """Old objects a rule never reads but whose conversion or comparison the walk still does."""
    deep: Any = "leaf"
    for _ in range(80):
        deep = {"x": deep}
    first = shaped["spec"]["rules"][0]
    return [
        copy.deepcopy(shaped),
        {**shaped, "spec": {**shaped["spec"], "rules": [{**first, "name": Decimal(1)}]}},
        {**shaped, "spec": {**shaped["spec"], "rules": [{**first, 7: "int key"}]}},
        {**shaped, "spec": {**shaped["spec"], "rules": [{**first, "name": 2**80}]}},
        {**shaped, "spec": {**shaped["spec"], "hostnames": deep}},
        {**shaped, "spec": {**shaped["spec"], "rules": ({**first},)}},
    ]


def test_updates_with_odd_old_objects_are_judged_as_the_walk_judges_them() -> None:
    seed = next(s for s in SEEDS if s["kind"] == "HTTPRoute" and s["spec"].get("rules"))
    validator, schema = validators("bundled", *key_of(seed))
    shaped = structural.apply(seed, schema).value
    for old in _odd_olds(shaped):
        for obj in (shaped, old):
            new, reference = both(validator, obj, old)
            assert new == reference, old


@pytest.mark.parametrize("rule", [
    {"rule": "self.n >= 0"},
    {"rule": "self.n >= 0", "optionalOldSelf": True},  # wrapped in a binding of the old node
    {"rule": "!__hasOld || self.n >= __old.n"},  # reads the old node without naming oldSelf
    {"rule": "self.n >= oldSelf.n"},
    {"rule": "oldSelf.hasValue() ? self.n >= oldSelf.value().n : true", "optionalOldSelf": True},
])
def test_rules_that_may_read_the_old_object_keep_updates_on_the_walk(rule: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [rule],
                                                        "properties": {"n": {"type": "integer"}}}}}
    validator = celchecks.CelValidator.compile(schema, kind="Thing", engine=celengines.CppEngine())
    for obj, old in (({"spec": {"n": 1}}, {"spec": {"n": 2}}), ({"spec": {"n": 1}}, {"spec": {"n": 2**80}}),
                     ({"spec": {"n": 3}}, {"spec": {"n": 2}}), ({"spec": {"n": -1}}, {"spec": {"n": -1}}),
                     ({"spec": {"n": -1}}, None)):
        new, reference = both(validator, obj, old)
        assert new == reference, (obj, old)


_PATTERNS = [r"^/api", r"a\.b", r"^.$", r"^$", r"(?i)a", r"^next$", r"ü+", r"\bx", r"^[a-z]+$", r"$",
             r"""^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$""", r"(a|b)*c", r"\x{2603}"]


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=12) | st.sampled_from(["/api/v1", "line\nnext", "a.b", "☃", "\ud800", "x\x00"]),
       pattern=st.sampled_from(_PATTERNS))
def test_the_precompiled_match_answers_as_the_wrappers_search(text: str, pattern: str) -> None:
    """``__matchesRe2`` calls RE2's match on the text's UTF-8 itself: the answer (or the error) of the
    re2 wrapper's public ``search``."""
    def outcome(run: Any) -> Any:
        try:
            return run()
        except Exception as e:  # a lone surrogate cannot be encoded: the same error both ways
            return type(e)
    public = celfunctions._re2(pattern)
    assert outcome(lambda: celfunctions._matches(text, pattern)) == outcome(
        lambda: public.search(text) is not None)
