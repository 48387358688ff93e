"""Cross-object findings (issue 5 section 3): warnings that need the state view.

Every finding comes from the same attachment/reference/claim logic the renderer uses, so what the
gate warns about is what the rendered config does. Codes RG05xx are listed in
docs/RULES-crossobject.md. All findings are warnings; an object about another object than the one
under review carries ``subject=False`` and ``about``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from validators import tlsmodes
from validators.crossobject import backendpolicies, backendrefs, claims, passthroughs, statuses
from validators.findings import Finding, Severity
from validators.objects import Obj, Ref, as_list, dig, kind_of, namespace_of, ref_of
from validators.states import State
from validators.views import attachments, indexes

CODES: Mapping[str, str] = {
    "RG0501": "BackendNotFound: a backendRef names a Service that does not exist",
    "RG0502": "RefNotPermitted: a cross-namespace backendRef has no covering ReferenceGrant",
    "RG0503": "InvalidKind: a backendRef is not a core Service",
    "RG0504": "NoMatchingParent: a parentRef matches no Gateway/ListenerSet listener",
    "RG0505": "NotAllowedByListeners: the listeners' allowedRoutes (or a protocol conflict) refuse the route",
    "RG0506": "NoMatchingListenerHostname: no route hostname intersects a listener hostname",
    "RG0507": "a TCP port claim lost to an older TCPRoute",
    "RG0508": "the same host+path+matchers are claimed by an older route, which wins",
    "RG0509": "a Gateway/ListenerSet certificateRefs Secret does not exist",
    "RG0510": "a cross-namespace certificateRefs Secret has no covering ReferenceGrant",
    "RG0513": "another Gateway/ListenerSet uses the port with the other TLS mode and an overlapping hostname",
    "RG0514": "a ListenerSet is not admitted by its parent Gateway's allowedListeners",
    "RG0515": "a BackendTLSPolicy has no usable CA: its backends are blocked",
    "RG0516": "a backendRef port is not a port of the Service",
    # render-time findings (haproxy_check: tlsroutes, crdroutes), listed here for `routegate rules`
    "RG0517": "a TLS listener (or SSLPassthrough rule) on a port the HTTP engine keeps is not passed through",
    "RG0518": "a TLSRoute server name on a port is already claimed by an older TLSRoute",
    "RG0519": "a custom Route (or a TLSRoute/TCPRoute name) cannot be rendered safely and is skipped",
    "RG0520": "a listener certificate Secret holds no usable PEM certificate/key pair",
    "RG0521": "a terminating TLS port has no usable certificate; a placeholder is used for the check",
    "RG0522": "a TCP listener shares its port with an HTTP/HTTPS/TLS listener and is not rendered",
    "RG0523": "the same host+path is claimed by two custom Routes; the first by namespace/name wins",
    "RG0524": "a ListenerSet listener clashes with a listener of its parent Gateway or an older ListenerSet",
}

_REF_CODES = {backendrefs.BACKEND_NOT_FOUND: "RG0501", backendrefs.REF_NOT_PERMITTED: "RG0502",
              backendrefs.INVALID_KIND: "RG0503"}
_PARENT_CODES = {attachments.NO_MATCHING_PARENT: "RG0504", attachments.NOT_ALLOWED_BY_LISTENERS: "RG0505",
                 attachments.NO_MATCHING_LISTENER_HOSTNAME: "RG0506"}


def _warn(code: str, message: str, path: tuple[str | int, ...], about: Ref | None = None) -> Finding:
    return Finding(code, message, path, Severity.WARN, subject=about is None,
                   about="" if about is None else str(about))


def _service_ports(service: Obj) -> set[int]:
    return {p for p in (dig(x, "port") for x in as_list(dig(service, "spec", "ports"))) if isinstance(p, int)}


# What a route's parent and backend resolution reads besides the route: ``attach`` and ``backend_refs``.
_ROUTE_READS = attachments.LISTENER_KINDS | backendrefs.REF_READS


def route_findings(route: Obj, state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
                   about: Ref | None = None) -> Iterator[Finding]:
    """Parent and backend resolution of one route: once per state version for a route of the state (a
    Gateway's review, or its audit judged again after one of its routes changed, asks it of every route
    naming the Gateway; ``indexes.of_object`` carries the answers to the next cluster snapshot). Under
    a change of one Gateway that leaves every route's attachment as it was (``same_listeners_below``),
    the answer of the state below it."""
    ports = tuple(http_ports)
    if about is not None and about != ref_of(route):  # the memo keeps a route's findings about itself only
        return _route_findings(route, state, ports, about)
    return _kept_route_findings(route, state, ports, about is not None)


def _kept_route_findings(route: Obj, state: State, ports: tuple[int, ...], about_itself: bool) -> Iterator[Finding]:
    """``route_findings`` of ``route`` about itself (``about_itself``: as another object's review reports
    them) or its own, memoized (``route_findings``).

    One memo serves both readings: the findings about the route itself are its own findings marked as
    about it (``_warn``), so a Gateway's review walking its routes and the routes' own reviews share each
    route's answer. A copy of a route of the state below (``routegate check``'s defaulted input, a
    review's defaulted object) whose every field those findings read is the stored one's takes the stored
    route's answer there (``indexes.stored_twin`` with ``_route_key``): a check of 10,000 routes and their
    Gateway computed each route's findings twice, once for the route and once for the Gateway."""
    below = attachments.same_listeners_below(state, ports)
    seen = below if below is not None else state
    if below is None:
        twin = indexes.stored_twin(state, _ROUTE_READS, route, "route-findings-key", _route_key)
        if twin is not None:
            seen, route = twin
    kept = indexes.of_object(seen, _memo_name(ports), _ROUTE_READS, route, lambda: tuple(
        _route_findings(route, seen, ports, None)))
    if not about_itself or not kept:
        return iter(kept)
    about = str(ref_of(route))
    return iter([replace(f, subject=False, about=about) for f in kept])  # as _warn(..., about=ref) makes them


