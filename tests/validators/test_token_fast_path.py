"""``texts.token_problem``'s regex fast path accepts exactly what the character loop accepts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from validators import texts
from validators.safety import describe_char


def token_problem_scan(value: str, punctuation: str) -> str | None:
    if not value:
        return "is empty"
    for ch in value:
        if not texts._is_token_char(ch, punctuation):
            return f"has {describe_char(ch)}"
    return None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.sampled_from("aZ09!$&*+.^_~-#%'|`\\] \t\n\xe9"), st.characters()),
               max_size=12),
       st.sampled_from([texts.TOKEN_PUNCTUATION, "-", "", "^]\\-"]))
def test_fast_path_agrees_with_loop(value: str, punctuation: str) -> None:
    assert texts.token_problem(value, punctuation=punctuation) == token_problem_scan(value, punctuation)
