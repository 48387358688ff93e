"""Which server names on a port shared by passthrough and HTTPS listeners the HTTPS listeners keep.

Gateway API (GatewaySpec.listeners, "Listeners that are distinct only by Hostname"): a request matches
the most specific listener hostname first: an exact name before a wildcard, a wildcard with more labels
before one with fewer, and any wildcard before an empty hostname. A TLSRoute's hostnames only narrow
what its own listener admits (Listener.hostname: routes attach where their hostnames intersect the
listener's). So a passthrough route must not take a name that a more specific HTTPS (Terminate) listener
on the same port serves: those connections are the HTTPS listener's to decrypt, whoever wrote the route.

Used twice, to agree: the render (``haproxy_check.render.l4.tlsroutes``: the HTTPS listener's names
are sent to the HTTP engine before the route's entries are looked at) and admission
(``validators.crossobject.passthroughs``: RG0128 names the host, the listener and its owner).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from validators.states import State
from validators.views import podports
from validators.views.attachments import Listener


@dataclass(frozen=True, slots=True)
class HttpsClaim:
    host: str  # the name the HTTPS listener keeps: exact, or "*.suffix"
    listener: Listener  # the more specific HTTPS listener
    whole: bool  # it keeps the route's whole hostname (else a narrower part of a wildcard)


def specificity(hostname: str | None) -> tuple[int, int]:
    """Listener precedence: exact > wildcard > empty; among the same kind, more labels first."""
    if not hostname:
        return (0, 0)
    return (1 if hostname.startswith("*.") else 2, hostname.count("."))


def covers(outer: str, inner: str) -> bool:
    """``outer`` (exact or ``*.suffix``) matches every name ``inner`` does."""
    if outer == inner:
        return True
    return outer.startswith("*.") and inner.endswith(outer[1:]) and len(inner) > len(outer) - 1


def https_claims(host: str, through: Listener, https: Sequence[Listener]) -> list[HttpsClaim]:
    """The parts of ``host`` (a route hostname as seen through the passthrough listener ``through``) that
    a more specific HTTPS listener of ``https`` keeps; the most specific first."""
    host = host.lower()
    mine = specificity(through.hostname)
    out: list[HttpsClaim] = []
    for lst in https:
        name = (lst.hostname or "").lower()
        if lst == through or specificity(name) <= mine:
            continue
        if covers(name, host):
            out.append(HttpsClaim(host, lst, True))
        elif covers(host, name):
            out.append(HttpsClaim(name, lst, False))
    out.sort(key=lambda c: (not c.whole, [-x for x in specificity(c.listener.hostname)], c.host))
    return out


def shared_https(state: State, listeners: Sequence[Listener], port: int) -> list[Listener]:
    """The HTTPS listeners reached through ``:<port>`` itself: those of the port's primary (oldest) pair
    (``validators.views.podports``); other Gateways' HTTPS listeners there are on their own pod ports."""
    on_port = [x for x in listeners if x.port == port and x.protocol in ("HTTP", "HTTPS") and not x.dropped]
    ages = podports.pair_ages(state, on_port)
    if not ages:
        return []
    gateway = min(ages, key=lambda p: (ages[p], p[0].namespace, p[0].name))[0]
    return [x for x in on_port if x.gateway == gateway and x.protocol == "HTTPS" and x.tls_mode != "Passthrough"]
