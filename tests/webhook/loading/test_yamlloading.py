"""The fast YAML loader returns exactly what PyYAML's safe loader returns (differential)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.loading import inputs, yamlloading

REFERENCE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Plain scalars YAML 1.1 resolves to something other than a string, and strings that look like them.
TRICKY = ["yes", "No", "on", "OFF", "y", "~", "null", "Null", "", "0x1F", "0o17", "017", "1_000", "1:20",
          "190:20:30", ".inf", "-.Inf", ".NaN", "1.5e3", "+1", "-0", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
          "<<", "=", "!!str", "#x", "a: b", "- a", "[a]", "{a}", "*a", "&a", "%x", "@x", "`x", "'q'", '"d"']
scalars = st.one_of(st.sampled_from(TRICKY), st.text(max_size=12), st.integers(), st.booleans(), st.none(),
                    st.floats(allow_nan=False), st.dates())
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(TRICKY)),
                                                 inner, max_size=4)), max_leaves=20)


def same(text: str) -> None:
    """Equal values, or both refuse the text (the same error class)."""
    try:
        expected: Any = list(yaml.load_all(text, Loader=REFERENCE))
    except yaml.YAMLError as exc:
        expected = type(exc)
    try:
        got: Any = list(yaml.load_all(text, Loader=yamlloading.FastSafeLoader))
    except yaml.YAMLError as exc:
        got = type(exc)
    assert repr(got) == repr(expected), text


@settings(max_examples=150, deadline=None)
@given(values, st.sampled_from([None, True, False]))
def test_dumped_values_load_the_same(value: Any, flow: bool | None) -> None:
    same(yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(TRICKY), min_size=1, max_size=6))
def test_plain_scalars_resolve_the_same(words: list[str]) -> None:
    plain = [w for w in words if w and w[0] not in "#&*!|>'\"%@`[]{},-?:" and ": " not in w]
    same("\n".join(f"k{i}: {w}" for i, w in enumerate(plain)))


@pytest.mark.parametrize("text", [
    "a: &x {k: 1}\nb:\n  <<: *x\n  j: 2\n",
    "c: 2001-12-14t21:59:43.10-05:00\nd: !!binary aGVsbG8=\ne: !!set {a, b}\n",
    "g: {1: a, 2.5: b, null: c, true: d}\n",
    "h: !!str 123\ni: !!int '7'\nj: !!float '1'\n",
    "k: !!omap [{a: 1}, {b: 2}]\nl: !!pairs [{a: 1}, {a: 2}]\n",
    "--- 1\n--- [a]\n---\n...\n--- {a: b}\n",
    "m: |\n  line\n  ---x\nn: >-\n  folded\n  text\n",
])
def test_the_rare_constructs_load_the_same(text: str) -> None:
    same(text)


def test_aliases_are_refused_also_through_merge_keys_and_slow_paths() -> None:
    for text in ("a: &a [1]\nb: *a\n", "a: &x {k: 1}\nb:\n  <<: *x\n", "a: &a 1\nb: {c: 2001-01-01, d: *a}\n",
                 "a: &a 1\nb: !!set {? *a}\n"):
        with pytest.raises(yamlloading.AliasRefused):
            yaml.load(text, Loader=yamlloading.NoAliasLoader)
    # an anchor used once is no alias
    assert yaml.load("a: &a {b: 2001-01-01}\n", Loader=yamlloading.NoAliasLoader) == \
        {"a": {"b": datetime.date(2001, 1, 1)}}


json_values = st.recursive(st.one_of(st.text(alphabet='[]{}"\\ab', max_size=6), st.integers(), st.none()),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner,
                                                                   max_size=3)), max_leaves=30)


def _nested(shape: list[tuple[bool, Any]]) -> Any:
    """A value nesting one level per entry of ``shape`` (a list or an object at each), with a sibling."""
    value: Any = None
    for as_list, sibling in reversed(shape):
        value = [sibling, value] if as_list else {"s": sibling, "v": value}
    return value


@settings(max_examples=60, deadline=None)
@given(st.one_of(json_values, st.lists(st.tuples(st.booleans(), json_values), min_size=30, max_size=130).map(_nested)))
def test_the_too_deep_bound_answers_as_the_exact_depth(value: Any) -> None:
    """The passes that bound the depth (at most two levels each) decide as the exact scan would, on
    both sides of MAX_DEPTH and where the bound leaves it open (depth 51 to 200 of mixed lists and objects)."""
    import json

    from webhook.loading import inputs

    text = json.dumps(value)
    depth = inputs._depth(value) if isinstance(value, dict | list) else 0
    assert inputs._json_too_deep(text) is (depth > inputs.MAX_DEPTH)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_json_depth_scan_equals_a_walk_of_the_decoded_value(value: Any) -> None:
    import json

    from webhook.loading import inputs

    text = json.dumps(value)
    assert inputs._json_depth(text) == min(inputs._depth(value) if isinstance(value, dict | list) else 0,
                                           inputs.MAX_DEPTH + 1)


@pytest.mark.parametrize(("text", "line", "column"), [
    ("a: " + "[" * 1200 + "]" * 1200, 0, 3 + 99),  # the top mapping, then 100 brackets
    ("a: " + "{b: " * 1200 + "1" + "}" * 1200, 0, 3 + 99 * 4),  # the top mapping, then 100 braces
    ("x:\n" + "".join("  " * i + "- \n" for i in range(1, 1200)), 100, 200),  # one sequence a line
], ids=["flow sequence", "flow mapping", "block sequence"])
def test_too_deep_is_reported_at_our_limit_whatever_libyaml_refuses_itself(text: str, line: int, column: int) -> None:
    # newer libyaml releases stop deep flow collections at a limit of their own, in their own words,
    # before the first event: routegate still reports where its own limit is passed, in its own words
    mark = inputs.deep_at(text)
    assert mark is not None and (mark.line, mark.column) == (line, column)
    found = list(inputs.parse_text(text, "deep.yaml"))
    assert found == [inputs.Problem("deep.yaml", line + 1, column + 1, "invalid YAML: nesting deeper than 100 levels")]


def test_a_settings_file_too_deep_is_one_line_in_routegates_words(tmp_path: Path) -> None:
    from webhook.loading import settingsfiles

    path = tmp_path / "config.yaml"
    path.write_text("rules: " + "[" * 1500 + "]" * 1500 + "\n")
    with pytest.raises(settingsfiles.SettingsError) as raised:
        settingsfiles.load(str(path))
    assert str(raised.value) == f"--config {path}:1:107: invalid YAML: nesting deeper than 100 levels"
