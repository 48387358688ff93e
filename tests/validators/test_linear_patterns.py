"""CRD patterns run on RE2 only (issue 16, item 1): no bundled pattern can be evaluated by a backtracking
engine, ``maxLength`` is checked before any pattern, and one object's validators share a CPU budget."""

from __future__ import annotations

import gzip
import json
import re
import string
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from validators import budgets, codes
from validators.cel.celfunctions import _find, _find_all
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.findings import Severity
from validators.schema import schemas
from validators.schema.crds import SchemaSet
from validators.schema.schemaformats import GoPattern, go_pattern, pattern_problem
from validators.schema.schemakeywords import pattern as pattern_keyword
from validators.states import MemoryState

BUNDLE = Path(__file__).resolve().parents[2] / "webhook" / "bundled" / "crds.json.gz"
RE2_TYPE = type(re2.compile("a"))


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


BUNDLED = sorted(set(_patterns(json.loads(gzip.decompress(BUNDLE.read_bytes()))["items"])))

# Shapes that make backtracking engines explode on nested or adjacent quantifiers: a long run the
# pattern almost accepts, then one character that forces every way of splitting the run to be tried.
RUNS = ("a", "a-", "a.", "a.a-", "0", "0s", "! ", "!\t!", "-", "A_", "%2", "a/", "*.", "http://a.")
BREAKERS = ("\x00", "!", "\n", " ", "-", ".", "\u00e9", "/", "$")


def _evil_values(length: int = 4000) -> list[str]:
    return [run * (length // len(run)) + end for run in RUNS for end in BREAKERS]


def test_the_bundle_has_the_patterns_the_issue_names() -> None:
    assert len(BUNDLED) >= 20
    assert r"^[!-~]+([\t ]?[!-~]+)*$" in BUNDLED  # header values (exponential in Python's re)


@pytest.mark.parametrize("text", BUNDLED)
def test_every_bundled_pattern_compiles_to_an_re2_object(text: str) -> None:
    compiled = go_pattern(text)
    assert isinstance(compiled, GoPattern), pattern_problem(text)
    assert isinstance(compiled.regexp, RE2_TYPE)
    assert not isinstance(compiled.regexp, re.Pattern)


@pytest.fixture
def no_backtracking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's ``re`` refuses to compile anything new while the test runs: a pattern that reached it
    (rather than RE2) would fail the test instead of backtracking."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"Python's re compiled {args[:1]!r}: a CRD pattern must run on RE2")

    monkeypatch.setattr(re, "_compile", refuse)


@pytest.mark.parametrize("text", BUNDLED)
def test_known_redos_shapes_take_the_linear_path(text: str, no_backtracking: None) -> None:
    compiled = go_pattern(text)
    assert isinstance(compiled, GoPattern) and isinstance(compiled.regexp, RE2_TYPE)
    for value in _evil_values():
        errors = list(pattern_keyword(None, text, value, {}))  # type: ignore[arg-type]
        assert len(errors) <= 1
        assert bool(errors) is not compiled.search(value)


ASCII = st.text(alphabet=string.ascii_letters + string.digits + string.punctuation + " \t", max_size=14)


@pytest.mark.parametrize("text", BUNDLED)
@settings(max_examples=40, deadline=None)
@given(value=ASCII)
def test_re2_agrees_with_go_semantics_on_short_values(text: str, value: str) -> None:
    """Differential against Python's ``re`` where the two agree with Go (printable ASCII, no newline:
    ``$`` is the end of text and ``\\s`` is ASCII space in both), on values too short to backtrack long."""
    compiled = go_pattern(text)
    assert compiled is not None
    assert compiled.search(value) is (re.search(text, value) is not None)


@pytest.mark.parametrize("text", BUNDLED)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_generated_members_plus_a_breaker_are_judged_by_re2(text: str, data: st.DataObject) -> None:
    printable = st.characters(min_codepoint=0x09, max_codepoint=0x7E, exclude_characters="\n\x0b\x0c\r")
    member = data.draw(st.from_regex(text, fullmatch=True, alphabet=printable))
    compiled = go_pattern(text)
    assert compiled is not None and compiled.search(member)
    hostile = member * 50 + data.draw(st.sampled_from(BREAKERS))
    assert isinstance(compiled.search(hostile), bool)


def test_max_length_is_checked_before_the_pattern() -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "maxLength": 8,
                                                     "pattern": r"^[!-~]+([\t ]?[!-~]+)*$"}}}
    outcome = schemas.check({"v": "a" * 40 + "\x00"}, schema, kind="X")
    assert [f.message for f in outcome.findings] == ["Too long: may not be more than 8 bytes"]


def test_a_pattern_re2_rejects_is_reported_not_run_by_pythons_re(no_backtracking: None) -> None:
    lookahead = r"^(?=a)a+$"  # valid in Python's re, not in Go's regexp (RE2)
    assert pattern_problem(lookahead)
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": lookahead}}}
    [finding] = schemas.check({"v": "b"}, schema, kind="X").findings
    assert finding.code == codes.SCHEMA_UNCHECKED and finding.severity is Severity.WARN
    assert "not valid RE2 syntax" in finding.message and "(?=a)" in finding.message
    assert finding.path == ("v",)