@functools.cache
def _memo_name(ports: tuple[int, ...]) -> str:
    return f"route-findings:{','.join(map(str, ports))}"


def _route_key(route: Obj) -> tuple[Any, ...]:
    """All that ``_route_findings`` reads of ``route``: what its attachments read (``_attach_key``: its
    identity, hostnames, parentRefs) and its backendRefs' resolution (``_backend_refs_key``), one flat tuple."""
    return (*attachments._attach_key(route), *backendrefs._backend_refs_key(route))


def _route_findings(route: Obj, state: State, http_ports: Sequence[int], about: Ref | None) -> Iterator[Finding]:
    # A TLSRoute without hostnames is RG0117 (single-object rule); its parents' NoMatchingListenerHostname
    # would only repeat it.
    no_hosts = kind_of(route) == "TLSRoute" and not attachments.route_hostnames(route)
    _, statuses = attachments.attach(route, state, http_ports=http_ports)
    for st in statuses:
        if no_hosts and st.reason == attachments.NO_MATCHING_LISTENER_HOSTNAME:
            continue
        if not st.accepted and st.reason != attachments.FOREIGN_PARENT:
            yield _warn(_PARENT_CODES.get(st.reason, "RG0504"), f"{st.reason}: {st.message}",
                        ("spec", "parentRefs", st.parent_index), about)
    for ref in backendrefs.backend_refs(route, state):
        if not ref.resolved:
            # What the render does with it, so this one finding tells the whole fact.
            served = ("it has no servers until the Service exists" if ref.reason == backendrefs.BACKEND_NOT_FOUND
                      else "its share of the traffic is answered with 500")
            yield _warn(_REF_CODES[ref.reason], f"{ref.reason}: {ref.message}; {served}", ref.path, about)
        elif ref.service is not None and ref.port is not None and ref.port not in (
                known := _service_ports(ref.service)) and dig(ref.service, "spec", "type") != "ExternalName":
            # an ExternalName Service's servers take the ref's port
            ports = ", ".join(str(p) for p in sorted(known)) or "none"
            yield _warn("RG0516", f"port {ref.port} is not a port of Service {ref.namespace}/{ref.name} "
                        f"(ports: {ports}); the backend has no servers", (*ref.path, "port"), about)


