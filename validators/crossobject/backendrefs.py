"""Backend references of routes, defaulted and resolved, and the ReferenceGrant check.

Pure and shared by rendering and the cross-object findings: the reasons here are the ones seed 004
puts in ResolvedRefs (InvalidKind, RefNotPermitted, BackendNotFound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from validators.objects import GATEWAY_GROUP, Obj, as_list, dig, group_of, kind_of, namespace_of
from validators.states import State
from validators.views import indexes

RESOLVED = "ResolvedRefs"
BACKEND_NOT_FOUND = "BackendNotFound"
REF_NOT_PERMITTED = "RefNotPermitted"
INVALID_KIND = "InvalidKind"

BACKEND_ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")
TLS_DEFAULT_PORT = 443  # seed 004: a TLSRoute ref's port defaults to 443


@dataclass(frozen=True, slots=True)
class BackendRef:
    path: tuple[str | int, ...]  # ("spec","rules",i,"backendRefs",j)
    rule_index: int
    ref_index: int
    kind: str  # defaulted "Service"
    namespace: str  # defaulted to the route's namespace
    name: str
    port: int | None
    weight: int  # defaulted 1
    service: Obj | None  # the Service object when resolved
    resolved: bool
    reason: str  # "ResolvedRefs" | "BackendNotFound" | "RefNotPermitted" | "InvalidKind"
    group: str = ""

    @property
    def message(self) -> str:
        target = f"{self.kind} {self.namespace}/{self.name}"
        if self.reason == INVALID_KIND:
            return f"backendRef {self.group or 'core'}/{self.kind} is not a core Service"
        if self.reason == REF_NOT_PERMITTED:
            return (f"backendRef to {target} crosses namespaces and no ReferenceGrant in "
                    f"{self.namespace!r} permits it")
        if self.reason == BACKEND_NOT_FOUND:
            return f"backendRef {target} does not exist"
        return f"backendRef {target} resolved"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_GRANT_KINDS = frozenset({"ReferenceGrant"})
Grant = tuple[frozenset[tuple[str, str, str]], tuple[tuple[str, str, str], ...]]


def _grants_by_namespace(state: State) -> dict[str, list[Grant]]:
    """Every ReferenceGrant as ({(group, kind, namespace)} of ``from``, ((group, kind, name), ...) of ``to``)."""
    out: dict[str, list[Grant]] = {}
    for grant in state.list("ReferenceGrant"):
        froms = frozenset((_str(dig(f, "group")), _str(dig(f, "kind")), _str(dig(f, "namespace")))
                          for f in as_list(dig(grant, "spec", "from")))
        tos = tuple((_str(dig(t, "group")), _str(dig(t, "kind")), _str(dig(t, "name")))
                    for t in as_list(dig(grant, "spec", "to")))
        out.setdefault(namespace_of(grant), []).append((froms, tos))
    return out


def grant_allows(state: State, *, from_kind: str, from_namespace: str, to_kind: str, to_namespace: str,
                 to_name: str, from_group: str = GATEWAY_GROUP, to_group: str = "") -> bool:
    """Whether a reference from (group, kind, namespace) to an object is permitted.

    Same-namespace references need no grant. Otherwise a ReferenceGrant in the target namespace must
    list the source in ``from`` and the target in ``to`` (a ``to`` without name covers every name).
    """
    if from_namespace == to_namespace:
        return True
    source = (from_group, from_kind, from_namespace)
    for froms, tos in indexes.index_reading(state, "grants", _GRANT_KINDS, _grants_by_namespace).get(to_namespace, ()):
        if source in froms and any(group == to_group and kind == to_kind and (not name or name == to_name)
                                   for group, kind, name in tos):
            return True
    return False


def route_group(route: Obj) -> str:
    return group_of(route) or GATEWAY_GROUP


def _field(raw: Any, key: str) -> Any:
    """``dig(raw, key)``: plain dicts (all JSON gives) read directly."""
    return raw.get(key) if type(raw) is dict else dig(raw, key)


def _resolve(route: Obj, state: State, i: int, j: int, raw: Any,
             path: tuple[str | int, ...] | None = None) -> BackendRef:
    return _resolved(kind_of(route), namespace_of(route), route_group(route), state, i, j, raw, path)


def _ref_fields(raw: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """(group, kind, namespace, name, port, weight) of a backendRef as ``_field`` reads them: a plain dict
    (all JSON gives) by six ``get``s, anything else field by field."""
    if type(raw) is dict:
        get = raw.get
        return get("group"), get("kind"), get("namespace"), get("name"), get("port"), get("weight")
    return dig(raw, "group"), dig(raw, "kind"), dig(raw, "namespace"), dig(raw, "name"), dig(raw, "port"), \
        dig(raw, "weight")


def _resolved(kind_name: str, rns: str, from_group: str, state: State, i: int, j: int, raw: Any,
              path: tuple[str | int, ...] | None) -> BackendRef:
    # ``_str``/``_int`` written out: this runs for every backendRef of every route, in the checks and
    # in the render (whose Recording view no memo serves).
    group, kind, namespace, name, port, weight = _ref_fields(raw)
    group = group if isinstance(group, str) else ""
    kind = (kind if isinstance(kind, str) else "") or "Service"
    namespace = (namespace if isinstance(namespace, str) else "") or rns
    name = name if isinstance(name, str) else ""
    port = port if isinstance(port, int) and not isinstance(port, bool) else None
    if port is None and kind_name == "TLSRoute":
        port = TLS_DEFAULT_PORT
    weight = 1 if not isinstance(weight, int) or isinstance(weight, bool) else max(weight, 0)
    path = ("spec", "rules", i, "backendRefs", j) if path is None else path
    if group != "" or kind != "Service":
        reason, service = INVALID_KIND, None
    elif namespace != rns and not grant_allows(state, from_kind=kind_name, from_namespace=rns, to_kind="Service",
                                               to_namespace=namespace, to_name=name, from_group=from_group):
        reason, service = REF_NOT_PERMITTED, None
    else:
        service = state.get("Service", namespace, name)
        reason = BACKEND_NOT_FOUND if service is None else RESOLVED
    return _new_backend_ref(path, i, j, kind, namespace, name, port, weight, service, reason == RESOLVED, reason,
                            group)


_SETTERS = tuple(BackendRef.__dict__[f].__set__ for f in (
    "path", "rule_index", "ref_index", "kind", "namespace", "name", "port", "weight", "service", "resolved",
    "reason", "group"))
_new_object = object.__new__


def _new_backend_ref(path: tuple[str | int, ...], rule_index: int, ref_index: int, kind: str, namespace: str,
                     name: str, port: int | None, weight: int, service: Obj | None, resolved: bool, reason: str,
                     group: str) -> BackendRef:
    """``BackendRef(...)`` with every field, built without the frozen dataclass's __init__ (which sets each
    field through object.__setattr__, most of its cost; ``validators.objects.new_ref`` does the same)."""
    (s_path, s_rule, s_ref, s_kind, s_namespace, s_name, s_port, s_weight, s_service, s_resolved, s_reason,
     s_group) = _SETTERS
    ref: BackendRef = _new_object(BackendRef)
    s_path(ref, path)
    s_rule(ref, rule_index)
    s_ref(ref, ref_index)
    s_kind(ref, kind)
    s_namespace(ref, namespace)
    s_name(ref, name)
    s_port(ref, port)
    s_weight(ref, weight)
    s_service(ref, service)
    s_resolved(ref, resolved)
    s_reason(ref, reason)
    s_group(ref, group)
    return ref


def service_port(service: Obj, port: int) -> Any:
    """The spec.ports entry of a Service whose ``port`` is ``port`` (None when there is none)."""
    for p in as_list(dig(service, "spec", "ports")):
        if _int(dig(p, "port")) == port:
            return p
    return None


def filter_backend_ref(route: Obj, state: State, rule_index: int, raw: Any,
                       path: tuple[str | int, ...]) -> BackendRef:
    """A filter's backendRef (RequestMirror) at ``path``, defaulted and resolved like a rule's."""
    return _resolve(route, state, rule_index, 0, raw, path)


def rule_backend_refs(route: Obj, state: State, rule_index: int) -> list[BackendRef]:
    refs = as_list(dig(route, "spec", "rules", rule_index, "backendRefs"))
    if not refs:
        return []
    kind, rns, group = kind_of(route), namespace_of(route), route_group(route)  # read once, not per ref
    return [_resolved(kind, rns, group, state, rule_index, j, raw, None) for j, raw in enumerate(refs)]


# What resolving a route's backendRefs reads besides the route.
_REF_READS = frozenset({"Service", "ReferenceGrant"})
REF_READS = _REF_READS


def backend_refs(route: Obj, state: State) -> list[BackendRef]:
    """Every spec.rules[i].backendRefs[j] of a route, defaulted and resolved, in order (once per state
    version for a route of the state: the checks, the status and the render all ask)."""
    if kind_of(route) not in BACKEND_ROUTE_KINDS:
        return []

    def compute() -> tuple[BackendRef, ...]:
        # A copy of a route of the base (a review's or a check's defaulted object) whose backendRefs read
        # as the stored one's resolve as they do there.
        twin = indexes.stored_twin(state, _REF_READS, route, "backend-refs-key", _backend_refs_key)
        if twin is None:
            return _backend_refs(route, state)
        base, stored = twin
        return indexes.of_object(base, "backend-refs", _REF_READS, stored, lambda: _backend_refs(stored, base))

    return list(indexes.of_object(state, "backend-refs", _REF_READS, route, compute))


def _backend_refs_key(route: Obj) -> tuple[Any, ...]:
    """All that ``_backend_refs`` reads of ``route``, as ``_resolved`` reads it (defaults applied): one flat
    tuple (eight values per backendRef, its indexes first), so ``indexes.exact_key`` judges it in one pass."""
    kind, rns = kind_of(route), namespace_of(route)
    tls = kind == "TLSRoute"
    key: list[Any] = [kind, rns, route_group(route)]
    for i, rule in enumerate(as_list(dig(route, "spec", "rules"))):
        for j, raw in enumerate(as_list(_field(rule, "backendRefs"))):
            group, bkind, namespace, name, port, weight = _ref_fields(raw)
            port = port if isinstance(port, int) and not isinstance(port, bool) else None
            key += (i, j, group if isinstance(group, str) else "",
                    (bkind if isinstance(bkind, str) else "") or "Service",
                    (namespace if isinstance(namespace, str) else "") or rns, name if isinstance(name, str) else "",
                    TLS_DEFAULT_PORT if port is None and tls else port,
                    1 if not isinstance(weight, int) or isinstance(weight, bool) else max(weight, 0))
    return tuple(key)


def _backend_refs(route: Obj, state: State) -> tuple[BackendRef, ...]:
    out: list[BackendRef] = []
    kind, rns, group = kind_of(route), namespace_of(route), route_group(route)
    for i, rule in enumerate(as_list(dig(route, "spec", "rules"))):
        out.extend(_resolved(kind, rns, group, state, i, j, raw, None)
                   for j, raw in enumerate(as_list(_field(rule, "backendRefs"))))
    return tuple(out)


def unresolved(refs: Sequence[BackendRef]) -> list[BackendRef]:
    return [r for r in refs if not r.resolved]