def test_go_dollar_and_lone_surrogates() -> None:
    compiled = go_pattern("^[a-z]+$")
    assert compiled is not None
    assert not compiled.search("name\n")
    assert compiled.search("name")
    anything = go_pattern("^.+$")
    assert anything is not None and anything.search("\ud800")  # read as U+FFFD, as Go's JSON decoder does


ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
         "metadata": {"name": "r", "namespace": "t"}, "spec": {"parentRefs": [{"name": "gw"}]}}


def _bundled_schemas() -> SchemaSet:
    return SchemaSet.from_documents(json.loads(gzip.decompress(BUNDLE.read_bytes()))["items"])


def test_one_object_that_runs_out_of_cpu_budget_is_denied_with_one_finding() -> None:
    checks = Checks(schemas=_bundled_schemas(), cpu_budget_seconds=-1.0)  # already used up
    found = checks.check(Change(Operation.CREATE, ROUTE), MemoryState())
    assert [f.code for f in found] == [codes.VALIDATION_BUDGET]
    assert found[0].severity is Severity.DENY
    assert "CPU time" in found[0].message and "no further checks ran" in found[0].message


def test_the_budget_is_not_swallowed_by_the_guards_that_turn_bugs_into_warnings() -> None:
    schema = _bundled_schemas().get("gateway.networking.k8s.io", "v1", "HTTPRoute")
    assert schema is not None
    with budgets.limited(-1.0), pytest.raises(budgets.OverBudget):
        schemas.check(ROUTE, schema, kind="HTTPRoute")


def test_the_cpu_clock_is_read_every_few_steps_and_a_spent_budget_still_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []

    def clock() -> float:  # one CPU second passes between two reads
        reads.append(len(reads))
        return float(len(reads) - 1)

    monkeypatch.setattr(budgets, "cputime", SimpleNamespace(now=clock))
    steps = 0
    with budgets.limited(5.0), pytest.raises(budgets.OverBudget):  # deadline: 0 + 5
        while steps < 10_000:
            steps += 1
            budgets.spend("items")
    # Read at limited() and on spends 1, 33, 65, ...: the sixth spend's read (6 > 5) stops it.
    assert len(reads) == 7 and steps == 1 + 5 * budgets.CLOCK_EVERY


def test_a_normal_object_stays_well_inside_the_default_budget() -> None:
    found = Checks(schemas=_bundled_schemas()).check(Change(Operation.CREATE, ROUTE), MemoryState())
    assert codes.VALIDATION_BUDGET not in {f.code for f in found}


def test_cel_find_and_find_all_run_on_re2(no_backtracking: None) -> None:
    assert _find("\x0b", r"\s") == ""  # Go's \s is [\t\n\f\r ]; Python's re also matches \v
    assert _find("ab12", "[0-9]+") == "12" and _find_all("a1b22c333", "[0-9]+", 2) == ["1", "22"]
    assert _find("!" * 5000 + "\x00", r"^[!-~]+([\t ]?[!-~]+)*$") == ""
    with pytest.raises(ValueError) as info:
        _find("a", "(?=a)")
    assert str(info.value).startswith("invalid RE2 pattern")


LOOKAHEAD_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {"items": {
                     "type": "array", "items": {"type": "string", "pattern": "^(?=a)a+$"}}}}}}}}]},
}


def test_crds_with_a_pattern_re2_rejects_are_refused_at_load(tmp_path: Path) -> None:
    from validators.schema.crds import pattern_problems
    from webhook.gate.assembly import bundled_crd_documents, load_crd_documents
    from webhook.setuperrors import SetupError

    assert pattern_problems(bundled_crd_documents()) == []
    [problem] = pattern_problems([LOOKAHEAD_CRD])
    assert problem.startswith("CustomResourceDefinition widgets.example.com v1: spec.items[*]: pattern "
                              "'^(?=a)a+$' is not valid RE2 syntax (")
    crd_file = tmp_path / "widgets.yaml"
    crd_file.write_text(json.dumps(LOOKAHEAD_CRD))
    with pytest.raises(SetupError) as info:
        load_crd_documents([str(crd_file)])
    assert str(info.value).startswith("--crds: CustomResourceDefinition widgets.example.com v1: spec.items[*]:")
    assert "the API server would refuse this CRD" in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(BUNDLED), st.text(alphabet="aZ0-./_ *:!\t\n\u00e9\ud800$", max_size=40)
       | st.sampled_from(["", "a", "example.com", "/api", "X-Route", "10.0.0.1", "\ud800"]))
def test_go_pattern_search_answers_as_the_re2_wrappers_search(pattern: str, value: str) -> None:
    """GoPattern.search asks RE2's match directly on UTF-8 bytes; the wrapper's search (offsets mapped
    back to characters) must agree on every bundled pattern, lone surrogates read as U+FFFD."""
    compiled = go_pattern(pattern)
    assert compiled is not None
    repaired = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert compiled.search(value) is (compiled.regexp.search(repaired) is not None)
