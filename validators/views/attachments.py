"""Which listeners exist and which routes attach to them: the one implementation shared by rendering
and by the cross-object findings, so a warning and the rendered config can never disagree.

Pure: objects from a ``State`` in, frozen values out. Follows Gateway API attachment semantics as
seed 004 describes them (ListenerSet delegation, allowedRoutes, sectionName/port, hostname
intersection, mixed Passthrough/Terminate ports, TCP listeners on the HTTP/HTTPS ports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from validators import tlsmodes
from validators.objects import (
    GATEWAY_GROUP,
    Obj,
    Ref,
    as_list,
    as_map,
    created_at,
    dig,
    identity,
    kind_of,
    name_of,
    namespace_of,
    new_ref,
    ref_of,
)
from validators.states import Overlay, State
from validators.views import indexes
from validators.views.foreign import is_foreign

ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
DEFAULT_KINDS: Mapping[str, tuple[str, ...]] = {
    "HTTP": ("HTTPRoute", "GRPCRoute"),
    "HTTPS": ("HTTPRoute", "GRPCRoute"),
    "TLS": ("TLSRoute",),
    "TCP": ("TCPRoute",),
    "UDP": ("UDPRoute",),
}
DEFAULT_HTTP_PORTS = (80, 443)
# What the listener indexes read: the owners, and Namespace labels (ListenerSet admission by selector).
LISTENER_KINDS = frozenset({"Gateway", "ListenerSet", "Namespace"})

ACCEPTED = "Accepted"
NO_MATCHING_PARENT = "NoMatchingParent"
NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
# A parent of another GatewayClass's controller (validators.views.scopes): not ours to judge or report on.
FOREIGN_PARENT = "ForeignParent"


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector (matchLabels + matchExpressions) as a hashable value."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for key, op, values in self.match_expressions:
            present = key in labels
            ok = {
                "In": present and labels.get(key) in values,
                "NotIn": not present or labels.get(key) not in values,
                "Exists": present,
                "DoesNotExist": not present,
            }.get(op, False)  # an unknown operator selects nothing (the API server rejects it)
            if not ok:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Listener:
    gateway: Ref  # the Gateway that owns the port (for a ListenerSet listener: its parent Gateway)
    source: Ref  # the Gateway or ListenerSet that declares it
    name: str
    port: int
    protocol: str  # "HTTP" | "HTTPS" | "TLS" | "TCP" | "UDP"
    hostname: str | None  # None = any host
    tls_mode: str | None  # "Terminate" | "Passthrough" | None
    certificate_refs: tuple[Ref, ...]  # Secret refs (namespace resolved)
    allowed_kinds: tuple[str, ...]  # resolved allowedRoutes.kinds (protocol defaults applied)
    path: tuple[str | int, ...]  # field path of the listener inside `source`
    conflicted: bool = False  # Passthrough and Terminate on one port with overlapping hostnames
    namespaces_from: str = "Same"  # allowedRoutes.namespaces.from
    namespace_selector: Selector | None = None
    dropped: str = ""  # why the listener is not used ("" = used); only from declared_listeners()

    def allows_namespace(self, namespace: str, state: State) -> bool:
        if self.namespaces_from == "All":
            return True
        if self.namespaces_from == "Selector":
            return self.namespace_selector is not None and self.namespace_selector.matches(
                namespace_labels(state, namespace))
        return namespace == self.source.namespace  # Same (the default), also for unknown values

    def allows_kind(self, kind: str) -> bool:
        return kind in self.allowed_kinds


@dataclass(frozen=True, slots=True)
class Attachment:
    route: Ref
    parent_index: int  # index in spec.parentRefs
    listener: Listener
    hostnames: tuple[str, ...]  # route hostnames intersected with the listener's; () = any host


@dataclass(frozen=True, slots=True)
class ParentStatus:
    parent_index: int
    accepted: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ListenerSetStatus:
    listener_set: Ref
    parent: Ref
    accepted: bool
    message: str


# ---------------------------------------------------------------- helpers


def namespace_labels(state: State, namespace: str) -> dict[str, str]:
    """A namespace's labels, with the label the API server always sets."""
    ns = state.get("Namespace", "", namespace)
    labels = {str(k): str(v) for k, v in as_map(dig(ns, "metadata", "labels")).items()}
    labels.setdefault("kubernetes.io/metadata.name", namespace)
    return labels


