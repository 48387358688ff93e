"""The ``format`` values the API server checks, and Go-compatible ``pattern`` matching.

Kubernetes validates CRD formats with kube-openapi's strfmt registry; the ones Gateway API uses
(int32, int64, date-time, ipv4, ipv6) and a few common others are checked here, unknown formats are
ignored as the API server ignores them. Patterns are RE2 in the API server: ``$`` there matches only
at the very end, while Python's ``$`` also matches before a trailing newline, which would let
``"name\\n"`` through a ``^[a-z]+$`` pattern; :func:`go_pattern` closes that gap.
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


_MULTILINE = re.compile(r"\(\?[a-zA-Z]*m")


def _translate(pattern: str) -> str:
    """RE2 pattern text with Go's end-of-text ``$`` (outside classes, without ``(?m)``) as ``\\Z``."""
    if _MULTILINE.search(pattern):
        return pattern
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\Z" if nxt == "z" and not in_class else ch + nxt)
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern.startswith("[^]", i) or pattern.startswith("[]", i):
                out.append(pattern[i: i + (3 if pattern[i + 1] == "^" else 2)])
                i += 3 if pattern[i + 1] == "^" else 2
                continue
        elif ch == "$":
            out.append("\\Z")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def go_pattern(pattern: str) -> re.Pattern[str] | None:
    """The compiled pattern with Go semantics, or None when Python cannot express it."""
    try:
        return re.compile(_translate(pattern))
    except re.error:
        return None