def _claim_findings(obj: Obj, state: State, http_ports: Sequence[int]) -> Iterator[Finding]:
    me = ref_of(obj)
    if kind_of(obj) == "TCPRoute":
        _, lost = claims.tcp_claims(state, http_ports=http_ports, only=obj)
        code = "RG0507"
    elif kind_of(obj) in ("HTTPRoute", "GRPCRoute"):
        lost = claims.match_claims(state, http_ports=http_ports, only=obj)
        code = "RG0508"
    else:
        return
    for c in lost:
        if c.route == me:
            yield _warn(code, f"{c.what} is already claimed by the older {c.winner}, which wins", c.path)
        elif c.winner == me:
            yield _warn(code, f"{c.what} is now claimed by the older {me}; this route loses it", c.path,
                        c.route)


def _listener_owner_findings(obj: Obj, state: State, http_ports: Sequence[int]) -> Iterator[Finding]:
    me = ref_of(obj)
    if kind_of(obj) == "ListenerSet":
        st = attachments.listener_set_status(obj, state)
        if not st.accepted:
            yield _warn("RG0514", f"ListenerSet is not attached: {st.message}", ("spec", "parentRef"))
            return
    for lst, winner, reason in statuses.clashes(obj, state):
        what = "the same hostname" if reason == "HostnameConflict" else f"protocol {winner.protocol}"
        yield _warn("RG0524", f"Conflicted ({reason}): port {lst.port} with {what} is already listener "
                    f"{winner.name!r} of {winner.source}, which takes precedence; the listener's status is "
                    "Conflicted and its routes share that port's frontend", (*lst.path, "port"))
    declared = attachments.declared_listeners(state, http_ports=http_ports)
    for lst in declared:
        if lst.source != me:
            continue
        # RG0118/RG0119 (validators.objectrules.listeners) cover what one object shows on its own: a dropped TCP
        # listener, and both TLS modes within this object. Here only conflicts with other objects.
        own_modes = {x.tls_mode for x in declared if x.source == me and x.port == lst.port
                     and x.protocol == "TLS"}
        if lst.conflicted and len(own_modes) < 2:
            others = sorted({str(x.source) for x in declared if x.source != me and x.port == lst.port
                             and x.protocol == "TLS" and x.tls_mode != lst.tls_mode
                             and tlsmodes.hostnames_overlap(x.hostname, lst.hostname)})
            yield _warn("RG0513", f"port {lst.port} is also used by {', '.join(others)} with the other TLS "
                        f"mode and an overlapping hostname (this listener is {lst.tls_mode}): a protocol "
                        "conflict, so no route attaches to either", (*lst.path, "tls", "mode"))
        for k, cert in enumerate(lst.certificate_refs):
            path = (*lst.path, "tls", "certificateRefs", k)
            if cert.kind != "Secret":
                continue
            if not backendrefs.grant_allows(state, from_kind=me.kind, from_namespace=me.namespace,
                                           to_kind="Secret", to_namespace=cert.namespace, to_name=cert.name):
                yield _warn("RG0510", f"RefNotPermitted: Secret {cert.namespace}/{cert.name} is in another "
                            f"namespace and no ReferenceGrant in {cert.namespace!r} permits it", path)
            elif state.get("Secret", cert.namespace, cert.name) is None:
                yield _warn("RG0509", f"certificate Secret {cert.namespace}/{cert.name} does not exist; "
                            "the listener has no certificate", path)


