"""Cross-object findings (validators.crossobject.crossobjects) and claims (validators.crossobject.claims)."""

from __future__ import annotations

import base64

import pytest

from tests.attachments.gwbuilders import gateway, grant, listener, listener_set, parent, route, service
from tests.render_l4.conftest import key_and_cert
from validators.crossobject import claims, crossobjects
from validators.findings import Severity
from validators.objects import Obj
from validators.states import MemoryState

CA = key_and_cert("routegate test CA", ca=True)[1].decode()  # a real one: a CA is parsed, not pattern-matched


def found(obj: Obj, *objs: Obj) -> list[tuple[str, str, bool]]:
    got = list(crossobjects.findings(obj, MemoryState([*objs, obj])))
    assert all(f.severity is Severity.WARN for f in got)
    return sorted((f.code, f.field, f.subject) for f in got)


GW = gateway("gw", listener("http", 80, frm="All"), listener("tcp", 5432, "TCP"))


def policy(*ca_refs: dict[str, str], system: bool = False, hostname: str = "b.example.com") -> Obj:
    validation: dict[str, object] = {"hostname": hostname}
    if ca_refs:
        validation["caCertificateRefs"] = list(ca_refs)
    if system:
        validation["wellKnownCACertificates"] = "System"
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}], "validation": validation}}


