"""``pcre_escape`` by one translation table is the character loop it replaced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render.http.httproutes import _PCRE_SPECIAL, pcre_escape


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from([*"\\.^$|?*+()[]{}/", "a", "Z", "0", ":", "-", " ", "\u00e9", "\n"])))
def test_escaping_is_the_character_loop(text: str) -> None:
    assert pcre_escape(text) == "".join("\\" + c if c in _PCRE_SPECIAL else c for c in text)
