"""Gateway API-shaped status for every kind seed 004 reports on, from the shared attachment and
reference logic: routes (status.parents[].conditions), Gateways (Accepted, Programmed, and per listener
Accepted/Programmed/ResolvedRefs/Conflicted, supportedKinds, attachedRoutes), ListenerSets (the same for
their listeners, a clash with the parent Gateway's listeners marked Conflicted) and BackendTLSPolicies
(Accepted, ResolvedRefs). One module for admission, ``routegate check``/``render`` and the reconcile loop.

"Programmed" is what the render would program: the data plane's own outcome is the reconcile loop's.
Pure; JSON-serializable output, stable order (parentRefs / listeners order, conditions in the order the
Gateway API lists them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from validators.contexts import Context
from validators.crossobject import backendpolicies, backendrefs, frontendtrust
from validators.findings import format_path
from validators.objectrules import backendtlsrules, gatewayrefusals, unhonoured
from validators.objects import GATEWAY_GROUP, Obj, Ref, as_list, as_map, created_at, dig, kind_of, ref_of
from validators.states import Overlay, State
from validators.views import attachments, indexes

#: Listener protocols the data plane serves (HAProxy has no UDP proxying).
SUPPORTED_PROTOCOLS = frozenset({"HTTP", "HTTPS", "TLS", "TCP"})
#: Route kinds a listener may list in allowedRoutes.kinds, per protocol.
ROUTABLE_KINDS = {"HTTP": {"HTTPRoute", "GRPCRoute"}, "HTTPS": {"HTTPRoute", "GRPCRoute"},
                  "TLS": {"TLSRoute"}, "TCP": {"TCPRoute"}}
STATUS_KINDS = ("Gateway", "ListenerSet", "BackendTLSPolicy", *attachments.ROUTE_KINDS)


def resolved_condition(route: Obj, state: State) -> dict[str, str]:
    """ResolvedRefs for the whole route: False with the first unresolved backendRef's reason."""
    bad = backendrefs.unresolved(backendrefs.backend_refs(route, state))
    if not bad:
        return {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "Resolved"}
    first = bad[0]
    where = format_path(first.path)
    return {"type": "ResolvedRefs", "status": "False", "reason": first.reason,
            "message": f"{where}: {first.message}"}


def route_status(route: Obj, state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
                 ) -> dict[str, Any]:
    """``{"parents": [{"parentRef": ..., "conditions": [Accepted, ResolvedRefs]}, ...]}``."""
    _, statuses = attachments.attach(route, state, http_ports=http_ports)
    resolved = resolved_condition(route, state)
    parent_refs = as_list(dig(route, "spec", "parentRefs"))
    mirrored = unhonoured.mirrored_rules(route)

    def conditions(st: attachments.ParentStatus) -> list[dict[str, str]]:
        refused = _refused_parent(parent_refs[st.parent_index], ref_of(route).namespace, state) if st.accepted else ""
        if refused:  # the Gateway is not served (gatewayrefusals): nothing attaches to it
            return [_condition("Accepted", False, "NoMatchingParent", refused), dict(resolved)]
        found = [{"type": "Accepted", "status": "True" if st.accepted else "False", "reason": st.reason,
                  "message": st.message}, dict(resolved)]
        return with_unmirrored_rules(found, mirrored) if st.accepted else found

    return {"parents": [{"parentRef": parent_refs[st.parent_index], "conditions": conditions(st)}
                        for st in statuses if st.reason != attachments.FOREIGN_PARENT]}  # foreign: theirs to report


