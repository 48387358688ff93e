"""Regular expressions that must stay inside the route's anchoring (seed 004, rule 3).

HAPTIC wraps a RegularExpression path as ``^<host prefix>(?:<pattern>)`` map entries and header/query
values into ACL conditions. A pattern that closes a group the template opened, or adds an unanchored
alternative, changes what the surrounding configuration means, so only patterns that the allow-list
parser ``validators.pcre`` reads start to end are admitted (the renderer calls the same parser). A
top-level ``|`` only matters where the pattern is anchored by the route: path values. Header and query
values are searched unanchored, so ``Mobile|Android`` is fine there, and gRPC service/method patterns
are each wrapped in their own group.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from validators import codes, pcre
from validators.contexts import Context
from validators.findings import Finding, PathPart
from validators.objectrules.traversals import rules_of
from validators.objects import Obj, as_list, as_map
from validators.texts import quote


def balance_problem(pattern: str, *, anchored: bool = True, spaces: bool = False) -> str | None:
    """Why ``pattern`` is outside the regex subset the renderer can wrap safely, or None.

    ``anchored``: the pattern sits inside the route's anchoring, so a top-level ``|`` is refused too;
    ``spaces``: a literal space is allowed (header and query values).
    """
    return pcre.problem(pattern, top_level_alternation=not anchored, spaces=spaces)


def regex_values(obj: Obj) -> Iterator[tuple[tuple[PathPart, ...], str]]:
    """Every RegularExpression value of an HTTPRoute or GRPCRoute with its path."""
    # Each entry's type is read before its path is built: few values are regular expressions.
    for rule_path, rule in rules_of(obj):
        for m, match in enumerate(as_list(rule.get("matches"))):
            match = as_map(match)
            if _regex(match.get("path")):
                yield from _typed(match["path"], (*rule_path, "matches", m, "path"), ("value",))
            if _regex(match.get("method")):
                yield from _typed(match["method"], (*rule_path, "matches", m, "method"), ("service", "method"))
            for field in ("headers", "queryParams"):
                for h, entry in enumerate(as_list(match.get(field))):
                    if _regex(entry):
                        yield from _typed(entry, (*rule_path, "matches", m, field, h), ("value",))


def _regex(entry: Any) -> bool:
    """Whether ``entry`` is a mapping whose ``type`` is RegularExpression (``_typed`` reads it)."""
    return as_map(entry).get("type") == "RegularExpression"


def _typed(entry: Mapping[str, Any], at: tuple[PathPart, ...], fields: tuple[str, ...]
           ) -> Iterator[tuple[tuple[PathPart, ...], str]]:
    for field in fields:
        value = entry.get(field)
        if isinstance(value, str):
            yield (*at, field), value


def balanced(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 3: every pattern is inside the allow-listed PCRE subset; no top-level alternation in paths."""
    for path, pattern in regex_values(obj):
        is_path = path[-2:] == ("path", "value")
        value = path[-1] == "value" and not is_path  # header and query values may hold spaces
        problem = balance_problem(pattern, anchored=is_path, spaces=value)
        if problem:
            yield Finding(
                codes.REGEX_UNBALANCED,
                f"Invalid value: {quote(pattern)}: {problem}",
                path,
            )
