"""RG0129: a Gateway/ListenerSet change whose HTTPS listener takes passthrough names from routes.

The counterpart of RG0128 (``passthroughs``: a passthrough route may not name a host a more specific
HTTPS listener keeps). Gateway API gives a connection to the most specific listener hostname
(``validators.views.sniprecedence``), and the render follows it: an HTTPS listener added (or re-hosted)
on a port where passthrough routes already serve names takes every name it is more specific for, and
those TLS connections, passed through undecrypted to the routes' backends until now, are decrypted by
the HTTPS listener instead.

Who may do that follows the ownership rules of the other traffic rules (docs/ISOLATION.md, RG0127):

- the passthrough listener the connections enter through is the changer's (the same namespace's Gateway
  or ListenerSet): a Gateway's owner may move what enters through its own listeners, as Gateway API lets
  the more specific listener win. Allowed, with a warning naming the routes and owners that lose names
  (their owners must know; RG0128 would now deny those routes naming the host);
- the passthrough listener is another owner's (a tenant's ListenerSet, or the Gateway when a tenant's
  ListenerSet adds the HTTPS listener) and so is the route: the change would move traffic that enters
  through a listener its owner does not own and is served by a route its owner does not own. Denied,
  naming the names, the routes and their owners.

A route of the changer's own namespace loses nothing another owner had. O(change): only the ports of
the change's new HTTPS listeners are looked at, and only the routes naming the passthrough listeners'
Gateways or ListenerSets there (``crossobjects.mentioning``, an index per state version).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from validators import codes
from validators.crossobject import crossobjects, passthroughs
from validators.findings import Finding, Severity
from validators.objects import Obj, Ref, as_list, dig, ref_of
from validators.states import State
from validators.views import attachments, sniprecedence


def _https(obj: Obj | None) -> set[tuple[int, str]]:
    """(port, hostname) of an object's HTTPS listeners that terminate."""
    out: set[tuple[int, str]] = set()
    for raw in as_list(dig(obj, "spec", "listeners")) if obj is not None else ():
        port = dig(raw, "port")
        mode = dig(raw, "tls", "mode", default="Terminate")
        if dig(raw, "protocol") == "HTTPS" and isinstance(port, int) and mode != "Passthrough":
            host = dig(raw, "hostname")
            out.add((port, host.lower() if isinstance(host, str) else ""))
    return out


def findings(obj: Obj, base: State, proposed: State, *, http_ports: Sequence[int]) -> Iterator[Finding]:
    """RG0129 for the change of ``obj`` (a Gateway or ListenerSet) from ``base`` to ``proposed``."""
    me = ref_of(obj)
    if me.kind not in ("Gateway", "ListenerSet"):
        return
    now = proposed.get(me.kind, me.namespace, me.name)
    added = _https(now) - _https(base.get(me.kind, me.namespace, me.name))
    if not added:
        return  # no new HTTPS listener (or hostname): it takes no name it did not keep (most updates)
    before_lsts = attachments.listeners(base, http_ports=http_ports)
    after_lsts = attachments.listeners(proposed, http_ports=http_ports)
    seen: set[tuple[int, str]] = set()
    for port in sorted({p for p, _ in added}):
        kept_before = sniprecedence.shared_https(base, before_lsts, port)
        kept_after = sniprecedence.shared_https(proposed, after_lsts, port)
        mine = [x for x in kept_after if x.source == me]
        if not mine:
            continue  # its HTTPS listeners are not reached through :<port> (a pod port, or not bound)
        # TLSRoutes pass names through on Passthrough TLS listeners, SSLPassthrough HTTPRoutes on HTTPS ones
        passing = [x for x in after_lsts if x.port == port and not x.conflicted and (
            (x.protocol == "TLS" and x.tls_mode == "Passthrough") or (x.protocol == "HTTPS" and x not in mine))]
        for route, through, host in _passed_names(proposed, passing, http_ports):
            was = {c.host for c in sniprecedence.https_claims(host, through, kept_before)}
            for claim in sniprecedence.https_claims(host, through, kept_after):
                if claim.listener.source != me or claim.host in was or (port, claim.host) in seen:
                    continue
                seen.add((port, claim.host))
                if route.namespace == me.namespace:
                    continue
                yield _finding(me, port, claim, route, through)


def _passed_names(state: State, passing: Sequence[attachments.Listener], http_ports: Sequence[int],
                  ) -> Iterator[tuple[Ref, attachments.Listener, str]]:
    """(route, listener, hostname) of each name a route passes through on ``passing``: a TLSRoute on a
    Passthrough TLS listener, an HTTPRoute's SSLPassthrough rule on an HTTPS listener. A name two routes
    claim counts once, for the one the render gives it to (SSLPassthrough HTTPRoutes first, then the oldest)."""
    sources = {x.source for x in passing}
    routes = {id(r): r for src in sorted(sources, key=str) for r in crossobjects.mentioning(src, state)
              if r.get("kind") == "TLSRoute" or (r.get("kind") == "HTTPRoute" and passthroughs.passes_through(r))}
    claimed: set[tuple[int, str]] = set()
    for route in sorted(routes.values(), key=lambda r: (r.get("kind") != "HTTPRoute", attachments.age_key(r))):
        attached, _ = attachments.attach(route, state, http_ports=http_ports)
        for a in attached:
            if a.listener not in passing or (a.listener.protocol == "HTTPS") != (route.get("kind") == "HTTPRoute"):
                continue
            for host in a.hostnames:
                if (a.listener.port, host.lower()) not in claimed:
                    claimed.add((a.listener.port, host.lower()))
                    yield ref_of(route), a.listener, host.lower()


def _finding(me: Ref, port: int, claim: sniprecedence.HttpsClaim, route: Ref,
             through: attachments.Listener) -> Finding:
    https = claim.listener
    path = (*https.path, "hostname") if https.hostname else (*https.path, "port")
    what = (f"HTTPS listener {https.name!r} (hostname {https.hostname or 'unset: every name'}) on port {port} "
            f"is more specific than the listener {through.name!r} of {through.source} (hostname "
            f"{through.hostname or 'unset: every name'}), so it takes the TLS connections for {claim.host} that "
            f"{route} (owner: namespace {route.namespace!r}) passes through, undecrypted, to its backend: they "
            "would be decrypted by this listener instead")
    if through.source.namespace == me.namespace:
        return Finding(codes.HTTPS_OVER_PASSTHROUGH, f"{what}. They enter through a listener of this owner, so "
                       f"the move is allowed; tell the owner of {route}", path, Severity.WARN)
    return Finding(codes.HTTPS_OVER_PASSTHROUGH, f"{what}. They enter through a listener namespace "
                   f"{through.source.namespace!r} owns and are served by a route this owner does not own; use "
                   f"another hostname or port, or ask the owner of {route} to remove the name first", path,
                   Severity.DENY)
