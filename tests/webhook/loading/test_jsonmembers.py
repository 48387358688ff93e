"""JSON members recorded while a file is decoded are the ones found afterwards from scratch, and the
decode is json.loads's: the same value, the same error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.loading import inputs, jsonmembers
from webhook.loading.inputs import Located
from webhook.loading.positions import Positions

keys = st.sampled_from(("a", "b", "items", "spec", "x y", 'q"uote', "\u00e9t\u00e9"))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False),
                    st.text("ab \\\"/\n\u00e9", max_size=4))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(keys, inner, max_size=3)), max_leaves=12)
# Texts json.dumps cannot write: repeated keys, odd spacing, and broken JSON (cut, or a character swapped).
pieces = st.sampled_from(('{', '}', '[', ']', ',', ':', ' ', '\n', '\t', '\r', '"a"', '"items"', '1', 'true',
                          'null', '"x"', ', ', ',]', ',}', '{}', '[]'))
odd_texts = st.lists(pieces, max_size=14).map("".join)


def _outcome(load: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", load(text)
    except json.JSONDecodeError as exc:
        return "error", (exc.msg, exc.pos, exc.lineno, exc.colno)
    except RecursionError:
        return "deep", None


def _check_against_scratch(text: str) -> None:
    got = _outcome(jsonmembers.loads, text)
    expected = _outcome(json.loads, text)
    if got[0] == "value":
        doc, found = got[1]
        assert expected == ("value", doc)
        assert json.dumps(doc) == json.dumps(expected[1])  # the same key order too
        for at, members in found.items():
            assert members == jsonmembers.read(text, at)
    else:
        assert got == expected


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=4), st.sampled_from((None, 0, 2)), st.booleans(),
       st.sampled_from(("", "\n\n  ", " ")), st.sampled_from(("", "\n", " x")))
def test_members_recorded_while_decoding_equal_the_ones_found_after(doc: dict[str, Any], indent: int | None,
                                                                     ascii_only: bool, lead: str, tail: str) -> None:
    _check_against_scratch(lead + json.dumps(doc, indent=indent, ensure_ascii=ascii_only) + tail)


@settings(max_examples=300, deadline=None)
@given(odd_texts)
def test_odd_and_broken_texts_decode_or_fail_as_json_loads(text: str) -> None:
    _check_against_scratch(text)


@pytest.mark.parametrize("text", ['{"items": [1, 2], "items": [3]}', '{"a": 1,}', '{"a": [1,]}', '{"a": 1} x',
                                  '{"a" 1}', '{1: 2}', '{"a": [1] ]', '\r\n{"a": [1]}', '[1, 2]', '"s"', ''])
def test_edge_texts(text: str) -> None:
    _check_against_scratch(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(keys, values, max_size=4), min_size=1, max_size=3), st.sampled_from((None, 2)),
       st.integers(0, 2), st.lists(st.one_of(keys, st.integers(0, 3)), max_size=4),
       st.sampled_from(("", "\n\n  ")))
def test_positions_from_recorded_members_equal_the_ones_from_scratch(
        items: list[dict[str, Any]], indent: int | None, pick: int, path: list[str | int], lead: str) -> None:
    text = lead + json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=indent)
    members: dict[int, jsonmembers.Members] = {}
    decoded = [i for i in inputs.parse_text(text, "f.json", members) if isinstance(i, Located)]
    assert members  # recorded: the root and its items
    index = pick % len(items)
    item = Located(items[index], "f.json", 1, 1, 0, ("items", index))
    texts = {"f.json": text}
    recorded = Positions(texts, {"f.json": members})
    assert recorded.of(item, path) == Positions(texts).of(item, path)
    assert [recorded.of(i) for i in decoded] == [Positions(texts).of(i) for i in decoded]


def test_reading_with_texts_records_the_members_of_each_json_file(tmp_path: Any) -> None:
    items = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "a"}}
             for i in range(3)]
    (tmp_path / "s.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    (tmp_path / "t.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: t}\n")
    loaded = inputs.read([str(tmp_path)], keep_texts=True)
    assert [o.obj for o in loaded.objects][:3] == items
    json_file = str(tmp_path / "s.json")
    assert set(loaded.members[json_file]) == {0, loaded.texts[json_file].index("[")}
    assert loaded.members[str(tmp_path / "t.yaml")] == {}
    assert inputs.read([str(tmp_path)]).members == {}
