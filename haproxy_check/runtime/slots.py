"""Stable server slots: a server keeps its name while its backend's endpoints change.

Servers made from EndpointSlices are named ``s1..sN`` (``r<k>-s1..`` per backendRef of a multi-backend
rule) in address order. Without memory, one endpoint moving to a new address shifts the names of every
server after it, and the Runtime API sees renamed servers. Given the servers the running data plane
has (the previous applied Description), ``assign`` renames the new list so that:

1. a server whose address and port the previous description had keeps that server's name;
2. the remaining new servers take the names of previous servers that are gone, in name order (one
   ``set server ... addr`` each, not a delete plus an add);
3. the rest get the lowest free numbers of their group.

Only generated names (``s<n>`` and ``r<k>-s<n>``) are renamed, within their group; a template's own
server names are its business. The result is a pure function of (new servers, previous servers), so a
description can be stabilized after the render (``stabilize``) with the same result as rendering with
the previous description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from haproxy_check.descriptions import BackendDesc, Description, ServerDesc

_GENERATED = re.compile(r"^((?:r\d+-)?s)(\d+)$")


def _group(name: str) -> tuple[str, int] | None:
    match = _GENERATED.match(name)
    return (match.group(1), int(match.group(2))) if match else None


def assign(servers: Sequence[ServerDesc], previous: Sequence[ServerDesc]) -> tuple[ServerDesc, ...]:
    """``servers`` renamed into the slots of ``previous`` (see the module docstring), in slot order."""
    if not previous or not servers:
        return tuple(servers)
    groups: dict[str, list[ServerDesc]] = {}
    fixed: list[ServerDesc] = []
    for server in servers:
        group = _group(server.name)
        if group is None:
            fixed.append(server)
        else:
            groups.setdefault(group[0], []).append(server)
    old_groups: dict[str, list[tuple[int, ServerDesc]]] = {}
    for server in previous:
        group = _group(server.name)
        if group is not None:
            old_groups.setdefault(group[0], []).append((group[1], server))
    out: list[tuple[str, int, ServerDesc]] = []
    for prefix, members in groups.items():
        olds = sorted(old_groups.get(prefix, []), key=lambda p: p[0])
        by_endpoint: dict[tuple[str, int], int] = {}
        for number, old in olds:
            by_endpoint.setdefault((old.address, old.port), number)
        taken: set[int] = set()
        placed: list[tuple[int, ServerDesc]] = []
        waiting: list[ServerDesc] = []
        for server in members:
            kept = by_endpoint.get((server.address, server.port))
            if kept is not None and kept not in taken:
                taken.add(kept)
                placed.append((kept, server))
            else:
                waiting.append(server)
        free = [n for n, _ in olds if n not in taken]
        fresh = 1
        for server in waiting:
            if free:
                number = free.pop(0)
            else:
                while fresh in taken:  # every previous slot is taken by now
                    fresh += 1
                number = fresh
            taken.add(number)
            placed.append((number, server))
        out += [(prefix, n, replace(s, name=f"{prefix}{n}")) for n, s in placed]
    out.sort(key=lambda t: (t[0], t[1]))
    return (*fixed, *(s for _, _, s in out))


def stabilize(description: Description, previous: Description | None) -> Description:
    """``description`` with every backend's servers assigned to ``previous``'s slots."""
    if previous is None:
        return description
    before: Mapping[str, BackendDesc] = {b.name: b for b in previous.backends}
    backends = []
    for backend in description.backends:
        old = before.get(backend.name)
        backends.append(backend if old is None else replace(backend, servers=assign(backend.servers, old.servers)))
    return replace(description, backends=tuple(backends))