def _refused_parent(raw: Any, namespace: str, state: State) -> str:
    """Why the Gateway a parentRef names (itself, or a ListenerSet's parent) is not served; "" when it is."""
    ref = as_map(raw)
    kind = str(ref.get("kind") or "Gateway")
    target = state.get(kind, str(ref.get("namespace") or namespace), str(ref.get("name") or ""))
    if target is not None and kind == "ListenerSet":
        parent = attachments.listener_set_parent(target)
        target = state.get("Gateway", parent.namespace, parent.name) if parent is not None else None
    elif kind != "Gateway":
        return ""
    refused = gatewayrefusals.refusal(target) if target is not None else None
    if refused is None or target is None:
        return ""
    return f"Gateway {ref_of(target).namespace}/{ref_of(target).name} is not accepted ({refused.reason}): " \
           f"{refused.message}"


#: The condition a route's parent entry carries when a rule serves without a part HAProxy cannot honour (a
#: RequestMirror; reconcile adds an invalid sessionPersistence: webhook.reconcile.statusshapes). Not the Gateway API's
#: PartiallyInvalid: that condition MUST describe one of two approaches, "Dropped Rule" (the invalid rules
#: are not served) or "Fall Back" (the route's last known good state is served), and routegate does
#: neither: the current generation's rule serves with the part not applied. A tool or a reader taking "Fall
#: Back" at its word would believe the latest generation is not live. Condition types of an implementation's
#: own carry its domain (metav1.Condition); Accepted stays as it is.
NOT_APPLIED = "routegate.io/NotApplied"


def with_unmirrored_rules(conditions: list[dict[str, str]], mirrored: Sequence[unhonoured.Unhonoured],
                          ) -> list[dict[str, str]]:
    """An accepting parent's [Accepted, ResolvedRefs] when rules serve without the RequestMirror filters HAProxy
    cannot honour (validators.objectrules.unhonoured.mirrored_rules): ``NOT_APPLIED``=True, UnsupportedValue,
    naming each rule and filter and saying it serves without the mirror."""
    if not mirrored:
        return conditions
    said = "; ".join(f"{format_path(m.path)}: {m.message}" for m in mirrored)
    return [*conditions, _condition(NOT_APPLIED, True, "UnsupportedValue", said)]


