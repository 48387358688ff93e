"""RG0125: a passthrough route may not name a host a more specific HTTPS listener on its port serves.

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
from validators.objects import Obj, kind_of
from validators.states import State
from validators.views import attachments, sniprecedence


def findings(route: Obj, state: State, *, http_ports: Sequence[int]) -> Iterator[Finding]:
    if kind_of(route) != "TLSRoute":
        return
    attached, _ = attachments.attach(route, state, http_ports=http_ports)
    hostnames = [h.lower() for h in attachments.route_hostnames(route)]
    lsts: list[attachments.Listener] | None = None
    seen: set[tuple[int, str]] = set()
    for a in attached:
        through = a.listener
        if through.protocol != "TLS" or through.tls_mode != "Passthrough":
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
                         f"this route's passthrough listener {through.name!r} of {through.source} (hostname "
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
