"""One string object per distinct value in a state the server holds; values stay what they were."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.process.sharedstrings import share_strings

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["a", "b", "HTTPRoute", ""]) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=20,
)


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=3), JSON, max_size=4), max_size=4))
def test_values_are_unchanged_and_equal_strings_are_one_object(objects: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(objects)
    share_strings(objects)
    assert objects == before
    assert json.dumps(objects) == json.dumps(before)  # the order of keys and items too
    first: dict[str, str] = {}
    for s in _strings(objects):
        assert first.setdefault(s, s) is s


def test_decoded_objects_share_their_values_across_objects() -> None:
    text = '{"kind": "HTTPRoute", "spec": {"parentRefs": [{"name": "edge"}]}}'
    objects = [json.loads(text), json.loads(text)]
    assert objects[0]["kind"] is not objects[1]["kind"]
    share_strings(objects)
    assert objects[0]["kind"] is objects[1]["kind"]
    assert objects[0]["spec"]["parentRefs"][0]["name"] is objects[1]["spec"]["parentRefs"][0]["name"]


def test_deep_nesting_does_not_recurse() -> None:
    node: Any = "x"
    for _ in range(sys.getrecursionlimit() * 2):
        node = [node]
    share_strings([{"deep": node}])  # no RecursionError
