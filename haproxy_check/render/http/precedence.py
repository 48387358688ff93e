"""Route match precedence (seed 004) as sort keys, and the score the frontend compares at request time.

Order: path specificity (Exact > RegularExpression > PathPrefix, longer first), then a method matcher,
then more header matchers, then more query matchers, then the older route, then namespace/name. The
*score* encodes only the path part; the frontend uses it to let an advanced (method/header/query)
match beat a path-only map candidate of the same or lower path specificity, and only that.
"""

from __future__ import annotations

from typing import NamedTuple

EXACT, REGEX, PREFIX = "Exact", "RegularExpression", "PathPrefix"
_BASE = {EXACT: 300000, REGEX: 200000, PREFIX: 100000}


def score(path_type: str, value: str) -> int:
    """Path specificity as one integer: type band + length (Exact ignores length: one path matches)."""
    if path_type == EXACT:
        return _BASE[EXACT]
    if path_type == PREFIX:
        return _BASE[PREFIX] + len(value.rstrip("/"))
    return _BASE[REGEX] + min(len(value), 99999)


class Key(NamedTuple):
    """Sorts best match first (a tuple: compared in C, it sorts every path map entry of a render)."""

    neg_score: int
    no_method: bool
    neg_headers: int
    neg_queries: int
    created: str
    namespace: str
    name: str
    rule_index: int
    match_index: int


def key(*, path_score: int, method: bool, headers: int, queries: int, created: str, namespace: str, name: str,
        rule_index: int, match_index: int) -> Key:
    return Key(-path_score, not method, -headers, -queries, created, namespace, name, rule_index, match_index)