def selector_of(raw: Any) -> Selector:
    labels = tuple(sorted((str(k), str(v)) for k, v in as_map(dig(raw, "matchLabels")).items()))
    exprs = tuple(
        (str(dig(e, "key", default="")), str(dig(e, "operator", default="")),
         tuple(str(v) for v in as_list(dig(e, "values"))))
        for e in as_list(dig(raw, "matchExpressions"))
    )
    return Selector(labels, exprs)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _allowed_kinds(protocol: str, raw_kinds: Any) -> tuple[str, ...]:
    supported = DEFAULT_KINDS.get(protocol, ())
    kinds = as_list(raw_kinds)
    if not kinds:
        return supported
    out: list[str] = []
    for k in kinds:
        group = dig(k, "group", default=GATEWAY_GROUP)
        kind = _str(dig(k, "kind"))
        if group == GATEWAY_GROUP and kind in supported and kind not in out:
            out.append(kind)
    return tuple(out)


def _listener(gateway: Ref, source: Ref, index: int, raw: Any) -> Listener | None:
    port = _int(dig(raw, "port"))
    protocol = _str(dig(raw, "protocol"))
    if port is None or not protocol:
        return None  # the schema check reports it
    hostname = _str(dig(raw, "hostname")).lower() or None
    tls_mode: str | None = None
    if protocol in ("HTTPS", "TLS"):
        tls_mode = _str(dig(raw, "tls", "mode")) or "Terminate"
    certs = tuple(
        Ref(_str(dig(c, "kind")) or "Secret", _str(dig(c, "namespace")) or source.namespace,
            _str(dig(c, "name")))
        for c in as_list(dig(raw, "tls", "certificateRefs"))
    )
    from_ = _str(dig(raw, "allowedRoutes", "namespaces", "from")) or "Same"
    selector = (selector_of(dig(raw, "allowedRoutes", "namespaces", "selector"))
                if from_ == "Selector" else None)
    return Listener(
        gateway=gateway, source=source, name=_str(dig(raw, "name")), port=port, protocol=protocol,
        hostname=hostname, tls_mode=tls_mode, certificate_refs=certs,
        allowed_kinds=_allowed_kinds(protocol, dig(raw, "allowedRoutes", "kinds")),
        path=("spec", "listeners", index), namespaces_from=from_, namespace_selector=selector,
    )


def _raw_listeners(owner: Obj, gateway: Ref) -> Iterable[Listener]:
    source = ref_of(owner)
    for i, raw in enumerate(as_list(dig(owner, "spec", "listeners"))):
        listener = _listener(gateway, source, i, raw)
        if listener is not None:
            yield listener


def listener_set_parent(listener_set: Obj) -> Ref | None:
    """The Gateway a ListenerSet names in spec.parentRef, or None when it names something else."""
    parent = dig(listener_set, "spec", "parentRef")
    if dig(parent, "group", default=GATEWAY_GROUP) != GATEWAY_GROUP:
        return None
    if dig(parent, "kind", default="Gateway") != "Gateway":
        return None
    return Ref("Gateway", _str(dig(parent, "namespace")) or namespace_of(listener_set),
               _str(dig(parent, "name")))


def listener_set_status(listener_set: Obj, state: State) -> ListenerSetStatus:
    """Whether the parent Gateway's spec.allowedListeners admits this ListenerSet."""
    ref = ref_of(listener_set)
    parent = listener_set_parent(listener_set)
    if parent is None:
        return ListenerSetStatus(ref, Ref("Gateway", "", ""), False,
                                 "spec.parentRef must name a Gateway of group gateway.networking.k8s.io")
    gateway = state.get("Gateway", parent.namespace, parent.name)
    if gateway is None:
        return ListenerSetStatus(ref, parent, False, f"parent {parent} does not exist")
    allowed = dig(gateway, "spec", "allowedListeners", "namespaces")
    from_ = _str(dig(allowed, "from")) or "None"
    ns = ref.namespace
    if from_ == "All":
        ok = True
    elif from_ == "Same":
        ok = ns == parent.namespace
    elif from_ == "Selector":
        ok = selector_of(dig(allowed, "selector")).matches(namespace_labels(state, ns))
    else:
        ok = False
    message = "Accepted" if ok else (
        f"{parent} spec.allowedListeners.namespaces.from is {from_!r}; "
        f"it does not admit ListenerSets from namespace {ns!r}")
    return ListenerSetStatus(ref, parent, ok, message)


