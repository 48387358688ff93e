"""Which strings the renderer can write into haproxy.cfg and map files safely.

One pure predicate shared by the validators (rule RG0120 denies the object up front) and the render
library (which refuses to emit such a value). Keeping it in one place means admission and rendering can
never disagree about what is representable.

A *value* may hold any printable text; the renderer quotes and escapes it. A *key* (a map file key such
as a hostname, a path value or a header name) is split on whitespace by HAProxy, so it must not contain
any whitespace either. Neither may contain control characters: CR and LF end a config or map line, NUL
ends a C string, and the other C0/C1 controls and Unicode line separators are never meaningful in HTTP
names and values.
"""

from __future__ import annotations

import re
import unicodedata

_NAMES = {
    "\x00": "a NUL byte",
    "\t": "a tab",
    "\n": "a line feed (LF)",
    "\r": "a carriage return (CR)",
    "\x0b": "a vertical tab",
    "\x0c": "a form feed",
    "\x7f": "a DEL character",
    "\x85": "a next-line character (U+0085)",
    "\u2028": "a line separator (U+2028)",
    "\u2029": "a paragraph separator (U+2029)",
    " ": "a space",
    "\xa0": "a no-break space (U+00A0)",
}


def describe_char(ch: str) -> str:
    """A human name for one character: ``a line feed (LF)``, ``a space``, ``'%'``."""
    if ch in _NAMES:
        return _NAMES[ch]
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0:
        return f"a control character (U+{code:04X})"
    if ch.isspace():
        return f"a whitespace character (U+{code:04X})"
    if unicodedata.category(ch) in ("Cf", "Cs", "Co", "Cn"):
        return f"an invisible or unassigned character (U+{code:04X})"
    return repr(ch)


def is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code < 0xA0 or ch in "\u2028\u2029"


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # what is_control() accepts
_SPACE = re.compile(r"\s")  # str.isspace(): _sre and str share Py_UNICODE_ISSPACE


def first_control(value: str) -> str | None:
    """The first character of ``value`` that :func:`is_control` accepts, found at C speed."""
    found = _CONTROL.search(value)
    return found.group() if found else None


def unsafe_reason(value: str, *, key: bool) -> str | None:
    """Why ``value`` cannot be written into the HAProxy configuration, or None when it can.

    ``key`` is True for values that become map keys or bare config words (hostnames, path values,
    header names), where whitespace would split the word. The first offending character is found by
    C-speed searches (a value can be megabytes long: a per-character Python loop took seconds) and
    reported exactly as a left-to-right scan would: at one index a control character wins over
    whitespace, and surrogates or unassigned code points can be neither.
    """
    found: list[tuple[int, int, str]] = []  # (index, priority, reason)
    control = _CONTROL.search(value)
    if control:
        found.append((control.start(), 0, f"it contains {describe_char(control.group())} at index {control.start()}"))
    space = _SPACE.search(value) if key else None
    if space:
        found.append((space.start(), 1, f"it contains {describe_char(space.group())} at index {space.start()}, "
                      "which would split the map key"))
    if not value.isascii():
        odd = [ch for ch in set(value) if unicodedata.category(ch) in ("Cs", "Cn")]
        if odd:
            index = min(value.index(ch) for ch in odd)
            found.append((index, 2, f"it contains {describe_char(value[index])} at index {index}"))
    return min(found)[2] if found else None


def unsafe_reason_scan(value: str, *, key: bool) -> str | None:
    """The character-by-character definition :func:`unsafe_reason` must agree with (tests compare them)."""
    for index, ch in enumerate(value):
        if is_control(ch):
            return f"it contains {describe_char(ch)} at index {index}"
        if key and ch.isspace():
            return f"it contains {describe_char(ch)} at index {index}, which would split the map key"
        if unicodedata.category(ch) in ("Cs", "Cn"):
            return f"it contains {describe_char(ch)} at index {index}"
    return None
