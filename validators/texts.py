"""Small text helpers for messages: quoting values the way the API server does, token checks."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from validators.safety import describe_char

#: RFC 9110 token characters minus those HAProxy's config or map syntax gives a meaning
#: (``#`` comment, ``%`` log-format, ``'`` quote, ``|`` map separator, backtick).
TOKEN_PUNCTUATION = "!$&*+.^_~-"  # noqa: S105 - not a password, a character set
TOKEN_ALLOWED = f"letters, digits and {TOKEN_PUNCTUATION}"
#: RFC 9110 ``tchar``: every character HTTP allows in a header name, and what the Gateway API CRDs accept
#: for header and query parameter names. The renderer quotes what HAProxy's parsers would read
#: (``haproxy_check.escaping.header_word``/``header_fetch``/``header_key``), so all of it can be honoured.
HTTP_TOKEN_PUNCTUATION = "!#$%&'*+.^_`|~-"  # noqa: S105 - not a password, a character set
HTTP_TOKEN_ALLOWED = f"letters, digits and {HTTP_TOKEN_PUNCTUATION}"


def quote(value: Any) -> str:
    """A value as the API server prints it in messages: strings in double quotes, numbers bare."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(value)


def _is_token_char(ch: str, extra: str) -> bool:
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ("0" <= ch <= "9") or ch in extra


@functools.lru_cache(maxsize=16)
def _token(punctuation: str) -> re.Pattern[str]:
    """What ``_is_token_char`` accepts, repeated: ASCII letters and digits and ``punctuation``."""
    return re.compile(f"[A-Za-z0-9{re.escape(punctuation)}]+\\Z")


def token_problem(value: str, *, punctuation: str = TOKEN_PUNCTUATION) -> str | None:
    """Why ``value`` is not a token of letters, digits and ``punctuation``; None when it is."""
    if not value:
        return "is empty"
    if _token(punctuation).match(value):  # the usual case, at C speed; the loop names the bad character
        return None
    for ch in value:
        if not _is_token_char(ch, punctuation):
            return f"has {describe_char(ch)}"
    return None
