"""The audit: admission's findings on every stored object, each on the object it is about."""

from __future__ import annotations

from validators.objects import Obj
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.reconcile import audits

GATEWAY: Obj = {
    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
    "metadata": {"name": "edge", "namespace": "gw"},
    "spec": {"gatewayClassName": "haproxy", "listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80, "hostname": "*.example.com",
         "allowedRoutes": {"namespaces": {"from": "All"}}}]},
}


SERVICE: Obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "team"},
                "spec": {"ports": [{"name": "http", "port": 80}]}}


def _route(name: str, host: str, **rule: object) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"parentRefs": [{"name": "edge", "namespace": "gw"}], "hostnames": [host],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}], **rule}]}}


def test_findings_land_on_the_object_they_are_about(gate: Gate) -> None:
    state = MemoryState([GATEWAY, SERVICE, _route("ok", "a.example.com"), _route("astray", "a.other.org"),
                         _route("sticky", "b.example.com", sessionPersistence={"sessionName": "a b"})])
    found = {str(ref): sorted({f.code for f in fs}) for ref, fs in audits.audit(gate.rules, state)}
    # the Gateway's own review reports the route it has no listener for: that finding is the route's
    assert "Gateway gw/edge" not in found
    assert "RG0506" in found["HTTPRoute team/astray"]
    assert "RG0101" in found["HTTPRoute team/sticky"]
    assert "HTTPRoute team/ok" not in found
    [(_, sticky)] = [(r, fs) for r, fs in audits.audit(gate.rules, state) if r.name == "sticky"]
    assert [f.field for f in sticky if f.code == "RG0101"] == ["spec.rules[0].sessionPersistence.sessionName"]
    assert all(f.about == "" for f in sticky)


def test_parse_ref_is_str_of_ref() -> None:
    for text in ("HTTPRoute team/a", "GatewayClass haproxy"):
        ref = audits.parse_ref(text)
        assert ref is not None and str(ref) == text
    assert audits.parse_ref("") is None
