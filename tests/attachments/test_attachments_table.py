"""Listener collection and route attachment (validators.views.attachments), as tables."""

from __future__ import annotations

import pytest

from tests.attachments.gwbuilders import gateway, listener, listener_set, namespace, parent, route
from validators.objects import Obj, Ref
from validators.states import MemoryState
from validators.views import attachments


def attach(r: Obj, *objs: Obj) -> tuple[list[tuple[str, int, tuple[str, ...]]], list[str]]:
    """(listener source+name, port, hostnames) of each attachment, and the reason of each parentRef."""
    got, statuses = attachments.attach(r, MemoryState([*objs, r]))
    return ([(f"{a.listener.source.name}/{a.listener.name}", a.listener.port, a.hostnames) for a in got],
            [s.reason for s in statuses])


HTTP80 = listener("http", 80)
GW_ALL = gateway("gw", listener("http", 80, frm="All"), listener("https", 443, "HTTPS", frm="All",
                                                                 hostname="*.example.com"))


@pytest.mark.parametrize(("r", "objs", "want"), [
    pytest.param(route("HTTPRoute", "r", parent("gw")), [gateway("gw", HTTP80)],
                 ([("gw/http", 80, ())], ["Accepted"]), id="same namespace default attaches"),
    pytest.param(route("HTTPRoute", "r", parent("nope")), [gateway("gw", HTTP80)],
                 ([], ["NoMatchingParent"]), id="missing gateway is NoMatchingParent"),
    pytest.param(route("HTTPRoute", "r", parent("gw", namespace="infra"), ns="app"),
                 [gateway("gw", HTTP80, ns="infra")],
                 ([], ["NotAllowedByListeners"]), id="other namespace under Same is not allowed"),
    pytest.param(route("HTTPRoute", "r", parent("gw", namespace="default"), ns="app"), [GW_ALL],
                 ([("gw/http", 80, ()), ("gw/https", 443, ("*.example.com",))], ["Accepted"]),
                 id="All admits other namespaces; listener hostname applies"),
    pytest.param(route("HTTPRoute", "r", parent("gw", sectionName="https"), hosts=["a.example.com"]), [GW_ALL],
                 ([("gw/https", 443, ("a.example.com",))], ["Accepted"]),
                 id="sectionName selects one listener, exact host beats wildcard"),
    pytest.param(route("HTTPRoute", "r", parent("gw", sectionName="nope")), [GW_ALL],
                 ([], ["NoMatchingParent"]), id="unknown sectionName is NoMatchingParent"),
    pytest.param(route("HTTPRoute", "r", parent("gw", port=443), hosts=["x.other.org"]), [GW_ALL],
                 ([], ["NoMatchingListenerHostname"]), id="port pins listener; host outside wildcard"),
    pytest.param(route("HTTPRoute", "r", parent("gw", port=8080)), [GW_ALL],
                 ([], ["NoMatchingParent"]), id="port without listener is NoMatchingParent"),
    pytest.param(route("HTTPRoute", "r", parent("gw", port=443), hosts=["*.a.example.com"]), [GW_ALL],
                 ([("gw/https", 443, ("*.a.example.com",))], ["Accepted"]),
                 id="the more specific wildcard wins"),
    pytest.param(route("HTTPRoute", "r", parent("gw", port=443), hosts=["example.com"]), [GW_ALL],
                 ([], ["NoMatchingListenerHostname"]), id="wildcard needs at least one more label"),
    pytest.param(route("TCPRoute", "r", parent("gw")), [gateway("gw", HTTP80)],
                 ([], ["NotAllowedByListeners"]), id="protocol default kinds refuse TCPRoute on HTTP"),
    pytest.param(route("GRPCRoute", "r", parent("gw")), [gateway("gw", listener("h", 80, kinds=["HTTPRoute"]))],
                 ([], ["NotAllowedByListeners"]), id="explicit kinds refuse GRPCRoute"),
    pytest.param(route("TLSRoute", "r", parent("gw"), hosts=["s.example.com"]),
                 [gateway("gw", listener("tls", 6443, "TLS", mode="Passthrough"))],
                 ([("gw/tls", 6443, ("s.example.com",))], ["Accepted"]), id="TLSRoute on passthrough"),
    pytest.param(route("TLSRoute", "r", parent("gw")),
                 [gateway("gw", listener("tls", 6443, "TLS", mode="Passthrough"))],
                 ([], ["NoMatchingListenerHostname"]), id="TLSRoute without hostnames attaches nowhere"),
    pytest.param(route("TLSRoute", "r", parent("gw"), hosts=["s.example.com"]),
                 [gateway("gw", listener("p", 6443, "TLS", mode="Passthrough"), listener("t", 6443, "TLS"))],
                 ([], ["NotAllowedByListeners"]), id="mixed Passthrough and Terminate is a conflict"),
    pytest.param(route("TLSRoute", "r", parent("gw"), hosts=["s.example.com"]),
                 [gateway("gw", listener("p", 443, "TLS", mode="Passthrough"), listener("h", 443, "HTTPS"))],
                 ([("gw/p", 443, ("s.example.com",))], ["Accepted"]), id="passthrough may share the HTTPS port"),
    pytest.param(route("TCPRoute", "r", parent("gw")),
                 [gateway("gw", listener("a", 5432, "TCP"), listener("b", 80, "TCP"), listener("c", 6000, "TCP"))],
                 ([("gw/a", 5432, ()), ("gw/c", 6000, ())], ["Accepted"]),
                 id="no sectionName attaches to every TCP listener; port 80 dropped"),
    pytest.param(route("HTTPRoute", "r", parent("gw", kind="Service", group="")), [gateway("gw", HTTP80)],
                 ([], ["NoMatchingParent"]), id="parent of another kind"),
])
def test_attach(r: Obj, objs: list[Obj], want: tuple[list[tuple[str, int, tuple[str, ...]]], list[str]]) -> None:
    assert attach(r, *objs) == want


