"""Servers of a Service port, from its EndpointSlices.

Names are the 1-based index in address order (``s1``, ``s2``, ...): the same set of endpoints always
gives the same names, and one endpoint moving to a new address keeps the server count, so the change
is a server update rather than a delete plus an add. Only IP literals are used; anything else in an
EndpointSlice (FQDN endpoints, garbage) never reaches haproxy.cfg.

An ExternalName Service has no endpoints: the data plane resolves ``spec.externalName`` at run time.
It renders as one server ``s1 <name>:<port> resolvers routegate init-addr none`` (the ``resolvers``
section is ``haproxy_check/render/templates/990-resolvers.cfg.j2``): HAProxy starts without an address and
fills it from DNS, so neither a reload nor ``haproxy -c`` waits for a lookup (``init-addr none``; the
check is sandboxed without network anyway, docs/SANDBOX.md). A name that is not a DNS name gives no
server.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence
from typing import Any

from haproxy_check import escaping
from haproxy_check.descriptions import ServerDesc
from validators.crossobject import backendrefs
from validators.objects import Obj, as_list, dig, name_of, namespace_of
from validators.states import State
from validators.views import indexes

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
RESOLVERS = "routegate"
EXTERNAL_NAME_OPTIONS = ("resolvers", RESOLVERS, "init-addr", "none")


def external_name(service: Obj) -> str | None:
    """The DNS name of an ExternalName Service ("" when the name is unusable), None for other types."""
    if dig(service, "spec", "type") != "ExternalName":
        return None
    name = dig(service, "spec", "externalName")
    if not isinstance(name, str) or not name or name.startswith("*."):
        return ""
    try:
        return escaping.hostname(name.rstrip(".").lower())
    except escaping.Unsafe:
        return ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ready(endpoint: Any) -> bool:
    ready = dig(endpoint, "conditions", "ready")
    return ready is None or ready is True  # nil means ready (EndpointSlice API)


def _ip(text: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not isinstance(text, str):
        return None
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    # A zone ("fe80::1%eth0") passes ipaddress with any characters in it, and HAProxy would read them
    # as more words of the server line; a zone means nothing on another node anyway: not an endpoint.
    return None if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is not None else ip


@functools.lru_cache(maxsize=1 << 16)
def _parsed(text: str) -> tuple[int, int, str] | None:
    """``_ip(text)`` as (version, number, canonical text): remembered, since the same endpoints come back
    in every backend of a Service and every render, and plain ints sort without ``ipaddress.__lt__``.
    A plain IPv4 address is read without ipaddress (a tenth of the time: most endpoints are one)."""
    quad = escaping.dotted_quad(text)
    if quad is not None:
        a, b, c, d = quad
        return 4, (a << 24) | (b << 16) | (c << 8) | d, text
    ip = _ip(text)
    return None if ip is None else (ip.version, int(ip), str(ip))


def _slices_by_service(state: State) -> dict[tuple[str, str], list[Obj]]:
    index: dict[tuple[str, str], list[Obj]] = {}
    for eps in state.list("EndpointSlice"):
        owner = dig(eps, "metadata", "labels", SERVICE_NAME_LABEL)
        if isinstance(owner, str):
            index.setdefault((namespace_of(eps), owner), []).append(eps)
    return index


def slices_of(state: State, namespace: str, service: str) -> list[Obj]:
    """EndpointSlices of one Service, from a per-state index (one pass over all slices per state version,
    not one per backend: a render of N backends stays linear)."""
    return indexes.index(state, "endpoint-slices", _slices_by_service).get((namespace, service), [])


def endpoint_addresses(state: State, service: Obj, port: int, *, limit: int | None = None) -> list[tuple[str, int]]:
    """Sorted unique (address, target port) of ready endpoints serving the Service port.

    With ``limit`` the scan stops once more than ``limit`` addresses are found (slices in name order,
    endpoints in slice order): a tenant's EndpointSlices cost every render O(limit) address parses,
    not O(all endpoints). More than ``limit`` entries back means the Service is over the limit.
    """
    return _addresses(service, port, slices_of(state, namespace_of(service), name_of(service)), limit)


def _addresses(service: Obj, port: int, slices: Sequence[Obj], limit: int | None) -> list[tuple[str, int]]:
    """``endpoint_addresses`` from the Service's EndpointSlices."""
    sp = backendrefs.service_port(service, port)
    if sp is None:
        return []
    port_name = dig(sp, "name", default="")
    found: set[tuple[int, int, int]] = set()  # (version, address as a number, port)
    texts: dict[tuple[int, int], str] = {}  # (version, number) -> the address's canonical text
    for eps in slices:
        target = next((_int(dig(p, "port")) for p in as_list(dig(eps, "ports"))
                       if dig(p, "name", default="") == port_name), None)
        if target is None or not 0 < target < 65536:
            continue
        for ep in as_list(dig(eps, "endpoints")):
            if not _ready(ep):
                continue
            for addr in as_list(dig(ep, "addresses")):
                ip = _parsed(addr) if isinstance(addr, str) else None
                if ip is not None:
                    found.add((ip[0], ip[1], target))
                    texts[ip[0], ip[1]] = ip[2]
            if limit is not None and len(found) > limit:
                break
        if limit is not None and len(found) > limit:
            break
    return [(texts[version, number], target) for version, number, target in sorted(found)]


