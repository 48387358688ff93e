"""Route regular expressions (``validators.pcre``'s PCRE subset) read by Python: compiled to match the
way HAProxy's PCRE does, and a short string each one matches (the routing table's probe of a regex
class). Within that subset the two engines agree, except POSIX classes, translated here."""

from __future__ import annotations

import functools
import re
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

_POSIX = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
          "space": r" \t\n\r\f\v", "xdigit": "0-9A-Fa-f", "punct": r"!-/:-@\[-`{-~", "word": r"\w",
          "blank": r" \t", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": r"!-~"}
_POSIX_CLASS = re.compile(r"\[:(\^?)([a-z]+):\]")
_PREFERRED = "a0-_./"  # characters an example uses first, when a class allows them


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> re.Pattern[str] | None:
    """``pattern`` for ``re``; None when Python cannot read it (the table then says it is unmodelled)."""
    text = _POSIX_CLASS.sub(lambda m: _POSIX.get(m[2], m[0]) if not m[1] else m[0], pattern)
    try:
        return re.compile(text)
    except (re.error, RecursionError, OverflowError):
        return None


@functools.lru_cache(maxsize=4096)
def example(pattern: str) -> str | None:
    """A short string ``pattern`` matches from its start (HAProxy's ``-m reg``/``map_reg`` are unanchored
    at the end), or None when none was found."""
    regex = compiled(pattern)
    if regex is None:
        return None
    try:
        parsed = sre_parse.parse(regex.pattern)
        text = _build(list(parsed))
    except (re.error, ValueError, RecursionError, TypeError, IndexError):
        return None
    return text if regex.match(text) else None


def _build(items: list[tuple[Any, Any]]) -> str:
    out: list[str] = []
    for op, arg in items:
        out.append(_one(op, arg))
    return "".join(out)


def _one(op: Any, arg: Any) -> str:
    c = sre_constants
    if op is c.LITERAL:
        return chr(arg)
    if op is c.NOT_LITERAL:
        return "a" if chr(arg) != "a" else "b"
    if op is c.ANY:
        return "a"
    if op is c.AT:
        return ""
    if op is c.IN:
        return _in(arg)
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        low, _high, body = arg
        return _build(list(body)) * int(low)
    if op is c.SUBPATTERN:
        return _build(list(arg[-1]))
    if op is c.BRANCH:
        return _build(list(arg[1][0]))
    if op is c.CATEGORY:
        return _category(arg)
    raise ValueError(f"no example for {op}")


def _category(cat: Any) -> str:
    c = sre_constants
    table: dict[Any, str] = {c.CATEGORY_DIGIT: "0", c.CATEGORY_NOT_DIGIT: "a", c.CATEGORY_WORD: "a",
                             c.CATEGORY_NOT_WORD: "-", c.CATEGORY_SPACE: " ", c.CATEGORY_NOT_SPACE: "a"}
    return table.get(cat, "a")


def _in(members: list[tuple[Any, Any]]) -> str:
    c = sre_constants
    negate = bool(members) and members[0][0] is c.NEGATE
    chars: list[str] = []
    for op, arg in members:
        if op is c.LITERAL:
            chars.append(chr(arg))
        elif op is c.RANGE:
            low, high = arg
            preferred = [ch for ch in _PREFERRED if low <= ord(ch) <= high]
            chars.append(preferred[0] if preferred else chr(low))
        elif op is c.CATEGORY:
            chars.append(_category(arg))
    if not negate:
        preferred = [ch for ch in _PREFERRED if ch in chars]
        return preferred[0] if preferred else (chars[0] if chars else "a")
    for candidate in "a0-_./bzZ9":
        if candidate not in chars and not any(op is c.RANGE and arg[0] <= ord(candidate) <= arg[1]
                                              for op, arg in members):
            return candidate
    raise ValueError("no character outside a negated class")
