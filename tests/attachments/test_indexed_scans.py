"""The cross-object checks read indexes built once per state version; these differential tests hold
them to the scans they replaced, on random states and on the overlays a review and ``routegate check``
build (one change on a state; each input taken out of, then put back into, the combined state)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.attachments.gwbuilders import gateway, listener, listener_set, meta, namespace, parent, route
from validators.changes import Change, Operation
from validators.crossobject import backendrefs, claims, crossobjects
from validators.objects import Obj, Ref, as_list, dig, namespace_of, ref_of
from validators.states import MemoryState, Overlay, State
from validators.views import attachments, indexes

NAMESPACES = ("a", "b")
HOSTS = ("x.example.com", "y.example.com", "*.example.com", "z.other.org")
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute")


# ------------------------------------------------------------------ the scans the indexes replaced


def scan_mentions(route_obj: Obj, subject: Ref) -> bool:
    rns = namespace_of(route_obj)
    for p in as_list(dig(route_obj, "spec", "parentRefs")):
        if (str(dig(p, "kind", default="Gateway")), str(dig(p, "namespace", default=rns)),
                str(dig(p, "name", default=""))) == (subject.kind, subject.namespace, subject.name):
            return True
    for rule in as_list(dig(route_obj, "spec", "rules")):
        for b in as_list(dig(rule, "backendRefs")):
            ns = str(dig(b, "namespace", default=rns))
            if subject.kind == "ReferenceGrant" and ns == subject.namespace and ns != rns:
                return True
            if subject.kind == "Service" and (ns, str(dig(b, "name", default=""))) == (
                    subject.namespace, subject.name):
                return True
    return False


def scan_mentioning(subject: Ref, state: State) -> list[Obj]:
    return [r for kind in backendrefs.BACKEND_ROUTE_KINDS for r in state.list(kind) if scan_mentions(r, subject)]


def scan_may_overlap(a: Obj, b: Obj) -> bool:
    ha, hb = set(attachments.route_hostnames(a)), set(attachments.route_hostnames(b))
    if not ha or not hb or any(h.startswith("*") for h in ha | hb):
        return True
    return bool(ha & hb)


def scan_overlapping(only: Obj, state: State) -> list[Obj]:
    return [r for r in [*state.list("HTTPRoute"), *state.list("GRPCRoute")] if scan_may_overlap(r, only)]


# ------------------------------------------------------------------ random states


@st.composite
def a_route(draw: st.DrawFn, name: str) -> Obj:
    kind = draw(st.sampled_from(ROUTE_KINDS))
    ns = draw(st.sampled_from(NAMESPACES))
    parents = [parent(draw(st.sampled_from(("gw", "other", "ls"))),
                      **({"namespace": draw(st.sampled_from(NAMESPACES))} if draw(st.booleans()) else {}),
                      **({"kind": "ListenerSet"} if draw(st.integers(0, 3)) == 0 else {}))
               for _ in range(draw(st.integers(0, 2)))]
    backends = [{"name": draw(st.sampled_from(("svc", "svc2", "missing"))), "port": 80,
                 **({"namespace": draw(st.sampled_from(NAMESPACES))} if draw(st.booleans()) else {})}
                for _ in range(draw(st.integers(0, 2)))]
    hosts = draw(st.lists(st.sampled_from(HOSTS), max_size=2, unique=True))
    ts = f"2026-01-01T00:00:{draw(st.integers(0, 5)):02d}Z"
    rules = [{"matches": [{"path": {"type": "PathPrefix", "value": draw(st.sampled_from(("/", "/a")))}}],
              "backendRefs": backends}]
    return route(kind, name, *parents, ns=ns, hosts=hosts if draw(st.booleans()) else None, rules=rules, ts=ts)


def service(name: str, ns: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, ns), "spec": {"ports": [{"port": 80}]}}


def grant(ns: str) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant", "metadata": meta("g", ns),
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "a"}],
                     "to": [{"group": "", "kind": "Service"}]}}


@st.composite
def a_state(draw: st.DrawFn) -> list[Obj]:
    routes = [draw(a_route(f"r{i}")) for i in range(draw(st.integers(0, 8)))]
    fixed: list[Obj] = [
        gateway("gw", listener("http", 80, frm="All"), listener("tls", 8443, "TLS", mode="Passthrough", frm="All"),
                ns="a", allowed_listeners="All"),
        gateway("other", listener("http", 80, hostname="*.example.com", frm="All"), listener("tcp", 5432, "TCP",
                                                                                              frm="All"), ns="b"),
        listener_set("ls", "gw", listener("extra", 8080, frm="All"), ns="b", parent_ns="a"),
        service("svc", "a"), service("svc2", "b"), grant("b"), namespace("a"), namespace("b"),
    ]
    return fixed + routes


def a_replacement(obj: Obj, draw: st.DrawFn) -> Obj:
    return draw(a_route(str(obj["metadata"]["name"]))) | {"kind": obj["kind"]} if obj["kind"] in ROUTE_KINDS \
        else obj


def views(objects: list[Obj], draw: st.DrawFn) -> list[State]:
    """The plain state, a review's overlay of one change, and ``routegate check``'s pair of overlays."""
    state = MemoryState(objects, version="v")
    out: list[State] = [state]
    routes = [o for o in objects if o["kind"] in ROUTE_KINDS]
    new = draw(a_route("new"))
    out.append(Overlay(state, Change(Operation.CREATE, new)))
    if routes:
        victim = draw(st.sampled_from(routes))
        out.append(Overlay(state, Change(Operation.DELETE, None, victim)))
        changed = draw(a_route(str(victim["metadata"]["name"])))
        changed["kind"] = victim["kind"]
        changed["metadata"]["namespace"] = victim["metadata"]["namespace"]
        out.append(Overlay(state, Change(Operation.UPDATE, changed, victim)))
        taken_out = Overlay(state, Change(Operation.DELETE, None, victim))
        out.append(Overlay(taken_out, Change(Operation.CREATE, changed)))
    gateways = [o for o in objects if o["kind"] == "Gateway"]
    moved: dict[str, Any] = {**gateways[0], "spec": {**gateways[0]["spec"], "listeners": [listener("http", 81)]}}
    out.append(Overlay(state, Change(Operation.UPDATE, moved, gateways[0])))
    return out


def subjects(state: State) -> list[Ref]:
    found = [Ref("Gateway", "a", "gw"), Ref("Gateway", "b", "other"), Ref("ListenerSet", "b", "ls"),
             Ref("Service", "a", "svc"), Ref("Service", "b", "svc2"), Ref("Service", "a", "missing"),
             Ref("ReferenceGrant", "b", "g"), Ref("ReferenceGrant", "a", "g")]
    return found


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_routes_mentioning_an_object_are_the_ones_the_scan_finds(data: st.DataObject) -> None:
    objects = data.draw(a_state())
    for state in views(objects, data.draw):
        for subject in subjects(state):
            assert crossobjects.mentioning(subject, state) == scan_mentioning(subject, state), (subject, state.version)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_routes_that_may_share_a_host_are_the_ones_the_scan_finds(data: st.DataObject) -> None:
    objects = data.draw(a_state())
    for state in views(objects, data.draw):
        for only in [*state.list("HTTPRoute"), *state.list("GRPCRoute"), data.draw(a_route("probe"))]:
            assert claims.may_overlap(only, state) == scan_overlapping(only, state), (ref_of(only), state.version)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_listener_indexes_shared_with_a_base_equal_a_fresh_build(data: st.DataObject) -> None:
    objects = data.draw(a_state())
    for state in views(objects, data.draw):
        assert attachments.declared_listeners(state) == attachments._declared(state, attachments.DEFAULT_HTTP_PORTS)
        fresh = MemoryState([o for kind in ("Gateway", "ListenerSet", "Namespace", "ReferenceGrant", "Service",
                                            *ROUTE_KINDS) for o in state.list(kind)], version="fresh")
        for route_obj in [o for kind in ROUTE_KINDS for o in state.list(kind)]:
            assert attachments.attach(route_obj, state) == attachments.attach(route_obj, fresh)
            assert list(backendrefs.backend_refs(route_obj, state)) == list(backendrefs.backend_refs(route_obj, fresh))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_cross_object_findings_on_overlays_equal_those_on_a_fresh_state(data: st.DataObject) -> None:
    objects = data.draw(a_state())
    for state in views(objects, data.draw):
        fresh = MemoryState([o for kind in ("Gateway", "ListenerSet", "Namespace", "ReferenceGrant", "Service",
                                            *ROUTE_KINDS) for o in state.list(kind)], version=f"fresh-{state.version}")
        for kind in ("Gateway", "ListenerSet", "Service", "ReferenceGrant", *ROUTE_KINDS):
            for obj in state.list(kind):
                assert list(crossobjects.findings(obj, state)) == list(crossobjects.findings(obj, fresh))


def test_an_overlays_lookup_follows_each_change_without_rebuilding_the_base() -> None:
    builds: list[str] = []

    def keys(obj: Obj) -> list[str]:
        builds.append(str(obj["metadata"]["name"]))
        return [str(h) for h in obj["spec"].get("hostnames", [])]

    one = route("HTTPRoute", "one", hosts=["x"])
    two = route("HTTPRoute", "two", hosts=["x", "y"])
    base = MemoryState([one, two], version="b")
    assert [r.name for r in indexes.refs_by_key(base, "t", ("HTTPRoute",), keys).get("x")] == ["one", "two"]
    builds.clear()
    moved = route("HTTPRoute", "one", hosts=["y"])
    over = Overlay(Overlay(base, Change(Operation.DELETE, None, one)), Change(Operation.CREATE, moved))
    lookup = indexes.refs_by_key(over, "t", ("HTTPRoute",), keys)
    assert [r.name for r in lookup.get("x")] == ["two"]
    assert [r.name for r in lookup.get("y")] == ["one", "two"]
    assert builds == ["one"], "only the changed object's keys are computed; the base index is reused"
    unrelated = Overlay(base, Change(Operation.CREATE, service("s", "a")))
    assert indexes.refs_by_key(unrelated, "t", ("HTTPRoute",), keys) is indexes.refs_by_key(base, "t", ("HTTPRoute",),
                                                                                           keys)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_port_claims_of_one_tcproute_are_those_of_the_whole_scan(data: st.DataObject) -> None:
    objects = data.draw(a_state())
    for state in views(objects, data.draw):
        _, everything = claims.tcp_claims(state)
        for tcp in state.list("TCPRoute"):
            me = ref_of(tcp)
            _, mine = claims.tcp_claims(state, only=tcp)
            assert [c for c in mine if me in (c.route, c.winner)] == \
                [c for c in everything if me in (c.route, c.winner)], (me, state.version)
