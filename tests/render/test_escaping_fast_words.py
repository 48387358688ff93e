"""``ident``, ``header_name`` and ``hostname`` accept a word their own pattern matches without the generic
``check`` first (every such word is printable ASCII without whitespace): the same value back, and for
every other value the same error (differential against check-then-pattern, on drawn text). ``url_value``
gives a value urllib would not encode back as it is: the same answer as check-then-quote."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check import escaping

_TEXT = st.one_of(
    st.text(st.sampled_from("aZ09._-!$&*+^~*#: \t\n\x00\x7f\xe9"), max_size=12),
    st.text(max_size=8),
    st.sampled_from(["a", "*.example.com", "-a", "a-", "Host", "x.y", ".a", "a..b", "A.example"]),
    st.integers(0, 3),
    st.none(),
)


def _reference(pattern: re.Pattern[str], what: str, message: Callable[[str], str]) -> Callable[[object], str]:
    def run(value: object) -> str:
        escaping.check(value, key=True, what=what)  # type: ignore[arg-type]
        assert isinstance(value, str)
        if not pattern.match(value):
            raise escaping.Unsafe(message(value))
        return value
    return run


_CASES = [
    (lambda v: escaping.ident(v, what="Service name"),
     _reference(escaping._IDENT, "Service name",
                lambda v: f"Service name {v!r} may only contain letters, digits, '.', '_' and '-'")),
    (escaping.header_name,
     _reference(escaping._HEADER, "header name",
                lambda v: f"header name {v!r} may only contain letters, digits and !$&*+.^_~-")),
    (escaping.hostname,
     _reference(escaping._HOST, "hostname",
                lambda v: f"hostname {v!r} is not a lowercase DNS name (optionally starting with '*.')")),
]


def _outcome(fn: Callable[[object], str], value: object) -> tuple[str, str]:
    try:
        return "ok", fn(value)
    except escaping.Unsafe as exc:
        return "unsafe", str(exc)


@pytest.mark.parametrize("case", range(len(_CASES)))
@settings(max_examples=200, deadline=None)
@given(value=_TEXT)
def test_fast_words_answer_as_check_then_pattern(case: int, value: object) -> None:
    fast, reference = _CASES[case]
    assert _outcome(fast, value) == _outcome(reference, value)


def _url_value_by_quoting(value: object) -> str:
    escaping.check(value, key=False)  # type: ignore[arg-type]
    assert isinstance(value, str)
    return urllib.parse.quote(value, safe="")


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(_TEXT, st.text(st.sampled_from("aZ09_.~-/%+ é\x00"), max_size=10)))
def test_url_value_answers_as_check_then_quote(value: object) -> None:
    assert _outcome(escaping.url_value, value) == _outcome(_url_value_by_quoting, value)  # type: ignore[arg-type]