def cm(name: str, data: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": data}


def secret(name: str, ns: str = "default", **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
            "data": {k.replace("_", "."): base64.b64encode(v.encode()).decode() for k, v in data.items()}}


@pytest.mark.parametrize(("obj", "objs", "want"), [
    pytest.param(route("HTTPRoute", "r", parent("gw")), [GW, service("svc")], [],
                 id="attached route with resolved refs is quiet"),
    pytest.param(route("HTTPRoute", "r", parent("gw")), [GW],
                 [("RG0501", "spec.rules[0].backendRefs[0]", True)], id="BackendNotFound"),
    pytest.param(route("HTTPRoute", "r", parent("gw"), rules=[{"backendRefs": [{"name": "svc", "port": 80,
                                                                                 "namespace": "x"}]}]),
                 [GW, service("svc", "x")], [("RG0502", "spec.rules[0].backendRefs[0]", True)],
                 id="RefNotPermitted"),
    pytest.param(route("HTTPRoute", "r", parent("gw"), rules=[{"backendRefs": [{"name": "b", "kind": "S3",
                                                                                 "group": "aws"}]}]),
                 [GW], [("RG0503", "spec.rules[0].backendRefs[0]", True)], id="InvalidKind"),
    pytest.param(route("HTTPRoute", "r", parent("gw"), rules=[{"backendRefs": [{"name": "svc", "port": 81}]}]),
                 [GW, service("svc")], [("RG0516", "spec.rules[0].backendRefs[0].port", True)],
                 id="port not on the Service"),
    pytest.param(route("HTTPRoute", "r", parent("nope"), parent("gw", sectionName="tcp")), [GW, service("svc")],
                 [("RG0504", "spec.parentRefs[0]", True), ("RG0505", "spec.parentRefs[1]", True)],
                 id="NoMatchingParent and NotAllowedByListeners"),
    pytest.param(route("TLSRoute", "r", parent("g2"), hosts=["a.example.com"]),
                 [gateway("g2", listener("t", 6443, "TLS", hostname="b.example.com")), service("svc")],
                 [("RG0506", "spec.parentRefs[0]", True)], id="NoMatchingListenerHostname"),
    pytest.param(route("TLSRoute", "r", parent("g2")),
                 [gateway("g2", listener("t", 6443, "TLS")), service("svc")], [],
                 id="TLSRoute without hostnames is left to RG0117"),
    pytest.param(gateway("g", listener("s", 443, "HTTPS", certs=[{"name": "missing"},
                                                                 {"name": "x", "namespace": "certs"}])),
                 [], [("RG0509", "spec.listeners[0].tls.certificateRefs[0]", True),
                      ("RG0510", "spec.listeners[0].tls.certificateRefs[1]", True)],
                 id="certificate Secret missing and cross-namespace without grant"),
    pytest.param(gateway("g", listener("s", 443, "HTTPS", certs=[{"name": "x", "namespace": "certs"}])),
                 [secret("x", "certs", tls_crt="c"), grant("certs", "Gateway", "default", "Secret", "x")], [],
                 id="cross-namespace certificate with grant"),
    pytest.param(gateway("g", listener("p", 9443, "TLS", mode="Passthrough")),
                 [gateway("h", listener("t", 9443, "TLS"))], [("RG0513", "spec.listeners[0].tls.mode", True)],
                 id="mixed TLS modes across gateways"),
    pytest.param(gateway("g", listener("p", 9443, "TLS", mode="Passthrough"), listener("t", 9443, "TLS")),
                 [], [], id="mixed TLS modes within one gateway is left to RG0119"),
    pytest.param(listener_set("ls", "gw", listener("x", 8080)), [GW],
                 [("RG0514", "spec.parentRef", True)], id="ListenerSet not admitted"),
    pytest.param(policy({"group": "", "kind": "ConfigMap", "name": "ca"}), [cm("ca", {"ca.crt": CA})], [],
                 id="policy with a ConfigMap CA"),
    pytest.param(policy({"group": "", "kind": "Secret", "name": "ca"}), [secret("ca", ca_crt=CA)], [],
                 id="policy with a Secret CA"),
    pytest.param(policy(system=True), [], [], id="policy with the system CA"),
    pytest.param(policy({"group": "", "kind": "ConfigMap", "name": "ca"}), [cm("ca", {"other": CA})],
                 [("RG0515", "spec.validation.caCertificateRefs[0]", True)], id="ConfigMap without ca.crt"),
    pytest.param(policy({"group": "", "kind": "ConfigMap", "name": "gone"}), [],
                 [("RG0515", "spec.validation.caCertificateRefs[0]", True)], id="missing ConfigMap"),
    pytest.param(policy(), [], [("RG0515", "spec.validation", True)], id="no CA at all"),
])
def test_findings(obj: Obj, objs: list[Obj], want: list[tuple[str, str, bool]]) -> None:
    assert found(obj, *objs) == want


def test_deleting_a_service_reports_the_routes_that_lose_it() -> None:
    svc = service("svc")
    r = route("HTTPRoute", "r", parent("gw"))
    got = list(crossobjects.findings(svc, MemoryState([GW, r])))  # the proposed state no longer has svc
    assert [(f.code, f.field, f.subject, f.about) for f in got] == [
        ("RG0501", "spec.rules[0].backendRefs[0]", False, "HTTPRoute default/r")]


def test_tcp_port_lost_to_older_route() -> None:
    old = route("TCPRoute", "a-old", parent("gw"), ts="2026-01-01T00:00:00Z")
    new = route("TCPRoute", "b-new", parent("gw"), ts="2026-02-01T00:00:00Z")
    tie = route("TCPRoute", "a-tie", parent("gw"), ts="2026-02-01T00:00:00Z")
    state = MemoryState([GW, service("svc"), old, new, tie])
    won, lost = claims.tcp_claims(state)
    assert {p: c.route.name for p, c in won.items()} == {5432: "a-old"}
    assert [(c.route.name, c.winner.name, c.what) for c in lost] == [("a-tie", "a-old", "port 5432"),
                                                                     ("b-new", "a-old", "port 5432")]
    assert [(f.code, f.field) for f in crossobjects.findings(new, state)] == [("RG0507", "spec.parentRefs[0]")]
    assert [(f.code, f.subject, f.about) for f in crossobjects.findings(old, state)] == [
        ("RG0507", False, "TCPRoute default/a-tie"), ("RG0507", False, "TCPRoute default/b-new")]


def test_same_match_claimed_by_older_route() -> None:
    rule = {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}, {"path": {"value": "/x"}}],
            "backendRefs": [{"name": "svc", "port": 80}]}
    old = route("HTTPRoute", "old", parent("gw"), hosts=["a.com"], rules=[rule], ts="2026-01-01T00:00:00Z")
    new = route("HTTPRoute", "new", parent("gw"), hosts=["a.com", "b.com"],
                rules=[{"matches": [{"path": {"value": "/api"}}], "backendRefs": [{"name": "svc", "port": 80}]}],
                ts="2026-03-01T00:00:00Z")
    other = route("HTTPRoute", "other", parent("gw"), hosts=["a.com"],
                  rules=[{"matches": [{"path": {"value": "/api"}, "method": "GET"}]}], ts="2026-04-01T00:00:00Z")
    state = MemoryState([GW, service("svc"), old, new, other])
    got = [(f.code, f.field, f.message) for f in crossobjects.findings(new, state)]
    assert got == [("RG0508", "spec.rules[0].matches[0]",
                    "host a.com PathPrefix /api is already claimed by the older HTTPRoute default/old, "
                    "which wins")]
    assert [f.code for f in crossobjects.findings(other, state)] == []


def test_same_match_on_the_same_port_of_another_gateway_does_not_collide() -> None:
    """Each Gateway has its own frontend (haproxy_check/render/isolation.py): no shared claim."""
    rule = {"matches": [{"path": {"value": "/api"}}], "backendRefs": [{"name": "svc", "port": 80}]}
    other_gw = gateway("gw2", listener("http", 80, frm="All"))
    old = route("HTTPRoute", "old", parent("gw"), hosts=["a.com"], rules=[rule], ts="2026-01-01T00:00:00Z")
    new = route("HTTPRoute", "new", parent("gw2"), hosts=["a.com"], rules=[rule], ts="2026-03-01T00:00:00Z")
    state = MemoryState([GW, other_gw, service("svc"), old, new])
    assert [f.code for f in crossobjects.findings(new, state)] == []