def declared_listeners(state: State, *, http_ports: Sequence[int] = DEFAULT_HTTP_PORTS) -> list[Listener]:
    """Every listener of every Gateway and admitted ListenerSet, with ``dropped``/``conflicted`` set.

    Built once per state version (a render and a review ask many times); each caller gets its own list.
    """
    ports = tuple(http_ports)
    return list(indexes.index_reading(state, _named("listeners", ports), LISTENER_KINDS,
                                      lambda s: tuple(_declared(s, ports))))


_NAMES: dict[tuple[str, tuple[int, ...]], str] = {}


def _named(index: str, ports: tuple[int, ...]) -> str:
    """``f"{index}{ports}"``, the name of an index per HTTP ports, formatted once (asked per route)."""
    name = _NAMES.get((index, ports))
    if name is None:
        name = _NAMES[index, ports] = f"{index}{ports}"
    return name


def _declared(state: State, http_ports: Sequence[int]) -> list[Listener]:
    found: list[Listener] = []
    for gw in state.list("Gateway"):
        found.extend(_raw_listeners(gw, ref_of(gw)))
    for ls in state.list("ListenerSet"):
        status = listener_set_status(ls, state)
        if status.accepted:
            found.extend(_raw_listeners(ls, status.parent))
    modes: dict[int, list[tuple[str, str | None]]] = {}
    for lst in found:
        if lst.protocol == "TLS" and lst.tls_mode:
            modes.setdefault(lst.port, []).append((lst.tls_mode, lst.hostname))
    out: list[Listener] = []
    for lst in found:
        if lst.protocol == "TCP" and lst.port in http_ports:
            lst = replace(lst, dropped=f"TCP listener on port {lst.port} collides with the HTTP/HTTPS port")
        if lst.protocol == "TLS" and lst.tls_mode and tlsmodes.conflicted(lst.tls_mode, lst.hostname,
                                                                          modes.get(lst.port, ())):
            lst = replace(lst, conflicted=True)
        out.append(lst)
    out.sort(key=lambda x: (x.gateway, x.port, x.name, x.source))
    return out


def listeners(state: State, *, http_ports: Sequence[int] = DEFAULT_HTTP_PORTS) -> list[Listener]:
    """All usable listeners (conflicted ones included and marked), sorted (gateway, port, name)."""
    return [x for x in declared_listeners(state, http_ports=http_ports) if not x.dropped]


# ---------------------------------------------------------------- hostnames


def _wild_covers(wild: str, host: str) -> bool:
    """``*.a.com`` covers ``x.a.com``, ``y.x.a.com`` and ``*.x.a.com`` (suffix match, >= 1 label)."""
    suffix = wild[1:]  # ".a.com"
    return host.endswith(suffix) and len(host) > len(suffix)


def intersect_hostname(a: str, b: str) -> str | None:
    """The more specific of two hostnames when one covers the other, else None."""
    a, b = a.lower(), b.lower()
    if a == b:
        return a
    if a.startswith("*.") and _wild_covers(a, b):
        return b
    if b.startswith("*.") and _wild_covers(b, a):
        return a
    return None


def intersect_hostnames(route_hosts: Sequence[str], listener_host: str | None) -> tuple[str, ...] | None:
    """Route hostnames seen through a listener; () = any host, None = no overlap."""
    if listener_host is None:
        return tuple(dict.fromkeys(h.lower() for h in route_hosts))
    if not route_hosts:
        return (listener_host,)
    out = [h for h in (intersect_hostname(r, listener_host) for r in route_hosts) if h is not None]
    return tuple(dict.fromkeys(out)) if out else None


