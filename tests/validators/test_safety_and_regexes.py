"""The shared safety predicate (used by the renderer too) and the regex balance scanner."""

from __future__ import annotations

import pytest

from validators.objectrules.regexes import balance_problem
from validators.safety import unsafe_reason


@pytest.mark.parametrize(
    ("value", "key", "needle"),
    [
        pytest.param("api.example.com", True, None, id="hostname key ok"),
        pytest.param("max-age=1; includeSubDomains", False, None, id="value with spaces ok"),
        pytest.param("caf\u00e9", True, None, id="non-ASCII letters ok"),
        pytest.param("a b", True, "a space at index 1", id="space splits a key"),
        pytest.param("a\u00a0b", True, "no-break space", id="unicode space splits a key"),
        pytest.param("a\nb", False, "line feed (LF) at index 1", id="LF in value"),
        pytest.param("a\rb", False, "carriage return", id="CR in value"),
        pytest.param("a\x00", False, "NUL", id="NUL in value"),
        pytest.param("a\tb", False, "a tab", id="tab in value"),
        pytest.param("a\x1bb", False, "U+001B", id="escape in value"),
        pytest.param("a\x85b", False, "U+0085", id="C1 next line"),
        pytest.param("a\u2028b", False, "U+2028", id="line separator"),
    ],
)
def test_unsafe_reason(value: str, key: bool, needle: str | None) -> None:
    reason = unsafe_reason(value, key=key)
    if needle is None:
        assert reason is None
    else:
        assert reason is not None and needle in reason


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        pytest.param(r"^/api/v[0-9]+/.*", None, id="seed example"),
        pytest.param(r"/(a|b)+/(?:x)?", None, id="alternation inside a group"),
        pytest.param(r"/\(\)\[", None, id="escaped metacharacters"),
        pytest.param(r"/[]a]", None, id="leading ] is literal"),
        pytest.param(r"/[^]a]", None, id="leading ] after ^ is literal"),
        pytest.param(r"/[[:alpha:]]+", None, id="POSIX class"),
        pytest.param(r"/[(|]", None, id="metacharacters inside a class"),
        pytest.param(r"/\Q(\E", "\\Q...\\E quoting at index 1", id="Q..E quoting is refused"),
        pytest.param(r"\Q[\E)|.*(\Q]\E?", "\\Q...\\E quoting", id="the closure exploit (Q..E hides a bracket)"),
        pytest.param(r"/(?#(()x)|.*(", "(?#...) comment", id="comment hides parentheses"),
        pytest.param(r"/(?x)a", "inline option setting", id="inline options"),
        pytest.param(r"/(?i:a)", "inline option setting", id="inline options in a group"),
        pytest.param(r"/(*ACCEPT)", "(*VERB)", id="verb"),
        pytest.param(r"/(a)\1", "backreference", id="backreference"),
        pytest.param(r"/\g{1}", "backreference (\\g)", id="g backreference"),
        pytest.param(r"/(?<=a)b", "lookbehind", id="lookbehind"),
        pytest.param(r"/(?=a)", "lookahead", id="lookahead"),
        pytest.param(r"/(?(1)a|b)", "conditional", id="conditional"),
        pytest.param(r"/(?>a)", "atomic", id="atomic group"),
        pytest.param(r"/(?<n>a)", "named group", id="named group"),
        pytest.param(r"/(?R)", "recursion", id="recursion"),
        pytest.param(r"/\cA", "\\c", id="control escape"),
        pytest.param(r"/\x{41}", "\\x{...}", id="braced hex"),
        pytest.param(r"/\101", "octal", id="octal"),
        pytest.param(r"/\p{L}", "Unicode property", id="unicode property"),
        pytest.param(r"/a\K", "\\K", id="match-start reset"),
        pytest.param(r"/a{,3}", "not a quantifier", id="{,n} differs between PCRE versions"),
        pytest.param(r"/a{", "not a quantifier", id="lone brace"),
        pytest.param(r"/a*+", "possessive", id="possessive"),
        pytest.param(r"/a**", "repeats a quantifier", id="double quantifier"),
        pytest.param(r"/(?:*a)", "follows nothing", id="quantifier first"),
        pytest.param(r"/[\d-z]", "ambiguous", id="range from a class"),
        pytest.param(r"/[z-a]{2,1}", None, id="reversed range and bounds are left to PCRE (both reject them)"),
        pytest.param(r"/[[.a.]]", "must be escaped", id="collating element"),
        pytest.param(r"/[[:nope:]]", "POSIX class", id="unknown POSIX class"),
        pytest.param("/caf\u00e9", "printable ASCII", id="non-ASCII"),
        pytest.param(r"/a{2,1001}", "more than 1000", id="huge repeat"),
        pytest.param(r"/x\x41[\x30-\x39]{1,3}?\b\d\.", None, id="escapes and lazy quantifier"),
        pytest.param(r"/a{2}b{1,}c{0,3}", None, id="brace quantifiers"),
        pytest.param(r"/a)", "')' at index 2", id="early close"),
        pytest.param(r"/(a", "'(' at index 1 is never closed", id="unclosed group"),
        pytest.param(r"/[a", "'[' at index 1 is never closed", id="unclosed class"),
        pytest.param(r"/[[:alpha:]", "'[' at index 1 is never closed", id="unclosed class after POSIX class"),
        pytest.param(r"/a|/b", "top-level '|' at index 2", id="top-level alternation"),
        pytest.param("/a\\", "lone '\\'", id="trailing backslash"),
    ],
)
def test_balance_problem(pattern: str, needle: str | None) -> None:
    problem = balance_problem(pattern)
    if needle is None:
        assert problem is None
    else:
        assert problem is not None and needle in problem


def test_alternation_is_only_refused_where_the_pattern_is_anchored() -> None:
    assert balance_problem("Mobile|Android", anchored=False) is None
    assert (balance_problem("(Mobile|Android", anchored=False) or "").startswith("'(' at index 0 is never closed")
