"""Regular expressions that must stay inside the route's anchoring (seed 004, rule 3).

HAPTIC wraps a RegularExpression path as ``^(?:<pattern>)`` style map entries and header/query values
into ACL conditions. A pattern whose ``(`` or ``[`` never closes, whose ``)`` closes a group the
template opened, or whose top-level ``|`` starts an unanchored alternative, changes what the
surrounding configuration means, so it is denied. The scan is escape-aware (``\\(``, ``[]a]``,
``[[:alpha:]]``) and does not compile the pattern: HAProxy's own check does that. ``\\Q...\\E`` is not
treated as quoting, as the renderer's own scan does not either (``\\Q(\\E`` is denied by both).
A top-level ``|`` only matters where the pattern is anchored by the route: path values. Header and
query values are searched unanchored, so ``Mobile|Android`` is fine there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from validators import codes
from validators.contexts import Context
from validators.findings import Finding, PathPart
from validators.objects import Obj, as_list, as_map
from validators.texts import quote
from validators.traversals import rules_of

_CLOSE = "; groups (...) and classes [...] must close within the pattern"


def balance_problem(pattern: str, *, anchored: bool = True) -> str | None:
    """Why ``pattern`` is not self-contained, or None. Indexes are 0-based into the pattern.

    ``anchored``: the pattern sits inside the route's anchoring, so a top-level ``|`` is refused too.
    """
    groups: list[int] = []
    class_start: int | None = None
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                return f"it ends with a lone '\\' at index {i}"
            i += 2
            continue
        if class_start is not None:
            if ch == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end >= 0:
                    i = end + 2
                    continue
            if ch == "]":
                class_start = None
            i += 1
            continue
        if ch == "[":
            class_start = i
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":  # a leading ']' is literal
                i += 1
            continue
        if ch == "(":
            groups.append(i)
        elif ch == ")":
            if not groups:
                return f"')' at index {i} closes a group that was never opened{_CLOSE}"
            groups.pop()
        elif ch == "|" and not groups and anchored:
            return (f"top-level '|' at index {i} would escape the route's anchoring; "
                    "wrap the alternatives in a group: (a|b)")
        i += 1
    if class_start is not None:
        return f"'[' at index {class_start} is never closed{_CLOSE}"
    if groups:
        return f"'(' at index {groups[-1]} is never closed{_CLOSE}"
    return None


def regex_values(obj: Obj) -> Iterator[tuple[tuple[PathPart, ...], str]]:
    """Every RegularExpression value of an HTTPRoute or GRPCRoute with its path."""
    for rule_path, rule in rules_of(obj):
        for m, match in enumerate(as_list(rule.get("matches"))):
            match = as_map(match)
            at = (*rule_path, "matches", m)
            yield from _typed(as_map(match.get("path")), (*at, "path"), ("value",))
            yield from _typed(as_map(match.get("method")), (*at, "method"), ("service", "method"))
            for field in ("headers", "queryParams"):
                for h, entry in enumerate(as_list(match.get(field))):
                    yield from _typed(as_map(entry), (*at, field, h), ("value",))


def _typed(entry: Mapping[str, Any], at: tuple[PathPart, ...], fields: tuple[str, ...]
           ) -> Iterator[tuple[tuple[PathPart, ...], str]]:
    if entry.get("type") != "RegularExpression":
        return
    for field in fields:
        value = entry.get(field)
        if isinstance(value, str):
            yield (*at, field), value


def balanced(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 3: every group and class closes within the pattern; no top-level alternation."""
    for path, pattern in regex_values(obj):
        problem = balance_problem(pattern, anchored=path[-2:] == ("path", "value"))
        if problem:
            yield Finding(
                codes.REGEX_UNBALANCED,
                f"Invalid value: {quote(pattern)}: {problem}",
                path,
            )