def _policy_findings(obj: Obj, state: State) -> Iterator[Finding]:
    tls = backendpolicies.resolve(state, obj)
    if tls.usable:
        for p in tls.problems:
            yield _warn("RG0515", f"{p.message}; this CA is ignored", p.path)
        return
    if not tls.problems:
        yield _warn("RG0515", f"no usable CA: {tls.blocked_reason}", ("spec", "validation"))
    for p in tls.problems:
        yield _warn("RG0515", f"{p.message}; no usable CA, so the policy's backends are blocked", p.path)


def _mention_keys(route: Obj) -> Iterator[tuple[str, ...]]:
    """What a route refers to, as keys of the mentions index: each parentRef as (kind, namespace, name),
    each backendRef's (namespace, name) (a Service change concerns it whatever its kind field says), and
    each namespace a backendRef crosses into (a ReferenceGrant there may cover it)."""
    rns = namespace_of(route)
    for p in as_list(dig(route, "spec", "parentRefs")):
        yield ("parent", str(dig(p, "kind", default="Gateway")), str(dig(p, "namespace", default=rns)),
               str(dig(p, "name", default="")))
    for rule in as_list(dig(route, "spec", "rules")):
        for b in as_list(dig(rule, "backendRefs")):
            ns = str(dig(b, "namespace", default=rns))
            yield "backend", ns, str(dig(b, "name", default=""))
            if ns != rns:
                yield "grant", ns


def mentioning(subject: Ref, state: State) -> list[Obj]:
    """Routes that refer to the subject as a parent or backend (or are covered by a grant there), in
    state order; from an index built once per state version, so a review does not scan every route."""
    mentions = indexes.refs_by_key(state, "route-mentions", backendrefs.BACKEND_ROUTE_KINDS, _mention_keys)
    keys: list[tuple[str, ...]] = [("parent", subject.kind, subject.namespace, subject.name)]
    if subject.kind == "Service":
        keys.append(("backend", subject.namespace, subject.name))
    if subject.kind == "ReferenceGrant":
        keys.append(("grant", subject.namespace))
    refs = {r: None for key in keys for r in mentions.get(key)}
    rank = {kind: i for i, kind in enumerate(backendrefs.BACKEND_ROUTE_KINDS)}
    found = (state.get(r.kind, r.namespace, r.name) for r in sorted(refs, key=lambda r: (
        rank[r.kind], r.namespace, r.name)))
    return [route for route in found if route is not None]


def impact_findings(subject: Ref, state: State, *,
                    http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> Iterator[Finding]:
    """Problems a change to a Gateway/ListenerSet/Service/ReferenceGrant leaves in routes naming it."""
    if subject.kind not in ("Gateway", "ListenerSet", "Service", "ReferenceGrant"):
        return
    ports = tuple(http_ports)
    for route in mentioning(subject, state):
        yield from _kept_route_findings(route, state, ports, True)  # route_findings(about=ref_of(route))


def findings(obj: Obj, state: State, *,
             http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> Iterator[Finding]:
    """Warn findings about ``obj`` (the object under review) in ``state`` (the proposed state), and the
    ownership denial RG0128 (a passthrough route naming a host a more specific HTTPS listener keeps).
    RG0127 compares two states: ``validators.checks`` asks ``addressmoves`` with the state before.

    On DELETE pass the old object: only the impact on routes naming it is reported.
    """
    kind = kind_of(obj)
    me = ref_of(obj)
    deleted = state.get(me.kind, me.namespace, me.name) is None
    if not deleted:
        if kind in backendrefs.BACKEND_ROUTE_KINDS:
            yield from route_findings(obj, state, http_ports=http_ports)
            yield from _claim_findings(obj, state, http_ports)
            yield from passthroughs.findings(obj, state, http_ports=http_ports)
        elif kind in ("Gateway", "ListenerSet"):
            yield from _listener_owner_findings(obj, state, http_ports)
        elif kind == "BackendTLSPolicy":
            yield from _policy_findings(obj, state)
    yield from impact_findings(me, state, http_ports=http_ports)
