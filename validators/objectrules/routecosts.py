"""How much one route can add to every ``haproxy -c``: matches x hostnames per rule (``RG0121``).

Each match of a rule becomes one map entry or ACL line per hostname it serves (per listener), so a
rule's cost is its matches times the route's hostnames; the schema alone allows 64 x 16 per rule.
The limit is ``limits.matchesTimesHostnamesPerRule`` (``validators.limits``); the render step bounds
the total lines of a route (``RG0408``) and the servers of a backend (``RG0407``).
"""

from __future__ import annotations

from collections.abc import Iterator

from validators import codes
from validators.contexts import Context
from validators.findings import Finding
from validators.objectrules.traversals import rules_of
from validators.objects import Obj, as_list, as_map


def match_hostnames(obj: Obj, ctx: Context) -> Iterator[Finding]:
    limit = ctx.limits.matches_hostnames_per_rule
    hostnames = len(as_list(as_map(obj.get("spec")).get("hostnames")))
    for path, rule in rules_of(obj):
        matches = len(as_list(rule.get("matches")))
        cost = max(1, matches) * max(1, hostnames)
        if cost > limit:
            yield Finding(codes.RULE_MATCH_HOSTNAMES,
                          f"{matches} matches x {hostnames} hostnames = {cost} routing entries per listener; "
                          f"the limit is {limit} (limits.matchesTimesHostnamesPerRule): split the rule or the "
                          "route", (*path, "matches"))