def servers_for(state: State, service: Obj, port: int, *, weight: int = 1,
                options: Sequence[str] = (), limit: int | None = None) -> list[ServerDesc]:
    """Ready EndpointSlice endpoints of a Service port as servers named ``s1..sN``; [] when none."""
    return servers_within(state, service, port, weight=weight, options=options, limit=limit)[0]


def servers_within(state: State, service: Obj, port: int, *, weight: int = 1, options: Sequence[str] = (),
                   limit: int | None = None, memo: ServersMemo | None = None) -> tuple[list[ServerDesc], bool]:
    """The servers (at most ``limit``: ``limits.serversPerBackend``, from the first ready endpoints in
    EndpointSlice order, named in address order) and whether the Service has more ready endpoints than
    that. EndpointSlices are a tenant's to fill, and every server costs every render and every
    ``haproxy -c`` that includes the backend. ``memo``: one render's (``ServersMemo``)."""
    dns = external_name(service)
    if dns is not None:  # resolved by the data plane at run time; the backendRef port is the port
        return ([ServerDesc("s1", dns, port, weight, (*options, *EXTERNAL_NAME_OPTIONS))]
                if dns and 0 < port < 65536 and limit != 0 else []), False
    slices = slices_of(state, namespace_of(service), name_of(service))
    key = (id(service), port, weight, tuple(options), limit)
    known = memo.get(key) if memo is not None else None
    if known is not None and known[0] is service and _same_objects(known[1], slices):
        return list(known[2]), known[3]
    addresses = _addresses(service, port, slices, limit)
    servers = tuple(ServerDesc(f"s{i}", addr, target, weight, tuple(options))
                    for i, (addr, target) in enumerate(addresses[:limit], start=1))
    over = limit is not None and len(addresses) > limit
    if memo is not None:
        memo[key] = (service, tuple(slices), servers, over)
    return list(servers), over


# ``servers_within``'s memo for one render (``memo``): the servers of (Service, port, weight, options,
# limit), kept with the very Service and EndpointSlice objects they were made from, so a Service behind
# many backendRefs is read once per render, not once per backend. The entry holds its objects, so the id
# in its key names no other while the memo lives.
ServersMemo = dict[tuple[Any, ...], tuple[Obj, tuple[Obj, ...], tuple[ServerDesc, ...], bool]]


def _same_objects(kept: tuple[Obj, ...], now: Sequence[Obj]) -> bool:
    return len(kept) == len(now) and all(a is b for a, b in zip(kept, now, strict=True))
