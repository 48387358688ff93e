"""Lines per route (``RG0408``): the config lines and map entries one route adds to every check.

Counted on the render's source map, which records the object and field behind every marked line of
haproxy.cfg and every map entry, so the count is what HAProxy will really parse, whatever produced it
(matches x hostnames x listeners, filters, advanced ACL lines). A route over ``limits.linesPerRoute``
is denied with the finding on the rule that produced most of its lines: routes are written by users,
who can split them. Servers are bounded separately (``limits.serversPerBackend``, ``RG0407``).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Mapping

from haproxy_check.results import Origin
from validators import codes
from validators.findings import Finding, PathPart, Severity, format_path
from validators.objects import Ref
from validators.views import attachments

ROUTE_KINDS = (*attachments.ROUTE_KINDS, "Route")


def oversized(lines: Mapping[tuple[str, int], Origin], limit: int, subject: Ref | None) -> list[Finding]:
    """One denying finding per route whose rendered lines exceed ``limit``."""
    return oversized_counts(Counter(lines.values()), limit, subject)


def oversized_counts(counts: Mapping[Origin, int], limit: int, subject: Ref | None) -> list[Finding]:
    """``oversized`` from how many lines each origin marks (``SourceMap.line_counts``, in first-line order:
    a tie between fields goes to the one seen first)."""
    return oversized_pairs(counts.items(), limit, subject)


def oversized_pairs(counts: Iterable[tuple[Origin, int]], limit: int, subject: Ref | None) -> list[Finding]:
    """``oversized_counts`` of (origin, lines) pairs, each origin once (``SourceMap.line_pairs``)."""
    # per route, keyed by its (kind, namespace, name): a tuple of strings hashes in C, a Ref in Python
    per_route: dict[tuple[str, str, str], tuple[Ref, dict[tuple[PathPart, ...], int]]] = {}
    for origin, n in counts:
        ref = origin.ref
        if ref.kind in ROUTE_KINDS:
            key = (ref.kind, ref.namespace, ref.name)
            known = per_route.get(key)
            if known is None:
                known = per_route[key] = (ref, {})  # fields in the order first seen
            fields = known[1]
            field = origin.path[:3]
            fields[field] = fields.get(field, 0) + n
    per_field = {ref: fields for ref, fields in per_route.values()}
    over = [(ref, sum(fields.values())) for ref, fields in per_field.items()]
    found = []
    for ref, count in sorted((item for item in over if item[1] > limit), key=lambda item: str(item[0])):
        # the field with most lines; on a tie the first seen (Counter.most_common(1) picks the same)
        field, most = max(per_field[ref].items(), key=operator.itemgetter(1))
        found.append(Finding(
            codes.RENDER_ROUTE_TOO_LARGE, f"the route renders {count} configuration lines and map entries; the "
            f"limit is {limit} (limits.linesPerRoute); {most} of them come from {format_path(field) or 'the route'}:"
            " split the route or use fewer matches, hostnames or parentRefs",
            field, Severity.DENY, subject=ref == subject, about=str(ref)))
    return found
