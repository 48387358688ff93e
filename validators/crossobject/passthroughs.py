"""RG0128: a passthrough route may not name a host a more specific HTTPS listener on its port serves.

Gateway API: the most specific listener hostname wins (``validators.views.sniprecedence``). A TLSRoute
on a wildcard (or hostname-less) passthrough listener that names such a host would, if rendered, take
that host's TLS connections undecrypted to its own backend: traffic that enters through a listener its
owner does not own and that no route of its owner served. The render never lets it (the HTTPS listener
keeps the name); admission denies the route naming a host the HTTPS listener wholly keeps, and warns
where a wildcard of the route only overlaps narrower names the listener keeps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from validators import codes
from validators.findings import Finding, Severity
from validators.objects import Obj, as_list, dig, kind_of
from validators.states import State
from validators.views import attachments, sniprecedence


def passes_through(route: Obj) -> bool:
    """An HTTPRoute rule with the SSLPassthrough ExtensionRef (as the render finds them)."""
    return any(dig(f, "type") == "ExtensionRef" and dig(f, "extensionRef", "kind") == "SSLPassthrough"
               for rule in as_list(dig(route, "spec", "rules")) for f in as_list(dig(rule, "filters")))


def findings(route: Obj, state: State, *, http_ports: Sequence[int]) -> Iterator[Finding]:
    """RG0128 for a TLSRoute on passthrough listeners, or an HTTPRoute passing its names through (SSLPassthrough)
    on an HTTPS listener less specific than another HTTPS listener of the port."""
    kind = kind_of(route)
    if kind == "TLSRoute":
        passing = ("TLS", "Passthrough")
    elif kind == "HTTPRoute" and passes_through(route):
        passing = ("HTTPS", "Terminate")
    else:
        return
    attached, _ = attachments.attach(route, state, http_ports=http_ports)
    hostnames = [h.lower() for h in attachments.route_hostnames(route)]
    lsts: list[attachments.Listener] | None = None
    seen: set[tuple[int, str]] = set()
    for a in attached:
        through = a.listener
        if (through.protocol, through.tls_mode) != passing:
            continue
        if lsts is None:
            lsts = attachments.listeners(state, http_ports=http_ports)
        https = sniprecedence.shared_https(state, lsts, through.port)
        for host in a.hostnames:
            for claim in sniprecedence.https_claims(host, through, https):
                if (through.port, claim.host) in seen:
                    continue
                seen.add((through.port, claim.host))
                owner = claim.listener
                index = next((i for i, h in enumerate(hostnames) if attachments.intersect_hostname(h, host)), 0)
                heard = (f"HTTPS listener {owner.name!r} of {owner.source} (hostname {owner.hostname}, owner: "
                         f"namespace {owner.source.namespace!r}) on port {through.port} is more specific than "
                         f"the listener this route passes through, {through.name!r} of {through.source} (hostname "
                         f"{through.hostname or 'unset: every name'})")
                if claim.whole:
                    yield Finding(codes.PASSTHROUGH_OVER_HTTPS, f"TLS connections for {claim.host} would be "
                                  f"passed through, undecrypted, to this route's backend, but {heard}: the most "
                                  "specific listener wins, so they stay with that listener; remove the "
                                  "hostname, or ask its owner", ("spec", "hostnames", index), Severity.DENY)
                else:
                    yield Finding(codes.PASSTHROUGH_OVER_HTTPS, f"{claim.host} is not passed through by this "
                                  f"route's {host}: {heard}, so it keeps those names",
                                  ("spec", "hostnames", index), Severity.WARN)
