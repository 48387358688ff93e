"""JSON manifests are read as JSON (as the API server reads them), with the line of the document kept."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.loading import inputs


def test_a_json_list_is_read_as_json_with_its_line() -> None:
    items = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "a"},
              "spec": {"ports": [{"port": 80 + i}]}} for i in range(3)]
    text = "\n\n" + json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    got = [g for g in inputs.parse_text(text, "x.json") if isinstance(g, inputs.Located)]
    assert [g.obj for g in got] == items
    assert {g.line for g in got} == {3}


def test_json_numbers_follow_json_not_yaml_1_1() -> None:
    # YAML 1.1 reads 1e3 as the string "1e3"; the API server (and this reader) read JSON as JSON.
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1e3}}'
    [got] = inputs.parse_text(text, "c.json")
    assert isinstance(got, inputs.Located) and got.obj["data"]["n"] == 1000.0


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
tricky = st.text(st.sampled_from('ab"\\[]{}/\n\u00e9\u2028'), max_size=6)
nested = st.recursive(st.one_of(st.none(), st.integers(), tricky),
                      lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(tricky, inner, max_size=3)),
                      max_leaves=15)


@settings(max_examples=300, deadline=None)
@given(nested, st.booleans(), st.sampled_from((None, 1)))
def test_brackets_outside_strings_are_the_ones_a_string_regex_leaves(value: Any, ascii_only: bool,
                                                                      indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    expected = _NOT_BRACKET.sub("", _STRING.sub("", text))
    assert inputs._brackets_outside_strings(text) == expected.encode()


def test_json_nested_too_deep_is_refused_and_brackets_in_strings_do_not_count() -> None:
    deep = "[" * 101 + "]" * 101
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"d": ' + json.dumps(
        "[" * 500 + '\\"{') + ', "x": ' + deep + "}}"
    [got] = inputs.parse_text(text, "c.json")
    assert isinstance(got, inputs.Problem) and "nesting deeper than 100" in got.message
    [ok] = inputs.parse_text(text.replace(deep, "[]"), "c.json")
    assert isinstance(ok, inputs.Located)
