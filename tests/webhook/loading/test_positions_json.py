"""Field positions in a JSON file, found with json's decoder, are the ones composing it as YAML gives."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.loading.inputs import Located
from webhook.loading.positions import Positions

keys = st.sampled_from(("a", "b", "spec", "rules", "x y", 'q"uote', "\u00e9t\u00e9"))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text("ab \\\"/\n\u00e9", max_size=4))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(keys, inner, max_size=3)), max_leaves=12)
parts = st.lists(st.one_of(keys, st.integers(0, 3)), max_size=4)


class _Composed(Positions):
    """Positions as before: every file composed as YAML."""

    def _json_text(self, file: str) -> None:
        return None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(keys, values, max_size=4), min_size=1, max_size=3), st.sampled_from((None, 2)),
       st.booleans(), st.integers(0, 2), parts, st.sampled_from(("", "\n\n  ")))
def test_json_positions_equal_the_composed_ones(items: list[dict[str, Any]], indent: int | None, ascii_only: bool,
                                                 pick: int, path: list[str | int], lead: str) -> None:
    text = lead + json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=indent,
                             ensure_ascii=ascii_only)
    index = pick % len(items)
    item = Located(items[index], "f.json", 1, 1, 0, ("items", index))
    texts = {"f.json": text}
    assert Positions(texts).of(item, path) == _Composed(texts).of(item, path)


def test_a_field_of_the_ten_thousandth_item_is_found_without_composing() -> None:
    items = [{"metadata": {"name": f"r{i}"}, "spec": {"rules": [{"x": i}]}} for i in range(10_000)]
    text = json.dumps({"items": items})
    positions = Positions({"f.json": text})
    item = Located(items[9_999], "f.json", 1, 1, 0, ("items", 9_999))
    line, column = positions.of(item, ("spec", "rules", 0, "x"))
    assert line == 1 and text[column - 1:].startswith("9999}")
    assert positions._documents == {}  # never composed as YAML
