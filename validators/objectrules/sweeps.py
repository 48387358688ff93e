"""Rule 12: every string of a spec must be representable in haproxy.cfg and map files.

The render library refuses values it cannot write safely (see :mod:`validators.safety`); this rule
finds them first so the user gets a denial naming the field, not a render failure. Every string under
``spec`` is checked as a value; fields that become map keys or bare config words (names, hostnames,
header names, match path values, mapping keys) are also checked for whitespace.
"""

from __future__ import annotations

import json
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


def renderable_scan(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """The definition :func:`renderable` must agree with (tests compare them): :func:`strings`, one
    string at a time."""
    seen: set[tuple[PathPart, ...]] = set()
    for path, text, key in strings(obj.get("spec"), ("spec",)):
        budgets.spend("unsafe values")
        reason = _reason(path, text, key)
        if reason and path not in seen:
            seen.add(path)
            yield _unsafe(text, reason, path)


def _unsafe(text: str, reason: str, path: tuple[PathPart, ...]) -> Finding:
    return Finding(
        codes.UNSAFE_VALUE,
        f"Invalid value: {quote(text)}: {reason}; the HAProxy configuration cannot represent it",
        path,
    )


# Printable ASCII holds no control, whitespace (keys), surrogate or unassigned character: such a string
# (nearly every string of a real object) needs none of unsafe_reason's searches.
_PLAIN_VALUE = re.compile(r"[ -~]*\Z")
_PLAIN_KEY = re.compile(r"[!-~]*\Z")
_REF_REASON = ("a referenced name may only contain letters, digits, '.', '_' and '-' and starts with a "
               "letter or digit (it becomes part of HAProxy identifiers)")
_SKIPPED_LENGTHS = frozenset(len(p) for p in SKIPPED)
_SPEND_EVERY = 64  # strings between budget checks (each reads the thread's CPU clock: a system call)


class _Walk:
    """One depth-first walk of a spec in :func:`strings` order, the path kept as a list (a tuple is
    built only for a finding) with what the rules ask of it counted on the way: the depth, the
    ``matches`` and reference fields above, so no string re-reads its path."""

    __slots__ = ("count", "found", "matches", "path", "refs", "seen")

    def __init__(self) -> None:
        self.path: list[PathPart] = ["spec"]
        self.matches = 0  # "matches" fields in the path
        self.refs = 0  # REF_FIELDS in the path
        self.count = 0
        self.found: list[Finding] = []
        self.seen: set[tuple[PathPart, ...]] = set()

    def judge(self, text: str, key: bool, last: PathPart) -> None:
        self.count += 1
        if self.count % _SPEND_EVERY == 0:
            budgets.spend("unsafe values")
        refers = self.refs > 0 and (last == "name" or last == "namespace")
        if (_PLAIN_KEY if key else _PLAIN_VALUE).match(text):
            if not refers or IDENT.match(text):
                return
            reason: str | None = _REF_REASON
        else:
            reason = unsafe_reason(text, key=key)
            if reason is None and refers and not IDENT.match(text):
                reason = _REF_REASON
        if reason:
            self.record(text, reason)

    def record(self, text: str, reason: str) -> None:
        at = tuple(self.path)
        if at not in self.seen:
            self.seen.add(at)
            self.found.append(_unsafe(text, reason, at))

    def visit(self, cur: Any) -> None:
        path = self.path
        depth = len(path)
        if depth > MAX_DEPTH or (depth in _SKIPPED_LENGTHS and tuple(path) in SKIPPED):
            return
        if isinstance(cur, str):
            last = path[-1]
            if isinstance(last, int):
                key = depth > 1 and path[-2] in KEY_LISTS
            else:
                key = last in KEY_FIELDS or (last == "value" and depth >= 3 and path[-2] == "path"
                                             and self.matches > 0)
            self.judge(cur, key, last)
        elif isinstance(cur, Mapping):
            keys = [k for k in cur if isinstance(k, str)]
            for k in reversed(keys):  # strings() yields a mapping's keys last to first
                path.append(k)
                self.judge(k, True, k)
                path.pop()
            for k in keys:
                counted = (k == "matches", k in REF_FIELDS)
                self.matches += counted[0]
                self.refs += counted[1]
                path.append(k)
                self.visit(cur[k])
                path.pop()
                self.matches -= counted[0]
                self.refs -= counted[1]
        elif isinstance(cur, list):
            for i, item in enumerate(cur):
                path.append(i)
                self.visit(item)
                path.pop()


    def visit_names(self, cur: Any, refs: bool) -> None:
        """:meth:`visit` for a spec whose strings are all printable ASCII without whitespace
        (``_all_plain``): then only a referenced name can be wrong (a key is a referenced name only when
        it is "name" or "namespace", which IDENT allows), so only containers are entered."""
        path = self.path
        depth = len(path)
        if depth > MAX_DEPTH or (depth in _SKIPPED_LENGTHS and tuple(path) in SKIPPED):
            return
        if isinstance(cur, Mapping):
            for k, v in cur.items():
                if not isinstance(k, str):
                    continue
                if type(v) is str and not (refs and (k == "name" or k == "namespace") and not IDENT.match(v)):
                    continue  # nothing to find in it
                if isinstance(v, Mapping | list | str):
                    path.append(k)
                    self.visit_names(v, refs or k in REF_FIELDS)
                    path.pop()
        elif isinstance(cur, list):
            for i, v in enumerate(cur):
                if isinstance(v, Mapping | list):
                    path.append(i)
                    self.visit_names(v, refs)
                    path.pop()
        elif isinstance(cur, str) and refs and path[-1] in ("name", "namespace") and not IDENT.match(cur):
            self.record(cur, _REF_REASON)


def renderable(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Deny strings with control characters anywhere, whitespace in keys, odd referenced names."""
    budgets.spend("unsafe values")
    spec = obj.get("spec")
    walk = _Walk()
    text = _plain_json(spec)
    if text is None:
        walk.visit(spec)
    elif _ODD_NAME.search(text):  # else no name or namespace anywhere can fail IDENT: nothing to find
        walk.visit_names(spec, False)
    yield from walk.found


# In the compact JSON of a plain spec (no string holds a quote or a backslash), every "name" or
# "namespace" string whose value IDENT refuses: when there is none, no referenced name is wrong.
_ODD_NAME = re.compile(r'"(?:name|namespace)":"(?![A-Za-z0-9][A-Za-z0-9._-]*")')


# ``json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=True)`` made once, not per call
# (dumps builds an encoder for every call with options). check_circular=False: no table of the containers
# on the way (JSON values are trees; a cycle ends in RecursionError instead of ValueError, None all the same).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True, check_circular=False)


def _plain_json(value: Any) -> str | None:
    """The compact JSON of ``value`` when every string and key below it is printable ASCII without
    whitespace, else None; decided at C speed: that JSON escapes every control and non-ASCII character
    and every quote (a backslash) and holds a space only inside a string. It covers at least every
    string the walk reads (JSON also writes the tuples and non-string keys the walk skips); None too
    when JSON cannot write the value at all."""
    try:
        text = _COMPACT.encode(value)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if "\\" not in text and " " not in text else None