def route_hostnames(route: Obj) -> list[str]:
    if kind_of(route) in ("TCPRoute", "UDPRoute"):
        return []
    return [h for h in as_list(dig(route, "spec", "hostnames")) if isinstance(h, str) and h]


# ---------------------------------------------------------------- attach


def _by_source(lsts: Iterable[Listener]) -> dict[Ref, tuple[Listener, ...]]:
    out: dict[Ref, list[Listener]] = {}
    for x in lsts:
        out.setdefault(x.source, []).append(x)
    return {source: tuple(group) for source, group in out.items()}


def listeners_by_source(state: State, *, http_ports: Sequence[int] = DEFAULT_HTTP_PORTS,
                        ) -> Mapping[Ref, tuple[Listener, ...]]:
    """``listeners(state)`` grouped by the Gateway/ListenerSet declaring them, once per state version."""
    ports = tuple(http_ports)
    return indexes.index_reading(state, _named("listeners-by-source", ports), LISTENER_KINDS,
                                 lambda s: _by_source(listeners(s, http_ports=ports)))


_SET_ROUTE, _SET_PARENT_INDEX, _SET_LISTENER, _SET_HOSTNAMES = (
    Attachment.__dict__[f].__set__ for f in ("route", "parent_index", "listener", "hostnames"))


def _new_attachment(route: Ref, parent_index: int, listener: Listener, hostnames: tuple[str, ...]) -> Attachment:
    """``Attachment(...)`` built without the frozen dataclass's __init__ (``validators.objects.new_ref``)."""
    made: Attachment = object.__new__(Attachment)
    _SET_ROUTE(made, route)
    _SET_PARENT_INDEX(made, parent_index)
    _SET_LISTENER(made, listener)
    _SET_HOSTNAMES(made, hostnames)
    return made


def _refused(index: int, reason: str, message: str) -> tuple[list[Attachment], ParentStatus]:
    return [], ParentStatus(index, False, reason, message)


_ACCEPTED_AT: dict[int, ParentStatus] = {}  # ParentStatus(i, True, ACCEPTED, "Accepted") by index: frozen, shared


def _accepted(index: int) -> ParentStatus:
    status = _ACCEPTED_AT.get(index)
    if status is None:
        status = ParentStatus(index, True, ACCEPTED, "Accepted")
        if index < 64:  # the usual few parentRefs; a route with more builds the rest
            _ACCEPTED_AT[index] = status
    return status