@pytest.mark.parametrize(("frm", "ls_ns", "labels", "selector", "accepted"), [
    pytest.param(None, "default", {}, None, False, id="no allowedListeners admits none"),
    pytest.param("None", "default", {}, None, False, id="None admits none"),
    pytest.param("Same", "default", {}, None, True, id="Same admits same namespace"),
    pytest.param("Same", "team", {}, None, False, id="Same refuses other namespace"),
    pytest.param("All", "team", {}, None, True, id="All admits any namespace"),
    pytest.param("Selector", "team", {"env": "prod"}, {"env": "prod"}, True, id="Selector matches labels"),
    pytest.param("Selector", "team", {"env": "dev"}, {"env": "prod"}, False, id="Selector refuses others"),
    pytest.param("Selector", "team", {}, {"kubernetes.io/metadata.name": "team"}, True,
                 id="Selector sees the implicit name label"),
])
def test_listener_set_delegation(frm: str | None, ls_ns: str, labels: dict[str, str],
                                 selector: dict[str, str] | None, accepted: bool) -> None:
    gw = gateway("gw", HTTP80, allowed_listeners=frm, ls_selector=selector)
    ls = listener_set("extra", "gw", listener("extra", 8080, frm="All"), ns=ls_ns, parent_ns="default")
    r = route("HTTPRoute", "r", parent("extra", kind="ListenerSet", namespace=ls_ns), ns=ls_ns)
    state = MemoryState([gw, ls, r, namespace(ls_ns, **labels)])
    assert attachments.listener_set_status(ls, state).accepted is accepted
    names = [(x.source.name, x.name, x.gateway) for x in attachments.listeners(state)]
    want_ls = [("extra", "extra", Ref("Gateway", "default", "gw"))] if accepted else []
    assert names == [("gw", "http", Ref("Gateway", "default", "gw")), *want_ls]
    got, statuses = attachments.attach(r, state)
    assert [a.listener.port for a in got] == ([8080] if accepted else [])
    assert statuses[0].reason == ("Accepted" if accepted else "NoMatchingParent")


def test_gateway_parent_does_not_reach_listener_set_listeners() -> None:
    gw = gateway("gw", HTTP80, allowed_listeners="Same")
    ls = listener_set("extra", "gw", listener("extra", 8080))
    r = route("HTTPRoute", "r", parent("gw", port=8080))
    assert attach(r, gw, ls) == ([], ["NoMatchingParent"])


def test_declared_listeners_marks_drops_and_conflicts_across_gateways() -> None:
    state = MemoryState([
        gateway("a", listener("p", 9443, "TLS", mode="Passthrough"), listener("t", 443, "TCP")),
        gateway("b", listener("t", 9443, "TLS")),
    ])
    got = {(x.gateway.name, x.name): (x.conflicted, bool(x.dropped))
           for x in attachments.declared_listeners(state)}
    assert got == {("a", "p"): (True, False), ("a", "t"): (False, True), ("b", "t"): (True, False)}
    assert [(x.gateway.name, x.name) for x in attachments.listeners(state, http_ports=(80,))] == [
        ("a", "t"), ("a", "p"), ("b", "t")]


@pytest.mark.parametrize(("a", "b", "want"), [
    ("a.com", "A.com", "a.com"),
    ("*.a.com", "x.a.com", "x.a.com"),
    ("x.y.a.com", "*.a.com", "x.y.a.com"),
    ("*.a.com", "*.b.a.com", "*.b.a.com"),
    ("*.a.com", "a.com", None),
    ("*.a.com", "*.b.com", None),
    ("x.a.com", "y.a.com", None),
])
def test_intersect_hostname(a: str, b: str, want: str | None) -> None:
    assert attachments.intersect_hostname(a, b) == want
    assert attachments.intersect_hostname(b, a) == want


def test_garbage_never_raises() -> None:
    junk: Obj = {"kind": "HTTPRoute", "metadata": {"name": 3}, "spec": {"parentRefs": [None, 5, {"name": []}],
                                                                         "hostnames": "x"}}
    gw: Obj = {"kind": "Gateway", "metadata": {"name": "gw", "namespace": "default"},
               "spec": {"listeners": [None, {"port": "80"}, {"name": "x", "port": 80, "protocol": "HTTP",
                                                             "allowedRoutes": "bad"}]}}
    got, statuses = attachments.attach(junk, MemoryState([gw]))
    assert got == [] and [s.accepted for s in statuses] == [False, False, False]
