"""The written-out hot paths of attachment, backend resolution and match claims give what their
definitions give: each ``reference_*`` below is the plain form (field by field through ``dig``, the
generic helpers), compared on random clusters and on copies of their routes with odd values in the
fields those paths read (``_variant``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.validators.test_memoized_checks import _variant
from tests.webhook import deltastates
from validators.crossobject import backendrefs, claims
from validators.objects import GATEWAY_GROUP, Obj, Ref, as_list, dig, kind_of, namespace_of, ref_of
from validators.states import MemoryState, State
from validators.views import attachments, indexes
from validators.views.attachments import Attachment, Listener, ParentStatus
from validators.views.foreign import is_foreign


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reference_resolved(kind_name: str, rns: str, from_group: str, state: State, i: int, j: int, raw: Any,
                       ) -> backendrefs.BackendRef:
    group = _str(dig(raw, "group"))
    kind = _str(dig(raw, "kind")) or "Service"
    namespace = _str(dig(raw, "namespace")) or rns
    name = _str(dig(raw, "name"))
    port = _int(dig(raw, "port"))
    if port is None and kind_name == "TLSRoute":
        port = backendrefs.TLS_DEFAULT_PORT
    weight = _int(dig(raw, "weight"))
    weight = 1 if weight is None else max(weight, 0)
    path = ("spec", "rules", i, "backendRefs", j)

    def ref(reason: str, service: Obj | None = None) -> backendrefs.BackendRef:
        return backendrefs.BackendRef(path, i, j, kind, namespace, name, port, weight, service,
                                      reason == backendrefs.RESOLVED, reason, group)

    if group != "" or kind != "Service":
        return ref(backendrefs.INVALID_KIND)
    if namespace != rns and not backendrefs.grant_allows(state, from_kind=kind_name, from_namespace=rns,
                                                         to_kind="Service", to_namespace=namespace, to_name=name,
                                                         from_group=from_group):
        return ref(backendrefs.REF_NOT_PERMITTED)
    service = state.get("Service", namespace, name)
    return ref(backendrefs.BACKEND_NOT_FOUND) if service is None else ref(backendrefs.RESOLVED, service)


def reference_backend_refs(route: Obj, state: State) -> list[backendrefs.BackendRef]:
    kind, rns, group = kind_of(route), namespace_of(route), backendrefs.route_group(route)
    return [reference_resolved(kind, rns, group, state, i, j, raw)
            for i, rule in enumerate(as_list(dig(route, "spec", "rules")))
            for j, raw in enumerate(as_list(dig(rule, "backendRefs")))]


def reference_backend_refs_key(route: Obj) -> tuple[Any, ...]:
    kind, rns = kind_of(route), namespace_of(route)
    refs = []
    for i, rule in enumerate(as_list(dig(route, "spec", "rules"))):
        for j, raw in enumerate(as_list(dig(rule, "backendRefs"))):
            port, weight = _int(dig(raw, "port")), _int(dig(raw, "weight"))
            refs.append((i, j, _str(dig(raw, "group")), _str(dig(raw, "kind")) or "Service",
                         _str(dig(raw, "namespace")) or rns, _str(dig(raw, "name")),
                         backendrefs.TLS_DEFAULT_PORT if port is None and kind == "TLSRoute" else port,
                         1 if weight is None else max(weight, 0)))
    return (kind, rns, backendrefs.route_group(route), tuple(refs))


def reference_attach_key(route: Obj) -> tuple[Any, ...]:
    rns, ref = namespace_of(route), ref_of(route)
    parents = []
    for p in as_list(dig(route, "spec", "parentRefs")):
        group = dig(p, "group")
        parents.append((GATEWAY_GROUP if group is None else group, _str(dig(p, "kind")) or "Gateway",
                        _str(dig(p, "namespace")) or rns, _str(dig(p, "name")), _str(dig(p, "sectionName")),
                        _int(dig(p, "port"))))
    return (kind_of(route), rns, ref.kind, ref.namespace, ref.name, tuple(attachments.route_hostnames(route)),
            tuple(parents))


def reference_exact_key(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is tuple:
            pending.extend(item)
        elif type(item) is not str and type(item) is not int and item is not None:
            return False
    return True


def reference_attach_one(index: int, parent_ref: Any, state: State, by_source: Any, kind: str, rns: str,
                         route_ref: Ref, hosts: Sequence[str]) -> tuple[list[Attachment], ParentStatus]:
    group = dig(parent_ref, "group")
    group = GATEWAY_GROUP if group is None else group
    pkind = _str(dig(parent_ref, "kind")) or "Gateway"
    pns = _str(dig(parent_ref, "namespace")) or rns
    pname = _str(dig(parent_ref, "name"))
    section = _str(dig(parent_ref, "sectionName"))
    port = _int(dig(parent_ref, "port"))

    def status(reason: str, message: str) -> tuple[list[Attachment], ParentStatus]:
        return [], ParentStatus(index, False, reason, message)

    if group != GATEWAY_GROUP or pkind not in ("Gateway", "ListenerSet"):
        return status(attachments.NO_MATCHING_PARENT, f"parent kind {group}/{pkind} is not a Gateway or ListenerSet")
    parent = Ref(pkind, pns, pname)
    found = state.get(pkind, pns, pname)
    if found is None:
        return status(attachments.NO_MATCHING_PARENT, f"{parent} does not exist")
    if is_foreign(found):
        return status(attachments.FOREIGN_PARENT, f"{parent} belongs to another GatewayClass's controller")
    if pkind == "ListenerSet":
        ls_status = attachments.listener_set_status(found, state)
        if not ls_status.accepted:
            return status(attachments.NO_MATCHING_PARENT, f"{parent} is not accepted: {ls_status.message}")
    candidates: Sequence[Listener] = by_source.get(parent, ())
    if section:
        candidates = [x for x in candidates if x.name == section]
    if port is not None:
        candidates = [x for x in candidates if x.port == port]
    if not candidates:
        what = " ".join(filter(None, [f"sectionName {section!r}" if section else "",
                                      f"port {port}" if port is not None else ""]))
        return status(attachments.NO_MATCHING_PARENT,
                      f"{parent} has no usable listener" + (f" matching {what}" if what else ""))
    allowed = [x for x in candidates if x.allows_kind(kind) and x.allows_namespace(rns, state)]
    if not allowed:
        names = ", ".join(sorted({x.name for x in candidates}))
        return status(attachments.NOT_ALLOWED_BY_LISTENERS,
                      f"listeners {names} of {parent} do not allow {kind} from namespace {rns!r}")
    usable = [x for x in allowed if not x.conflicted]
    if not usable:
        ports = ", ".join(str(p) for p in sorted({x.port for x in allowed}))
        return status(attachments.NOT_ALLOWED_BY_LISTENERS,
                      f"port {ports} of {parent} has Passthrough and Terminate TLS listeners with "
                      "overlapping hostnames (protocol conflict); no route attaches")
    if kind == "TLSRoute" and not hosts:
        return status(attachments.NO_MATCHING_LISTENER_HOSTNAME,
                      "a TLSRoute needs at least one spec.hostnames entry (routing is by SNI)")
    attached = [Attachment(route_ref, index, lst, got) for lst in usable
                if (got := attachments.intersect_hostnames(hosts, lst.hostname)) is not None]
    if not attached:
        return status(attachments.NO_MATCHING_LISTENER_HOSTNAME,
                      f"no hostname of the route ({', '.join(hosts)}) matches a listener hostname of {parent}")
    return attached, ParentStatus(index, True, attachments.ACCEPTED, "Accepted")


def reference_attach(route: Obj, state: State) -> tuple[tuple[Attachment, ...], tuple[ParentStatus, ...]]:
    lsts = attachments.listeners_by_source(state)
    kind, rns, route_ref, hosts = kind_of(route), namespace_of(route), ref_of(route), attachments.route_hostnames(route)
    got = [reference_attach_one(i, p, state, lsts, kind, rns, route_ref, hosts)
           for i, p in enumerate(as_list(dig(route, "spec", "parentRefs")))]
    return tuple(a for atts, _ in got for a in atts), tuple(st for _, st in got)


def reference_match_claims(state: State, only: Obj) -> list[claims.LostClaim]:
    """``claims.match_claims(only=...)`` without its shortcut for a route no other route may overlap."""
    return claims.lost_claims(claims.may_overlap(only, state), state)


_ODD: list[Any] = [None, "", True, False, 1, 0, 8080, 443, -3, 1.0, [], {}, "a", "web", "https", "Gateway",
                   "ListenerSet", "Service", "gateway.networking.k8s.io"]


@st.composite
def _odd_variant(draw: st.DrawFn, route: Obj) -> Obj:
    """``_variant`` with more of its copies holding an odd value in a field attachment or resolution reads."""
    out = draw(_variant(route))
    spec = out.get("spec", {})
    for p in spec.get("parentRefs", []):
        if draw(st.booleans()):
            p[draw(st.sampled_from(attachments._PARENT_FIELDS))] = draw(st.sampled_from(_ODD))
    for rule in spec.get("rules", []):
        for b in rule.get("backendRefs", []) if isinstance(rule, dict) else []:
            if draw(st.booleans()):
                b[draw(st.sampled_from(["group", "kind", "namespace", "name", "port", "weight"]))] = draw(
                    st.sampled_from(_ODD))
    return out


def _twins(key_of: Any, exact: Any, a: Obj, b: Obj) -> bool:
    """What ``indexes.stored_twin`` decides of ``a`` against the stored ``b``."""
    ka, kb = key_of(a), key_of(b)
    return bool(exact(ka) and exact(kb) and ka == kb)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=deltastates.cluster_and_change(), data=st.data())
def test_written_out_paths_agree_with_their_definitions(drawn: tuple[list[Any], Any], data: st.DataObject) -> None:
    objects, change = drawn
    state = MemoryState(objects, version="v1")
    routes = [o for o in [*objects, change.subject] if kind_of(o) in attachments.ROUTE_KINDS]
    for route in routes[:6]:
        copied = data.draw(_odd_variant(route))
        for r in (route, copied):  # repr as well: ``==`` takes True for 1, which a message prints apart
            want_refs = reference_backend_refs(r, state)
            assert repr(backendrefs._backend_refs(r, state)) == repr(tuple(want_refs))
            for i in range(len(as_list(dig(r, "spec", "rules")))):
                assert repr(backendrefs.rule_backend_refs(r, state, i)) == repr(
                    [b for b in want_refs if b.rule_index == i])
            assert repr(attachments._attach(r, state, attachments.DEFAULT_HTTP_PORTS)) == repr(
                reference_attach(r, state))
        assert _twins(backendrefs._backend_refs_key, indexes.exact_key, copied, route) == _twins(
            reference_backend_refs_key, reference_exact_key, copied, route)
        assert _twins(attachments._attach_key, indexes.exact_key, copied, route) == _twins(
            reference_attach_key, reference_exact_key, copied, route)
    for route in [o for o in objects if kind_of(o) in claims.HOST_ROUTE_KINDS]:
        assert claims.match_claims(state, only=route) == reference_match_claims(state, route)


def test_flat_keys_are_exact_only_with_exact_leaves() -> None:
    class Text(str):
        pass

    keys: list[tuple[Any, ...]] = [("a", 1, None), ("a", True), ("a", Text("b")), ("a", 1.0), ("a", ("b", 2)),
                                   ("a", ("b", 2.0)), ("a", []), ()]
    for key in keys:
        assert indexes.exact_key(key) == reference_exact_key(key)


def _fixed_state() -> MemoryState:
    gw = "gateway.networking.k8s.io/v1"
    return MemoryState([
        {"apiVersion": gw, "kind": "Gateway", "metadata": {"name": "g", "namespace": "a"},
         "spec": {"gatewayClassName": "haproxy", "allowedListeners": {"namespaces": {"from": "All"}},
                  "listeners": [{"name": "web", "port": 80, "protocol": "HTTP",
                                 "allowedRoutes": {"namespaces": {"from": "All"}}},
                                {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.com"}]}},
        {"apiVersion": gw, "kind": "ListenerSet", "metadata": {"name": "ls", "namespace": "a"},
         "spec": {"parentRef": {"name": "g"}, "listeners": [{"name": "web", "port": 8080, "protocol": "HTTP"}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "a"},
         "spec": {"ports": [{"port": 8080}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "b"},
         "spec": {"ports": [{"port": 8080}]}},
        {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
         "metadata": {"name": "rg", "namespace": "b"},
         "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "a"}],
                  "to": [{"group": "", "kind": "Service"}]}},
    ])


def test_every_odd_value_of_every_field_read_is_read_as_defined() -> None:
    """Each field attachment and resolution read, set to each value of ``_ODD`` in turn (draws reach few)."""
    state = _fixed_state()
    for kind in ("HTTPRoute", "TLSRoute"):
        base: dict[str, Any] = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
                                "metadata": {"name": "r", "namespace": "a"},
                "spec": {"hostnames": ["x.example.com"],
                         "parentRefs": [{"name": "g", "sectionName": "web"}, {"name": "ls", "kind": "ListenerSet"}],
                         "rules": [{"backendRefs": [{"name": "web", "port": 8080, "weight": 3},
                                                    {"name": "web", "namespace": "b", "port": 8080}]}]}}
        for value in _ODD:
            for field in attachments._PARENT_FIELDS:
                route: Any = {**base, "spec": {**base["spec"], "parentRefs": [{"name": "g", field: value}]}}
                assert repr(attachments._attach(route, state, attachments.DEFAULT_HTTP_PORTS)) == repr(
                    reference_attach(route, state))
                assert _twins(attachments._attach_key, indexes.exact_key, route, base) == _twins(
                    reference_attach_key, reference_exact_key, route, base)
            for field in ("group", "kind", "namespace", "name", "port", "weight"):
                route = {**base, "spec": {**base["spec"], "rules": [{"backendRefs": [{"name": "web", field: value}]}]}}
                want = reference_backend_refs(route, state)
                assert repr(backendrefs._backend_refs(route, state)) == repr(tuple(want))
                assert repr(backendrefs.rule_backend_refs(route, state, 0)) == repr(want)
                assert _twins(backendrefs._backend_refs_key, indexes.exact_key, route, base) == _twins(
                    reference_backend_refs_key, reference_exact_key, route, base)


def test_hot_constructors_build_what_the_dataclasses_build() -> None:
    """``new_ref``, ``_new_backend_ref`` and ``_new_attachment`` set every field the dataclass has (a field
    added to one must be added to its constructor), and the instance is the dataclass's own: equal, same
    hash and text, ordered alike, still frozen."""
    import dataclasses

    import pytest

    from validators.objects import new_ref

    ref = new_ref("HTTPRoute", "a", "r")
    assert [f.name for f in dataclasses.fields(Ref)] == ["kind", "namespace", "name"]
    assert (ref, hash(ref), repr(ref), str(ref)) == (Ref("HTTPRoute", "a", "r"), hash(Ref("HTTPRoute", "a", "r")),
                                                    repr(Ref("HTTPRoute", "a", "r")), "HTTPRoute a/r")
    assert new_ref("a", "b", "c") < new_ref("a", "b", "d")
    fields = ("path", "rule_index", "ref_index", "kind", "namespace", "name", "port", "weight", "service",
              "resolved", "reason", "group")
    assert tuple(f.name for f in dataclasses.fields(backendrefs.BackendRef)) == fields
    values: tuple[Any, ...] = (("spec", "rules", 0, "backendRefs", 1), 0, 1, "Service", "a", "web", 8080, 3, None,
                               False, backendrefs.BACKEND_NOT_FOUND, "")
    made = backendrefs._new_backend_ref(*values)
    assert repr(made) == repr(backendrefs.BackendRef(*values)) and made == backendrefs.BackendRef(*values)
    assert hash(made) == hash(backendrefs.BackendRef(*values))
    listener = attachments.listeners(_fixed_state())[0]
    assert [f.name for f in dataclasses.fields(Attachment)] == ["route", "parent_index", "listener", "hostnames"]
    attached = attachments._new_attachment(ref, 1, listener, ("x.example.com",))
    assert repr(attached) == repr(Attachment(ref, 1, listener, ("x.example.com",)))
    assert attached == Attachment(ref, 1, listener, ("x.example.com",))
    for frozen, field in ((ref, "name"), (made, "name"), (attached, "hostnames")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, field, "x")