def _attach_one(route: Obj, index: int, parent_ref: Any, state: State,
                by_source: Mapping[Ref, tuple[Listener, ...]], kind: str, rns: str, route_ref: Ref,
                hosts: Sequence[str]) -> tuple[list[Attachment], ParentStatus]:
    # The fields read as ``_field`` + ``_str``/``_int`` read them, written out: this runs for every
    # parentRef of every route, in the checks and in the render (whose Recording view no memo serves).
    if type(parent_ref) is dict:
        get = parent_ref.get
        group, pkind, pns, pname, section, port = (get("group"), get("kind"), get("namespace"), get("name"),
                                                   get("sectionName"), get("port"))
    else:
        group, pkind, pns, pname, section, port = (dig(parent_ref, f) for f in _PARENT_FIELDS)
    group = GATEWAY_GROUP if group is None else group
    pkind = (pkind if isinstance(pkind, str) else "") or "Gateway"
    pns = (pns if isinstance(pns, str) else "") or rns
    pname = pname if isinstance(pname, str) else ""
    section = section if isinstance(section, str) else ""
    port = port if isinstance(port, int) and not isinstance(port, bool) else None
    if group != GATEWAY_GROUP or pkind not in ("Gateway", "ListenerSet"):
        return _refused(index, NO_MATCHING_PARENT, f"parent kind {group}/{pkind} is not a Gateway or ListenerSet")
    parent = new_ref(pkind, pns, pname)
    found = state.get(pkind, pns, pname)
    if found is None:
        return _refused(index, NO_MATCHING_PARENT, f"{parent} does not exist")
    if is_foreign(found):
        return _refused(index, FOREIGN_PARENT, f"{parent} belongs to another GatewayClass's controller")
    if pkind == "ListenerSet":
        ls_status = listener_set_status(found, state)
        if not ls_status.accepted:
            return _refused(index, NO_MATCHING_PARENT, f"{parent} is not accepted: {ls_status.message}")
    candidates: Sequence[Listener] = by_source.get(parent, ())  # a Gateway parentRef: its own listeners (GEP-1713)
    if section:
        candidates = [x for x in candidates if x.name == section]
    if port is not None:
        candidates = [x for x in candidates if x.port == port]
    if not candidates:
        what = " ".join(filter(None, [f"sectionName {section!r}" if section else "",
                                      f"port {port}" if port is not None else ""]))
        return _refused(index, NO_MATCHING_PARENT, f"{parent} has no usable listener" + (f" matching {what}"
                                                                                       if what else ""))
    allowed = [x for x in candidates if kind in x.allowed_kinds and x.allows_namespace(rns, state)]  # allows_kind
    if not allowed:
        names = ", ".join(sorted({x.name for x in candidates}))
        return _refused(index, NOT_ALLOWED_BY_LISTENERS,
                        f"listeners {names} of {parent} do not allow {kind} from namespace {rns!r}")
    usable = [x for x in allowed if not x.conflicted]
    if not usable:
        ports = ", ".join(str(p) for p in sorted({x.port for x in allowed}))
        return _refused(index, NOT_ALLOWED_BY_LISTENERS,
                        f"port {ports} of {parent} has Passthrough and Terminate TLS listeners with "
                        "overlapping hostnames (protocol conflict); no route attaches")
    if kind == "TLSRoute" and not hosts:
        return _refused(index, NO_MATCHING_LISTENER_HOSTNAME,
                        "a TLSRoute needs at least one spec.hostnames entry (routing is by SNI)")
    attached: list[Attachment] = []
    for lst in usable:
        got = intersect_hostnames(hosts, lst.hostname)
        if got is not None:
            attached.append(_new_attachment(route_ref, index, lst, got))
    if not attached:
        return _refused(index, NO_MATCHING_LISTENER_HOSTNAME,
                        f"no hostname of the route ({', '.join(hosts)}) matches a listener hostname "
                        f"of {parent}")
    return attached, _accepted(index)


def attach(route: Obj, state: State, *, http_ports: Sequence[int] = DEFAULT_HTTP_PORTS,
           ) -> tuple[list[Attachment], list[ParentStatus]]:
    """Resolve every spec.parentRefs entry of a route; one ParentStatus per entry, in order.

    The listeners come from a per-state-version index (``listeners_by_source``). A route of the state
    is resolved once per state version (the checks, the statuses and the claims of its neighbours all
    ask): the answer reads only the route and the listener owners (``LISTENER_KINDS``).
    """
    if kind_of(route) not in ROUTE_KINDS:
        return [], []
    ports = tuple(http_ports)
    name = _named("attach", ports)
    if getattr(state, "recorded_index", None) is not None:
        # A Recording view (a judgement of ``validators.views.dependents``, the render's per-route staging):
        # no overlay lies under it, so the twin steps below would end in this same call; the memo of the
        # state it records serves it, its reads logged (``indexes.of_object``).
        got, statuses = indexes.of_object(state, name, LISTENER_KINDS, route, lambda: _attach(route, state, ports))
        return list(got), list(statuses)

    def compute() -> tuple[tuple[Attachment, ...], tuple[ParentStatus, ...]]:
        # A copy of a route of the base (a review's or a check's defaulted object) whose parentRefs,
        # hostnames and identity read as the stored one's attaches as it does there.
        twin = indexes.stored_twin(state, LISTENER_KINDS, route, "attach-key", _attach_key)
        if twin is not None:
            base, stored = twin
            return indexes.of_object(base, name, LISTENER_KINDS, stored, lambda: _attach(stored, base, ports))
        below = _same_listeners_below(state, ports)
        if below is not None:
            return indexes.of_object(below, name, LISTENER_KINDS, route, lambda: _attach(route, below, ports))
        return _attach(route, state, ports)

    got, statuses = indexes.of_object(state, name, LISTENER_KINDS, route, compute)
    return list(got), list(statuses)


