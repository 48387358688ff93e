"""The custom Route CRD (routegate.io/v1alpha1, seed 000): one dynamic backend per Route with a
literal server, request headers URL-encoded into ``route-reqhdr.map`` keyed on the backend name and
decoded at request time, and host+prefix-path maps that select the backend on the HTTP frontend.

Values are checked here (a bad Route is skipped with a finding, never a render crash): the address must
be an IP literal or a DNS name, the header name a token; header values are URL-encoded so a space,
``;`` or ``%`` can neither split the map line nor read request state.
"""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass, field

from haproxy_check import escaping
from haproxy_check.descriptions import ServerDesc
from validators.findings import Finding, Severity
from validators.objects import Obj, Ref, as_list, dig, group_of, ref_of
from validators.states import State

REQHDR_MAP = "route-reqhdr.map"
EXACT_MAP = "route-crd-exact.map"
PREFIX_MAP = "route-crd-prefix.map"
ANY_HOST = "*"


@dataclass(frozen=True, slots=True)
class CrdRoute:
    ref: Ref
    backend: str
    server: ServerDesc
    headers: tuple[tuple[str, str], ...]  # (lower-case name, URL-encoded value)


@dataclass(slots=True)
class CrdModel:
    routes: list[CrdRoute] = field(default_factory=list)
    set_names: list[str] = field(default_factory=list)  # header names, first spelling wins, sorted
    header_entries: list[str] = field(default_factory=list)  # "<be>|set|<name> <urlencoded>"
    exact_entries: list[str] = field(default_factory=list)  # "<host><path> <be>"
    prefix_entries: list[str] = field(default_factory=list)  # "<host><path>/ <be>", longest first
    findings: list[Finding] = field(default_factory=list)


def backend_name(ref: Ref) -> str:
    return escaping.ident(f"{ref.namespace}_{ref.name}", what="backend name")


CONFLICT = "RG0523"
Key = tuple[str, tuple[str | int, ...]]  # (host+path map key, field path of the path that makes it)


def _one(route: Obj) -> tuple[CrdRoute, list[Key], list[tuple[str, str]]]:
    """The route, its match keys (host+path, with the field they come from) and header names; raises
    Unsafe/ValueError when unusable."""
    ref = ref_of(route)
    be = backend_name(ref)
    address = dig(route, "spec", "backend", "address")
    port = dig(route, "spec", "backend", "port")
    if not isinstance(address, str) or not address:
        raise ValueError("spec.backend.address is required")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError(f"spec.backend.port {port!r} is not a port number")
    escaping.server_address(address, what="spec.backend.address")  # refuses an IPv6 zone too
    with contextlib.suppress(ValueError):
        address = str(ipaddress.ip_address(address))
    server = ServerDesc("primary", address, port)
    headers: list[tuple[str, str]] = []
    names: list[tuple[str, str]] = []
    for i, h in enumerate(as_list(dig(route, "spec", "requestHeaders"))):
        name, value = dig(h, "name"), dig(h, "value", default="")
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValueError(f"spec.requestHeaders[{i}] needs a string name and value")
        escaping.http_token(name)
        headers.append((name.lower(), escaping.url_value(value)))
        names.append((name.lower(), name))
    hosts = [escaping.hostname(h.lower() if isinstance(h, str) else h)
             for h in as_list(dig(route, "spec", "hostnames"))] or [ANY_HOST]
    paths: list[tuple[str, tuple[str | int, ...]]] = [
        (escaping.path(p), ("spec", "paths", j)) for j, p in enumerate(as_list(dig(route, "spec", "paths")))
    ] or [("/", ("spec",))]
    keys = [(f"{h}{p.rstrip('/')}", where) for h in hosts for p, where in paths]  # "/" -> "host" (prefix "host/")
    return CrdRoute(ref, be, server, tuple(headers)), keys, names


def _conflict(key: str, where: tuple[str | int, ...], winner: Ref, loser: Ref) -> list[Finding]:
    """Both sides of a host+path two Routes claim (as RG0508 for HTTPRoutes): the loser's review and the
    winner's (which may be the one taking the path over) each get a warning."""
    host, _, path = key.partition("/")
    what = f"host {host} path /{path}"
    return [Finding(CONFLICT, f"{what} is already claimed by {winner} (first by namespace/name), which wins; "
                    "this Route does not get it", where, Severity.WARN, subject=False, about=str(loser)),
            Finding(CONFLICT, f"{what} is also claimed by {loser}, which loses it to this Route", ("spec",),
                    Severity.WARN, subject=False, about=str(winner))]


def build(state: State) -> CrdModel:
    model = CrdModel()
    spellings: dict[str, str] = {}
    exact: dict[str, str] = {}
    owner: dict[str, Ref] = {}
    for route in state.list("Route"):
        if group_of(route) != "routegate.io":
            continue
        try:
            crd, keys, names = _one(route)
        except (escaping.Unsafe, ValueError) as exc:
            model.findings.append(Finding("RG0519", f"Route is not rendered: {exc}", ("spec",), Severity.WARN,
                                          subject=False, about=str(ref_of(route))))
            continue
        model.routes.append(crd)
        for lower, spelled in names:
            spellings.setdefault(lower, spelled)
        model.header_entries += [f"{crd.backend}|set|{escaping.header_key(n)} {v}" for n, v in crd.headers]
        for key, where in keys:
            winner = owner.setdefault(key, crd.ref)  # state.list is sorted: first (namespace, name) wins
            exact.setdefault(key, crd.backend)
            if winner != crd.ref:
                model.findings += _conflict(key, where, winner, crd.ref)
    model.set_names = [spellings[k] for k in sorted(spellings)]
    model.exact_entries = [f"{k} {be}" for k, be in sorted(exact.items()) if "/" in k]
    prefixes = sorted(exact.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    model.prefix_entries = [f"{k}/ {be}" for k, be in prefixes]
    return model
