"""The searched ``unsafe_reason`` agrees with the character-by-character definition (issue 16: a
megabyte of value made the per-character loop take seconds)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.safety import unsafe_reason, unsafe_reason_scan

TRICKY = "\x00\t\n\r\x0b\x0c\x1c\x1f \x7f\x85\x9f\xa0\u1680\u2000\u2028\u2029\u202f\u3000\ud800\udfff\U000e0080" \
         "\u0378\ufeff\u200b" "aZ09-._~%é中😀"


@settings(max_examples=400, deadline=None)
@given(value=st.text(alphabet=st.sampled_from(TRICKY), max_size=12) | st.text(max_size=20), key=st.booleans())
def test_the_fast_path_gives_the_scans_answer(value: str, key: bool) -> None:
    assert unsafe_reason(value, key=key) == unsafe_reason_scan(value, key=key)


def test_a_long_value_is_judged_by_the_searches() -> None:
    value = "a" * 1_000_000 + "\u2028"
    assert unsafe_reason(value, key=False) == "it contains a line separator (U+2028) at index 1000000"
    assert unsafe_reason("é" * 100_000 + "\u0378", key=True) == \
        "it contains an invisible or unassigned character (U+0378) at index 100000"