def _same_listeners_below(state: State, ports: tuple[int, ...]) -> State | None:
    """The state under a change of one Gateway (``state``: overlays of that one Gateway on it) when every
    route attaches there as in ``state``; None otherwise (once per state version).

    ``_attach`` reads of the listener owners only the listeners by source, a parent's existence and
    whether it is foreign, and a ListenerSet parent's ``spec.allowedListeners``: a Gateway change that
    leaves those as they were (its defaults written out, its labels or status changed) attaches every
    route as before, which the state below has memoized (``routegate check`` asks it for every route
    naming each input Gateway)."""
    if not isinstance(state, Overlay) or state.changed.kind != "Gateway":
        return None
    return indexes.index(state, _named("same-listeners-below", ports), lambda s: _listeners_below(s, ports))


same_listeners_below = _same_listeners_below


def _listeners_below(state: State, ports: tuple[int, ...]) -> State | None:
    assert isinstance(state, Overlay)
    ref = state.changed
    below: State = state
    while isinstance(below, Overlay) and below.changed == ref:
        below = below.base
    new, old = state.get(ref.kind, ref.namespace, ref.name), below.get(ref.kind, ref.namespace, ref.name)
    if new is None or old is None or is_foreign(new) != is_foreign(old):
        return None
    if _listener_set_admission(new) != _listener_set_admission(old):
        return None
    if listeners_by_source(state, http_ports=ports) != listeners_by_source(below, http_ports=ports):
        return None
    return below


def _listener_set_admission(gateway: Obj) -> tuple[str, Selector | None]:
    """What ``listener_set_status`` reads of a parent Gateway."""
    allowed = dig(gateway, "spec", "allowedListeners", "namespaces")
    from_ = _str(dig(allowed, "from")) or "None"
    return from_, selector_of(dig(allowed, "selector")) if from_ == "Selector" else None


def _attach_key(route: Obj) -> tuple[Any, ...]:
    """All that ``_attach`` reads of ``route``, as it reads it (defaults applied): one flat tuple (the
    hostnames after their count, then six values per parentRef), so ``indexes.exact_key`` judges it in one
    pass."""
    kind_name, rns, route_name = identity(route)  # kind_of, namespace_of and ref_of read the same
    hosts = route_hostnames(route)
    key: list[Any] = [kind_name, rns, route_name, len(hosts), *hosts]
    for parent_ref in as_list(dig(route, "spec", "parentRefs")):
        if type(parent_ref) is dict:
            get = parent_ref.get
            group, kind, namespace, name, section, port = (get("group"), get("kind"), get("namespace"),
                                                           get("name"), get("sectionName"), get("port"))
        else:
            group, kind, namespace, name, section, port = (dig(parent_ref, f) for f in _PARENT_FIELDS)
        key += (GATEWAY_GROUP if group is None else group, (kind if isinstance(kind, str) else "") or "Gateway",
                (namespace if isinstance(namespace, str) else "") or rns, name if isinstance(name, str) else "",
                section if isinstance(section, str) else "",
                port if isinstance(port, int) and not isinstance(port, bool) else None)
    return tuple(key)


_PARENT_FIELDS = ("group", "kind", "namespace", "name", "sectionName", "port")


def _attach(route: Obj, state: State, http_ports: Sequence[int]
            ) -> tuple[tuple[Attachment, ...], tuple[ParentStatus, ...]]:
    lsts = listeners_by_source(state, http_ports=http_ports)
    attachments: list[Attachment] = []
    statuses: list[ParentStatus] = []
    kind, rns, route_ref, hosts = kind_of(route), namespace_of(route), ref_of(route), route_hostnames(route)
    for i, parent_ref in enumerate(as_list(dig(route, "spec", "parentRefs"))):
        got, st = _attach_one(route, i, parent_ref, state, lsts, kind, rns, route_ref, hosts)
        attachments.extend(got)
        statuses.append(st)
    return tuple(attachments), tuple(statuses)


def age_key(obj: Obj) -> tuple[str, str, str]:
    """Oldest first: creationTimestamp, then namespace/name."""
    return (created_at(obj), namespace_of(obj), name_of(obj))
