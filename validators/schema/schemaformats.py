"""The ``format`` values the API server checks, and Go-compatible ``pattern`` matching.

Kubernetes validates CRD formats with kube-openapi's strfmt registry; the ones Gateway API uses
(int32, int64, date-time, ipv4, ipv6) and a few common others are checked here, unknown formats are
ignored as the API server ignores them. Patterns are RE2 in the API server, and RE2 here (:class:`GoPattern`):
linear-time matching, Go's syntax and ``$`` semantics.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type stubs

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z"
)


def _int_range(low: int, high: int) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return True  # not a number: the type keyword reports it
        return low <= value <= high

    return check


def _strings(check: Callable[[str], object]) -> Callable[[Any], bool]:
    def wrapped(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        try:
            return check(value) is not False
        except (ValueError, TypeError, binascii.Error):
            return False

    return wrapped


def _date_time(value: str) -> bool:
    if not _DATE_TIME.match(value):
        return False
    datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    return True


def _ipv4(value: str) -> bool:
    ipaddress.IPv4Address(value)
    return True


def _ipv6(value: str) -> bool:
    ipaddress.IPv6Address(value)
    return True


def _cidr(value: str) -> bool:
    ipaddress.ip_network(value, strict=False)
    return True


def _byte(value: str) -> bool:
    base64.b64decode(value, validate=True)
    return True


def _uuid(value: str) -> bool:
    uuid.UUID(value)
    return len(value) == 36


def _date(value: str) -> bool:
    datetime.strptime(value, "%Y-%m-%d")
    return True


FORMATS: dict[str, Callable[[Any], bool]] = {
    "int32": _int_range(*INT32),
    "int64": _int_range(*INT64),
    "date-time": _strings(_date_time),
    "datetime": _strings(_date_time),
    "date": _strings(_date),
    "ipv4": _strings(_ipv4),
    "ipv6": _strings(_ipv6),
    "cidr": _strings(_cidr),
    "byte": _strings(_byte),
    "uuid": _strings(_uuid),
}


class GoPattern:
    """A CRD ``pattern`` compiled by RE2, the engine the API server's Go ``regexp`` package implements.

    RE2 matches in time linear in the input (no backtracking), so a crafted value cannot stall a
    worker thread, and its syntax and semantics are Go's: ``$`` matches only at the very end of the
    text (``"name\\n"`` does not match ``^[a-z]+$``), ``\\s`` is ASCII whitespace. Python's ``re`` is
    never used for a CRD pattern: a pattern RE2 rejects is reported by :func:`pattern_problem`.
    """

    __slots__ = ("_match", "regexp", "text")

    def __init__(self, text: str, regexp: Any) -> None:
        self.text = text
        self.regexp = regexp  # a re2 compiled pattern (tests assert the type)
        # RE2's own match on UTF-8 bytes: the wrapper's search() maps byte offsets back to characters
        # through a generator, which costs 7x the match itself, and a yes/no answer needs no offsets.
        self._match = getattr(getattr(regexp, "_regexp", None), "Match", None)

    def search(self, value: str) -> bool:
        if self._match is None or _UNANCHORED is None:  # another re2 wrapper version: its public API
            return self.regexp.search(_valid_utf8(value)) is not None
        data = _utf8(value)
        return bool(self._match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)


_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
_NO_MATCH = (-1, -1)


def _utf8(value: str) -> bytes:
    """``value`` as UTF-8, lone surrogates (from JSON ``\\ud800`` escapes) read as U+FFFD, as Go's JSON
    decoder does."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return _valid_utf8(value).encode("utf-8")


def _valid_utf8(value: str) -> str:
    """``value`` with lone surrogates (from JSON ``\\ud800`` escapes) replaced by U+FFFD, as Go's JSON
    decoder does; RE2 needs text that encodes to UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is reported as a finding, not logged to stderr by C++
_OPTIONS.never_capture = True  # a yes/no answer: without groups RE2 runs its DFA (75x faster here)


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str) -> GoPattern | str:
    try:
        return GoPattern(pattern, re2.compile(pattern, options=_OPTIONS))
    except re2.error as e:
        return str(e) or "invalid pattern"
    except UnicodeEncodeError:
        return "the pattern is not valid UTF-8"


def go_pattern(pattern: str) -> GoPattern | None:
    """The pattern compiled with Go (RE2) semantics, or None when RE2 rejects it."""
    compiled = _compile(pattern)
    return compiled if isinstance(compiled, GoPattern) else None


def pattern_problem(pattern: str) -> str | None:
    """Why RE2 (and so the API server, which rejects such a CRD) cannot compile ``pattern``, or None."""
    compiled = _compile(pattern)
    return compiled if isinstance(compiled, str) else None
