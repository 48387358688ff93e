"""Whether map entries are plain lines, asked of their joined text at once, is what asking each line gave."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render.helpers import _PRINTABLE, _plain_entries
from haproxy_check.render.sourcemaps import SourceMap
from validators.objects import Ref

SOURCES = SourceMap()
MARK = SOURCES.mark(Ref("HTTPRoute", "a", "r"), ("spec", "rules", 0))
pieces = st.sampled_from(("a", "b:c", " ", "  ", "#", "\n", "\t", "\u00e9", MARK, "x y", "1"))
entries = st.lists(st.lists(pieces, max_size=5).map("".join), max_size=5)


def _line_by_line(items: list[Any], sources: SourceMap) -> bool:
    """The check as it was: the same character tests, then a few string tests per line."""
    try:
        joined = "\n".join(items)
    except TypeError:
        return False
    if joined.count("\n") != len(items) - 1:
        return not items
    clean = sources.strip_line(joined)[0]
    if not clean.isascii() or clean.encode().translate(None, _PRINTABLE):
        return False
    for line in items if clean is joined else clean.split("\n"):
        if not line or line[0] in "# " or line[-1] == " " or "  " in line:
            return False
    return True


@settings(max_examples=400, deadline=None)
@given(entries)
def test_joined_check_equals_the_check_per_line(items: list[str]) -> None:
    assert _plain_entries(items, SOURCES) == _line_by_line(items, SOURCES)


def test_typical_entries() -> None:
    assert _plain_entries(["0:a_b_0 be1", f"1:a_b_0 be2{MARK}"], SOURCES)
    for bad in (["a b", ""], ["a  b"], ["#a b"], [" a"], ["a "], ["a", " b"], ["a ", "b"], [""]):
        assert not _plain_entries(bad, SOURCES), bad
    assert _plain_entries([], SOURCES)
