"""Rule 12: every string of a spec must be representable in haproxy.cfg and map files.

The render library refuses values it cannot write safely (see :mod:`validators.safety`); this rule
finds them first so the user gets a denial naming the field, not a render failure. Every string under
``spec`` is checked as a value; fields that become map keys or bare config words (names, hostnames,
header names, match path values, mapping keys) are also checked for whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from validators import budgets, codes
from validators.contexts import Context
from validators.findings import Finding, PathPart
from validators.objects import Obj
from validators.safety import unsafe_reason
from validators.texts import quote

#: A string under one of these field names is a key (a word HAProxy splits on whitespace).
KEY_FIELDS = frozenset({
    "name", "namespace", "sectionName", "kind", "group", "hostname", "service", "method", "sessionName",
    "type", "protocol", "scheme", "address",
})
#: Items of lists with these names are keys.
KEY_LISTS = frozenset({
    "hostnames", "remove", "allowedHeaders", "allowedResponseHeaders", "allowHeaders", "exposeHeaders",
    "allowMethods", "codes",
})
#: Names under these fields become parts of HAProxy identifiers (backend names, map values).
REF_FIELDS = frozenset({"backendRefs", "backendRef", "parentRefs", "targetRefs", "certificateRefs",
                        "caCertificateRefs"})
IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
#: Subtrees that never reach the HAProxy configuration (free text copied to other Kubernetes objects).
SKIPPED = frozenset({("spec", "infrastructure")})
MAX_DEPTH = 64


def _is_key(path: tuple[PathPart, ...]) -> bool:
    last = path[-1]
    if isinstance(last, int):
        parent = path[-2] if len(path) > 1 else ""
        return parent in KEY_LISTS
    if last in KEY_FIELDS:
        return True
    # A match's path value is the key of the path maps; a rewrite's path is not.
    return last == "value" and len(path) >= 3 and path[-2] == "path" and "matches" in path


def strings(value: Any, path: tuple[PathPart, ...]) -> Iterator[tuple[tuple[PathPart, ...], str, bool]]:
    """(path, string, is_key) for every string and mapping key below ``value``."""
    stack: list[tuple[tuple[PathPart, ...], Any]] = [(path, value)]
    while stack:
        at, cur = stack.pop()
        if at in SKIPPED or len(at) > MAX_DEPTH:
            continue
        if isinstance(cur, str):
            yield at, cur, _is_key(at)
        elif isinstance(cur, Mapping):
            for key in reversed(list(cur)):
                if isinstance(key, str):
                    yield (*at, key), key, True
                    stack.append(((*at, key), cur[key]))
        elif isinstance(cur, list):
            stack.extend(((*at, i), item) for i, item in reversed(list(enumerate(cur))))


def _reason(path: tuple[PathPart, ...], text: str, key: bool) -> str | None:
    reason = unsafe_reason(text, key=key)
    refers = path[-1] in ("name", "namespace") and any(p in REF_FIELDS for p in path)
    if reason is None and refers and not IDENT.match(text):
        reason = ("a referenced name may only contain letters, digits, '.', '_' and '-' and starts with a "
                      "letter or digit (it becomes part of HAProxy identifiers)")
    return reason


def renderable(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Deny strings with control characters anywhere, whitespace in keys, odd referenced names."""
    seen: set[tuple[PathPart, ...]] = set()
    for path, text, key in strings(obj.get("spec"), ("spec",)):
        budgets.spend("unsafe values")
        reason = _reason(path, text, key)
        if reason and path not in seen:
            seen.add(path)
            yield Finding(
                codes.UNSAFE_VALUE,
                f"Invalid value: {quote(text)}: {reason}; the HAProxy configuration cannot represent it",
                path,
            )
