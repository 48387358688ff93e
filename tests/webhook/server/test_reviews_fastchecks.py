"""``reviews.load_json`` checks a UTF-8 body's integer lengths and nesting on its bytes: differential
against the per-value checks it replaced (``parse_int`` on every integer, the walk of ``_too_deep``),
which it must match on every body: the same document or the same BadReview."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.server import reviews

# Strings that look like nesting or numbers, with the escapes a scanner of the bytes could trip on.
TRICKY = st.text(alphabet=st.sampled_from(list('[]{}"\\0123456789 ,:aé\n\t\u2028')), max_size=12)
LONG_INTS = st.integers(min_value=90, max_value=110).map(lambda n: int("7" * n))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), LONG_INTS, TRICKY,
                    st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(TRICKY, inner, max_size=4)), max_leaves=20)


@st.composite
def deep_values(draw: st.DrawFn) -> Any:
    """A value wrapped in 55 to 75 containers: either side of the 64-level bound."""
    value = draw(VALUES)
    for level in range(draw(st.integers(min_value=55, max_value=75))):
        value = [value, draw(TRICKY)] if draw(st.booleans()) else {draw(TRICKY) or f"k{level}": value}
    return value


def reference_load_json(body: bytes) -> Any:
    """load_json as it was before the byte checks (every integer through _int, then the walk)."""
    deep = reviews.BadReview(f"body is nested deeper than {reviews.MAX_DEPTH} levels")
    try:
        doc = json.loads(body, parse_int=reviews._int, parse_constant=reviews._constant)
    except reviews.BadReview:
        raise
    except RecursionError:
        raise deep from None
    except ValueError as exc:
        raise reviews.BadReview(f"body is not valid JSON: {exc}") from None
    if reviews._too_deep(doc):
        raise deep
    return doc


def outcome(load: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "doc", load(body)
    except reviews.BadReview as exc:
        return "bad", str(exc)


def encodings(doc: Any) -> list[bytes]:
    return [json.dumps(doc).encode(), json.dumps(doc, ensure_ascii=False).encode(),
            json.dumps(doc, indent=1, ensure_ascii=False).encode()]


@settings(max_examples=300, deadline=None)
@given(st.one_of(VALUES, deep_values()))
def test_load_json_matches_the_per_value_checks(doc: Any) -> None:
    for body in encodings(doc):
        assert outcome(reviews.load_json, body) == outcome(reference_load_json, body)


@pytest.mark.parametrize("body", [
    pytest.param(b'{"a": "' + b"[" * 80 + b'"}', id="brackets in a string are no nesting"),
    pytest.param(b'{"a": "\\"' + b"[" * 80 + b'"}', id="after an escaped quote, still in the string"),
    pytest.param(b'{"a": "\\\\", "b": ' + b"[" * 70 + b"]" * 70 + b"}", id="an escaped backslash ends the string"),
    pytest.param(b'{"a": ' + b"[" * 64 + b"]" * 64 + b"}", id="65 levels"),
    pytest.param(b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}", id="64 levels"),
    pytest.param(b'{"a": ' + b"[" * 33 + b"1" + b"]" * 33 + b', "b": ' + b"[" * 32 + b"1" + b"]" * 32 + b"}",
                 id="64 containers that hold one, 34 deep"),
    pytest.param(b'{"a": "\\\\\\\\", "b": "\\"[[["}', id="a run of escaped backslashes"),
    pytest.param(b'{"a": "' + b"9" * 120 + b'", "b": 1}', id="long digits in a string"),
    pytest.param(b'{"a": -' + b"9" * 101 + b"}", id="101-digit negative integer"),
    pytest.param(b'{"a": ' + b"9" * 100 + b"}", id="100-digit integer"),
    pytest.param(b'{"a": 1' + b"0" * 120 + b".5}", id="long float"),
    pytest.param(json.dumps({"a": [[[[1]]]] * 3, "b": int("9" * 101)}).encode("utf-16"), id="UTF-16 long integer"),
    pytest.param(json.dumps({"a": json.loads("[" * 70 + "]" * 70)}).encode("utf-16"), id="UTF-16 70 deep"),
    pytest.param(b"\xef\xbb\xbf" + b'{"a": ' + b"9" * 101 + b"}", id="UTF-8 with BOM"),
])
def test_edge_bodies_match_the_per_value_checks(body: bytes) -> None:
    assert outcome(reviews.load_json, body) == outcome(reference_load_json, body)