def statuses(state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> dict[str, Any]:
    """Status of every route in the state, keyed ``"<Kind> <ns>/<name>"``."""
    return {str(ref_of(r)): route_status(r, state, http_ports=http_ports)
            for kind in attachments.ROUTE_KINDS for r in state.list(kind) if kind_of(r) == kind}


def status_of(obj: Obj, state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
              ) -> dict[str, Any] | None:
    """The status of any kind this module knows, None for others."""
    kind = kind_of(obj)
    if kind in attachments.ROUTE_KINDS:
        return route_status(obj, state, http_ports=http_ports)
    if kind == "Gateway":
        return gateway_status(obj, state, http_ports=http_ports)
    if kind == "ListenerSet":
        return listener_set_status(obj, state, http_ports=http_ports)
    if kind == "BackendTLSPolicy":
        return backend_tls_policy_status(obj, state)
    return None


def all_statuses(state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> dict[str, Any]:
    """Status of every object of :data:`STATUS_KINDS`, keyed ``"<Kind> <ns>/<name>"``."""
    out: dict[str, Any] = {}
    counts = _attached_counts(state, None, http_ports)  # one pass over the routes for every listener owner
    for kind in STATUS_KINDS:
        for obj in state.list(kind):
            if kind_of(obj) != kind:
                continue
            if kind in ("Gateway", "ListenerSet"):
                found: dict[str, Any] | None = _owner_status(obj, state, http_ports, counts)
            else:
                found = status_of(obj, state, http_ports=http_ports)
            if found is not None:
                out[str(ref_of(obj))] = found
    return out


def _condition(kind: str, ok: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": message}


# ---------------------------------------------------------------- Gateway and ListenerSet


def gateway_status(gateway: Obj, state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
                   ) -> dict[str, Any]:
    """``{"conditions": [Accepted, Programmed], "listeners": [...]}`` of a Gateway."""
    return _owner_status(gateway, state, http_ports, _attached_counts(state, ref_of(gateway), http_ports))


def listener_set_status(listener_set: Obj, state: State, *,
                        http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> dict[str, Any]:
    """A ListenerSet's status: Accepted by its parent (spec.allowedListeners), then its listeners, each
    Conflicted when it clashes with a listener of the parent Gateway or of an older ListenerSet."""
    return _owner_status(listener_set, state, http_ports, _attached_counts(state, ref_of(listener_set), http_ports))


def _owner_status(owner: Obj, state: State, http_ports: Sequence[int],
                  counts: Mapping[tuple[Ref, str], int]) -> dict[str, Any]:
    if kind_of(owner) == "Gateway":
        listeners = _listener_statuses(owner, state, http_ports, counts)
        refused = gatewayrefusals.refusal(owner)
        if refused is not None:  # not served (the renderer hides it): nothing of it is programmed
            return {"conditions": [_condition("Accepted", False, refused.reason, refused.message),
                                   _condition("Programmed", False, "Invalid", refused.message)],
                    "listeners": [_unprogrammed(x, refused.message) for x in listeners]}
        return {"conditions": _owner_conditions(listeners, "Gateway"), "listeners": listeners}
    listener_set = owner
    parent = attachments.listener_set_parent(listener_set)
    gateway = state.get("Gateway", parent.namespace, parent.name) if parent is not None else None
    refused = gatewayrefusals.refusal(gateway) if gateway is not None else None
    if refused is not None:
        message = f"the parent Gateway is not accepted ({refused.reason}): {refused.message}"
        return {"conditions": [_condition("Accepted", False, "ParentNotAccepted", message),
                               _condition("Programmed", False, "ParentNotAccepted", message)],
                "listeners": []}
    admitted = attachments.listener_set_status(listener_set, state)
    if not admitted.accepted:
        parent_missing = not admitted.parent.name or state.get("Gateway", admitted.parent.namespace,
                                                                admitted.parent.name) is None
        reason = "ParentNotAccepted" if parent_missing else "NotAllowed"
        return {"conditions": [_condition("Accepted", False, reason, admitted.message),
                               _condition("Programmed", False, reason, admitted.message)],
                "listeners": []}
    listeners = _listener_statuses(listener_set, state, http_ports, counts)
    return {"conditions": _owner_conditions(listeners, "ListenerSet"), "listeners": listeners}


def _unprogrammed(listener: dict[str, Any], message: str) -> dict[str, Any]:
    conditions = [_condition("Programmed", False, "Invalid", message) if c["type"] == "Programmed" else c
                  for c in listener["conditions"]]
    return {**listener, "attachedRoutes": 0, "conditions": conditions}


def _owner_conditions(listeners: list[dict[str, Any]], kind: str) -> list[dict[str, str]]:
    def true(entry: dict[str, Any], kind_: str) -> bool:
        return any(c["type"] == kind_ and c["status"] == "True" for c in entry["conditions"])

    valid = [entry for entry in listeners if true(entry, "Accepted")]
    programmed = [entry for entry in listeners if true(entry, "Programmed")]
    bad = [str(entry["name"]) for entry in listeners if entry not in valid or entry not in programmed]
    if listeners and not valid:
        accepted = _condition("Accepted", False, "ListenersNotValid", f"no listener of the {kind} is valid")
    elif bad:
        accepted = _condition("Accepted", True, "ListenersNotValid",
                              f"listeners {', '.join(bad)} are not programmed; the others are")
    else:
        accepted = _condition("Accepted", True, "Accepted", "Accepted")
    if programmed:
        done = _condition("Programmed", True, "Programmed", f"{len(programmed)} of {len(listeners)} listeners")
    else:  # a ListenerSet's reason is ListenersNotValid (ListenerSetProtocolConflict); a Gateway's, Invalid
        done = _condition("Programmed", False, "ListenersNotValid" if kind == "ListenerSet" and listeners else
                          "Invalid", f"no listener of the {kind} can be programmed")
    return [accepted, done]


def _precedence(state: State, gateway: Ref) -> list[attachments.Listener]:
    """Every listener on ``gateway``'s ports, in the order they claim them: the Gateway's own in spec
    order, then admitted ListenerSets oldest first (GEP-1713: the parent's listeners win)."""
    own = [x for x in attachments.declared_listeners(state) if x.gateway == gateway]
    sets = sorted({x.source for x in own if x.source.kind == "ListenerSet"},
                  key=lambda r: (created_at(state.get(r.kind, r.namespace, r.name) or {}), r.namespace, r.name))
    order = {gateway: 0, **{r: i + 1 for i, r in enumerate(sets)}}
    return sorted(own, key=lambda x: (order.get(x.source, len(order)), x.path))


def _clash(a: attachments.Listener, b: attachments.Listener) -> str:
    """"" when two listeners can share a port; else the Gateway API conflict reason."""
    if a.port != b.port:
        return ""
    secure = {"HTTPS", "TLS"}
    if a.protocol != b.protocol and not (a.protocol in secure and b.protocol in secure):
        return "ProtocolConflict"
    if (a.hostname or "*") == (b.hostname or "*"):
        return "HostnameConflict"
    return ""


def clashes(owner: Obj, state: State) -> list[tuple[attachments.Listener, attachments.Listener, str]]:
    """(listener of ``owner``, the listener that wins its port, reason) for every listener of ``owner`` that
    clashes with one of another object (the parent Gateway, an older ListenerSet)."""
    source = ref_of(owner)
    gateway = source if source.kind == "Gateway" else attachments.listener_set_parent(owner)
    if gateway is None:
        return []
    ordered = _precedence(state, gateway)
    out: list[tuple[attachments.Listener, attachments.Listener, str]] = []
    for k, lst in enumerate(ordered):
        if lst.source != source:
            continue
        for other in ordered[:k]:
            reason = _clash(other, lst)
            if reason:
                if other.source != source:
                    out.append((lst, other, reason))
                break
    return out


def _listener_statuses(owner: Obj, state: State, http_ports: Sequence[int],
                       counts: Mapping[tuple[Ref, str], int]) -> list[dict[str, Any]]:
    source = ref_of(owner)
    gateway = source if source.kind == "Gateway" else attachments.listener_set_parent(owner)
    ordered = _precedence(state, gateway) if gateway is not None else []
    declared = {x.path: x for x in attachments.declared_listeners(state, http_ports=http_ports)
                if x.source == source}
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(as_list(dig(owner, "spec", "listeners"))):
        name = str(dig(raw, "name", default=""))
        lst = declared.get(("spec", "listeners", i))
        if lst is None:
            reason = "Invalid"
            out.append({"name": name, "supportedKinds": [], "attachedRoutes": 0, "conditions": [
                _condition("Accepted", False, reason, "the listener has no port or protocol"),
                _condition("Programmed", False, reason, "the listener has no port or protocol"),
                _condition("ResolvedRefs", True, "ResolvedRefs", "Resolved"),
                _condition("Conflicted", False, "NoConflicts", "No conflicts")]})
            continue
        accepted = _condition("Accepted", True, "Accepted", "Accepted")
        if lst.protocol not in SUPPORTED_PROTOCOLS:
            accepted = _condition("Accepted", False, "UnsupportedProtocol",
                                  f"protocol {lst.protocol} is not served: HAProxy proxies TCP, not UDP")
        elif lst.dropped:
            accepted = _condition("Accepted", False, "PortUnavailable", lst.dropped)
        conflict = ""
        winner: attachments.Listener | None = None
        if lst.conflicted:
            conflict = "ProtocolConflict"
        else:
            for other in ordered:
                if other.source == lst.source and other.path == lst.path:
                    break
                conflict = _clash(other, lst)
                if conflict:
                    winner = other
                    break
        if not conflict:
            conflicted = _condition("Conflicted", False, "NoConflicts", "No conflicts")
        elif winner is not None:
            conflicted = _condition("Conflicted", True, conflict,
                                    f"port {lst.port} is already taken by listener {winner.name!r} of "
                                    f"{winner.source}" + (" with the same hostname" if conflict ==
                                                          "HostnameConflict" else f" ({winner.protocol})"))
        else:
            conflicted = _condition("Conflicted", True, conflict,
                                    f"port {lst.port} mixes Passthrough and Terminate TLS listeners")
        resolved = _listener_refs(owner, raw, lst, state)
        resolved, accepted = _client_trust(owner, lst, state, resolved, accepted)
        if conflict and accepted["status"] == "True":
            # a listener that loses its port is not accepted, for the reason it lost (the conformance
            # suite's ListenerSet*Conflict tests: Accepted and Programmed False with the conflict reason)
            accepted = _condition("Accepted", False, conflict, conflicted["message"])
        ok = accepted["status"] == "True" and conflicted["status"] == "False"
        programmed = (_condition("Programmed", True, "Programmed", "Programmed") if ok else
                      _condition("Programmed", False, conflict or "Invalid", accepted["message"]))
        kinds = [k for k in lst.allowed_kinds if k in ROUTABLE_KINDS.get(lst.protocol, set())]
        out.append({"name": lst.name,
                    "supportedKinds": [{"group": GATEWAY_GROUP, "kind": k} for k in kinds],
                    "attachedRoutes": counts.get((source, lst.name), 0) if ok else 0,
                    "conditions": [accepted, programmed, resolved, conflicted]})
    return out


def _client_trust(owner: Obj, lst: attachments.Listener, state: State, resolved: dict[str, str],
                  accepted: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(ResolvedRefs, Accepted) of a terminating listener of a Gateway once its port's frontend
    client-certificate validation is read: an unusable caCertificateRefs entry makes ResolvedRefs False
    with the Gateway API reason; no usable CA at all makes the listener Accepted=False
    NoValidCACertificate (the port accepts no traffic: GatewayInvalidFrontendClientCertificateValidation)."""
    if kind_of(owner) != "Gateway" or not (lst.protocol == "HTTPS" or (lst.protocol == "TLS"
                                                                        and lst.tls_mode == "Terminate")):
        return resolved, accepted
    validation, path = frontendtrust.validation_of(owner, lst.port)
    if validation is None:
        return resolved, accepted
    pems, problems = frontendtrust.check_refs(state, owner, validation, path)
    if problems and resolved["status"] == "True":
        first = problems[0]
        resolved = _condition("ResolvedRefs", False, first.reason, f"{format_path(first.path)}: {first.message}")
    if not pems and accepted["status"] == "True":
        why = (f"{format_path(problems[0].path)}: {problems[0].message}" if problems else
               f"{format_path(path)}: names no CA certificate")
        accepted = _condition("Accepted", False, "NoValidCACertificate",
                              f"no usable client CA certificate, port {lst.port} accepts no traffic: {why}")
        if resolved["status"] == "True":
            resolved = _condition("ResolvedRefs", False, frontendtrust.INVALID_REF, why)
    return resolved, accepted


def _listener_refs(owner: Obj, raw: Any, lst: attachments.Listener, state: State) -> dict[str, str]:
    """ResolvedRefs of one listener: its allowedRoutes.kinds, then each tls.certificateRefs entry."""
    wanted = [as_map(k) for k in as_list(dig(raw, "allowedRoutes", "kinds"))]
    unknown = [str(k.get("kind")) for k in wanted
               if str(k.get("group", GATEWAY_GROUP)) != GATEWAY_GROUP
               or k.get("kind") not in ROUTABLE_KINDS.get(lst.protocol, set())]
    if unknown:
        return _condition("ResolvedRefs", False, "InvalidRouteKinds",
                          f"allowedRoutes.kinds {', '.join(unknown)} cannot attach to a {lst.protocol} listener")
    if lst.tls_mode != "Terminate":
        return _condition("ResolvedRefs", True, "ResolvedRefs", "Resolved")
    owner_ns = ref_of(owner).namespace
    for j, ref in enumerate(as_list(dig(raw, "tls", "certificateRefs"))):
        where = format_path((*lst.path, "tls", "certificateRefs", j))
        group, kind = str(dig(ref, "group", default="")), str(dig(ref, "kind", default="Secret"))
        ns, name = str(dig(ref, "namespace", default="") or owner_ns), str(dig(ref, "name", default=""))
        if group != "" or kind != "Secret":
            return _condition("ResolvedRefs", False, "InvalidCertificateRef",
                              f"{where}: {group or 'core'}/{kind} is not a Secret")
        if not backendrefs.grant_allows(state, from_kind=kind_of(owner), from_namespace=owner_ns, to_kind="Secret",
                                       to_namespace=ns, to_name=name):
            return _condition("ResolvedRefs", False, "RefNotPermitted",
                              f"{where}: no ReferenceGrant in {ns} permits the reference to Secret {ns}/{name}")
        secret = state.get("Secret", ns, name)
        if secret is None:
            return _condition("ResolvedRefs", False, "InvalidCertificateRef",
                              f"{where}: Secret {ns}/{name} does not exist")
        data = {**as_map(dig(secret, "data")), **as_map(dig(secret, "stringData"))}
        missing = [k for k in ("tls.crt", "tls.key") if not data.get(k)]
        if missing:
            return _condition("ResolvedRefs", False, "InvalidCertificateRef",
                              f"{where}: Secret {ns}/{name} has no {' or '.join(missing)}")
    if not as_list(dig(raw, "tls", "certificateRefs")):
        return _condition("ResolvedRefs", False, "InvalidCertificateRef",
                          f"{format_path(lst.path)}: a Terminate listener needs tls.certificateRefs")
    return _condition("ResolvedRefs", True, "ResolvedRefs", "Resolved")


def _attached_counts(state: State, source: Ref | None, http_ports: Sequence[int]) -> Mapping[tuple[Ref, str], int]:
    """Routes attached to each listener, keyed (owner, listener name); the whole state's (``source``
    narrows nothing: a key names its owner), from an index built once per state version."""
    ports = tuple(http_ports)
    return indexes.index(indexes.unchanged_base(state, _COUNT_READS), f"attached-counts{ports}",
                         lambda s: _counts_of(s, ports))


# What the counts read: the routes and what they attach to.
_COUNT_READS = frozenset({*attachments.ROUTE_KINDS, *attachments.LISTENER_KINDS})


def _counts_of(state: State, http_ports: tuple[int, ...]) -> dict[tuple[Ref, str], int]:
    """The counts of a state: an Overlay of one route change is its base's counts with that route's
    listeners taken off and put back (the listeners are the base's), so a review or a ``routegate
    check`` input costs one route, not every route; any other state is counted from scratch."""
    if isinstance(state, Overlay) and state.change.ref.kind in attachments.ROUTE_KINDS:
        ref = state.change.ref
        counts = dict(_attached_counts(state.base, None, http_ports))
        old = state.base.get(ref.kind, ref.namespace, ref.name)
        new = state.get(ref.kind, ref.namespace, ref.name)
        _move(counts, ref, old, state, -1, http_ports)
        _move(counts, ref, new, state, 1, http_ports)
        return counts
    patched = _counts_patched(state, http_ports)
    return patched if patched is not None else attached_counts_scan(state, http_ports)


def _counts_patched(state: State, http_ports: tuple[int, ...]) -> dict[tuple[Ref, str], int] | None:
    """The counts of a state that links to its predecessor (``indexes.prior_link``: a cluster snapshot
    and the refs written since), from the predecessor's counts when only routes and kinds the counts do
    not read changed: the changed routes' listeners taken off and put back, O(changed routes) instead of
    attaching every route again. None: count from scratch."""
    link = indexes.prior_link(state)
    if link is None:
        return None
    before, changed = link
    if any(ref.kind in attachments.LISTENER_KINDS for ref in changed):
        return None  # the listeners themselves changed: every route may attach elsewhere
    prior = indexes.peek(before, f"attached-counts{http_ports}")
    if not isinstance(prior, dict):
        return None
    counts = dict(prior)
    for ref in changed:
        if ref.kind not in attachments.ROUTE_KINDS:
            continue
        for at, step in ((before, -1), (state, 1)):
            _move(counts, ref, at.get(ref.kind, ref.namespace, ref.name), at, step, http_ports)
    return counts


def _move(counts: dict[tuple[Ref, str], int], ref: Ref, route: Obj | None, state: State, step: int,
          http_ports: Sequence[int]) -> None:
    """Take ``route`` (the version of ``ref`` in ``state``) off its listeners' counts (step -1) or put it
    on them (+1); a count that reaches 0 is dropped, as a scan never lists it."""
    if route is None or kind_of(route) != ref.kind:
        return
    for key in _listener_keys(route, state, http_ports):
        counts[key] = counts.get(key, 0) + step
        if not counts[key]:
            del counts[key]


def _listener_keys(route: Obj, state: State, http_ports: Sequence[int]) -> set[tuple[Ref, str]]:
    got, _ = attachments.attach(route, state, http_ports=http_ports)
    return {(a.listener.source, a.listener.name) for a in got}


def attached_counts_scan(state: State, http_ports: Sequence[int]) -> dict[tuple[Ref, str], int]:
    """Every route of the state attached, its listeners counted (the definition the index keeps)."""
    counts: dict[tuple[Ref, str], int] = {}
    for kind in attachments.ROUTE_KINDS:
        for route in state.list(kind):
            for key in _listener_keys(route, state, http_ports):
                counts[key] = counts.get(key, 0) + 1
    return counts


# ---------------------------------------------------------------- BackendTLSPolicy


def backend_tls_policy_status(policy: Obj, state: State) -> dict[str, Any]:
    """``{"conditions": [Accepted, ResolvedRefs]}`` of a BackendTLSPolicy (Gateway API reasons)."""
    resolved = backendpolicies.resolve(state, policy)
    refs = _condition("ResolvedRefs", True, "ResolvedRefs", "Resolved")
    if resolved.problems:
        first = resolved.problems[0]
        reason = "InvalidKind" if "is not a ConfigMap or Secret" in first.message else "InvalidCACertificateRef"
        refs = _condition("ResolvedRefs", False, reason, f"{format_path(first.path)}: {first.message}")
    unsupported = [f for rule in (backendtlsrules.subject_alt_names, backendtlsrules.trust)
                   for f in rule(policy, Context())]
    targets = [t for t in as_list(dig(policy, "spec", "targetRefs"))
               if str(dig(t, "group", default="")) == "" and dig(t, "kind") == "Service"]
    ns = ref_of(policy).namespace
    if unsupported:
        first_finding = unsupported[0]
        accepted = _condition("Accepted", False, "Invalid", f"{first_finding.field}: {first_finding.message}")
    elif not targets or all(state.get("Service", ns, str(dig(t, "name", default=""))) is None for t in targets):
        accepted = _condition("Accepted", False, "TargetNotFound",
                              "no Service of spec.targetRefs exists in namespace " + ns)
    elif (winner := backendpolicies.conflict_winner(state, policy)) is not None:
        accepted = _condition("Accepted", False, "Conflicted",
                              f"{ref_of(winner)} targets the same Service (and sectionName) and is older: it "
                              "governs them (Gateway API conflict resolution, GEP-713)")
    elif not resolved.usable:
        accepted = _condition("Accepted", False, "NoValidCACertificate", resolved.blocked_reason)
    else:
        accepted = _condition("Accepted", True, "Accepted", "Accepted")
    return {"conditions": [accepted, refs]}
