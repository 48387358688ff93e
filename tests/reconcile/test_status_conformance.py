"""The condition classes issue 25 found routegate disagreeing with the Gateway API conformance suite on,
with the conditions and reasons the suite asserts (conformance/tests/*.go upstream; our own objects):

- ListenerSetProtocolConflict / ListenerSetHostnameConflict: a listener that loses its port to the parent
  Gateway's (or an older ListenerSet's) is Accepted=False and Programmed=False with the conflict's reason
  and Conflicted=True; a ListenerSet with no valid listener is Accepted=False and Programmed=False
  ListenersNotValid; one with a valid listener is Accepted=True, Programmed=True Programmed; the parent
  counts the accepted ones (attachedListenerSets) and says AttachedListenerSets=True ListenerSetsAttached;
- GatewayClassSupportedVersionCondition: SupportedVersion from the CRDs' bundle-version annotation
  (tests/reconcile/test_status_writes.py drives it through the fake apiserver; the reasons are here too);
- a Terminate and a Passthrough listener for one hostname on one port are not Accepted (ProtocolConflict).
"""

from __future__ import annotations

from typing import Any

import yaml

from validators.crossobject import statuses
from validators.objects import Ref
from validators.states import MemoryState
from validators.views.scopes import Scope
from webhook.reconcile import statusshapes

GW = "gateway.networking.k8s.io"

STATE = f"""
apiVersion: {GW}/v1
kind: GatewayClass
metadata: {{name: haproxy}}
spec: {{controllerName: example.net/routegate}}
---
apiVersion: {GW}/v1
kind: Gateway
metadata: {{name: gw, namespace: infra, creationTimestamp: "2026-01-01T00:00:00Z", generation: 3}}
spec:
  gatewayClassName: haproxy
  allowedListeners: {{namespaces: {{from: Same}}}}
  listeners:
    - {{name: gateway-listener, protocol: HTTP, port: 80, hostname: gw.example.com}}
    - {{name: gateway-tcp, protocol: TCP, port: 9000}}
    - {{name: tls-terminate, protocol: TLS, port: 8443, hostname: t.example.com,
       tls: {{mode: Terminate, certificateRefs: [{{name: cert}}]}}}}
    - {{name: tls-passthrough, protocol: TLS, port: 8443, hostname: t.example.com, tls: {{mode: Passthrough}}}}
---
apiVersion: {GW}/v1
kind: ListenerSet
metadata: {{name: ls-1, namespace: infra, creationTimestamp: "2026-01-02T00:00:00Z", generation: 1}}
spec:
  parentRef: {{name: gw}}
  listeners:
    - {{name: listener-set-1-listener, protocol: HTTP, port: 8080}}
    - {{name: protocol-conflict-with-gateway-listener, protocol: HTTP, port: 9000}}
---
apiVersion: {GW}/v1
kind: ListenerSet
metadata: {{name: ls-2, namespace: infra, creationTimestamp: "2026-01-03T00:00:00Z", generation: 1}}
spec:
  parentRef: {{name: gw}}
  listeners:
    - {{name: hostname-conflict-with-gateway-listener, protocol: HTTP, port: 80, hostname: gw.example.com}}
---
apiVersion: v1
kind: Secret
metadata: {{name: cert, namespace: infra}}
type: kubernetes.io/tls
data: {{tls.crt: Y2VydA==, tls.key: a2V5}}
"""


def _targets() -> dict[str, Any]:
    state = MemoryState(list(yaml.safe_load_all(STATE)))
    computed = statuses.all_statuses(state)
    found = statusshapes.targets(state, computed, statusshapes.Facts(bundle_version="v1.6.1"), Scope.of(["haproxy"]))
    return {str(t.ref): t.status for t in found}


def _conditions(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


def _listeners(status: dict[str, Any]) -> dict[str, dict[str, tuple[str, str]]]:
    return {x["name"]: _conditions(x["conditions"]) for x in status["listeners"]}


def test_a_listener_set_listener_that_loses_its_port_is_not_accepted_for_the_conflicts_reason() -> None:
    found = _targets()
    ls1 = found[str(Ref("ListenerSet", "infra", "ls-1"))]
    assert _conditions(ls1["conditions"])["Accepted"][0] == "True"
    assert _conditions(ls1["conditions"])["Programmed"] == ("True", "Programmed")
    listeners = _listeners(ls1)
    valid = listeners["listener-set-1-listener"]
    assert {k: valid[k] for k in ("Accepted", "Programmed", "ResolvedRefs")} == {
        "Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
        "ResolvedRefs": ("True", "ResolvedRefs")}
    conflicted = listeners["protocol-conflict-with-gateway-listener"]
    assert {k: conflicted[k] for k in ("Accepted", "Programmed", "Conflicted")} == {
        "Accepted": ("False", "ProtocolConflict"), "Programmed": ("False", "ProtocolConflict"),
        "Conflicted": ("True", "ProtocolConflict")}


def test_a_listener_set_without_a_valid_listener_is_not_accepted_nor_programmed() -> None:
    ls2 = _targets()[str(Ref("ListenerSet", "infra", "ls-2"))]
    assert _conditions(ls2["conditions"]) == {"Accepted": ("False", "ListenersNotValid"),
                                              "Programmed": ("False", "ListenersNotValid")}
    conflicted = _listeners(ls2)["hostname-conflict-with-gateway-listener"]
    assert {k: conflicted[k] for k in ("Accepted", "Programmed", "Conflicted")} == {
        "Accepted": ("False", "HostnameConflict"), "Programmed": ("False", "HostnameConflict"),
        "Conflicted": ("True", "HostnameConflict")}
    assert {c["observedGeneration"] for c in ls2["conditions"]} == {1}


def test_the_parent_counts_and_reports_its_attached_listener_sets() -> None:
    gateway = _targets()[str(Ref("Gateway", "infra", "gw"))]
    assert gateway["attachedListenerSets"] == 1  # ls-1 only: ls-2 has no valid listener
    conditions = _conditions(gateway["conditions"])
    assert conditions["AttachedListenerSets"] == ("True", "ListenerSetsAttached")
    assert conditions["Accepted"][0] == "True"
    assert _listeners(gateway)["gateway-listener"]["Accepted"] == ("True", "Accepted")  # the parent's wins
    assert {c["observedGeneration"] for c in gateway["conditions"]} == {3}


def test_terminate_and_passthrough_for_one_hostname_on_one_port_are_not_accepted() -> None:
    """(Distinct hostnames share a port by SNI: sni-split; the same hostname cannot be both.)"""
    listeners = _listeners(_targets()[str(Ref("Gateway", "infra", "gw"))])
    for name in ("tls-terminate", "tls-passthrough"):
        assert listeners[name]["Accepted"] == ("False", "ProtocolConflict"), (name, listeners[name])
        assert listeners[name]["Conflicted"] == ("True", "ProtocolConflict")


def test_supported_version_reasons() -> None:
    assert statusshapes.supported_version("v1.6.1")["reason"] == "SupportedVersion"
    for bad in (None, "", "v0.0.0", "v2.0.0", "nonsense"):
        condition = statusshapes.supported_version(bad)
        assert (condition["status"], condition["reason"]) == ("False", "UnsupportedVersion"), bad


def test_invalid_frontend_client_certificate_validation_affects_only_its_listener() -> None:
    """GatewayInvalidFrontendClientCertificateValidation: per listener, ResolvedRefs False with
    InvalidCACertificateRef / InvalidCACertificateKind / RefNotPermitted, Accepted False
    NoValidCACertificate, Programmed False; the listener with a valid CA stays Accepted and Programmed."""
    from tests.render_l4.conftest import ca_config_map

    def https(name: str, port: int) -> dict[str, Any]:
        return {"name": name, "protocol": "HTTPS", "port": port, "hostname": f"{name}.example.com",
                "tls": {"mode": "Terminate", "certificateRefs": [{"name": "cert"}]}}

    def per_port(port: int, ref: dict[str, Any]) -> dict[str, Any]:
        return {"port": port, "tls": {"validation": {"caCertificateRefs": [ref]}}}

    gateway = {
        "apiVersion": f"{GW}/v1", "kind": "Gateway",
        "metadata": {"name": "mtls", "namespace": "infra", "generation": 1},
        "spec": {"gatewayClassName": "haproxy",
                 "listeners": [https("https", 443), https("https-unresolved", 8443),
                               https("https-invalid-kind", 8444), https("https-grant-missing", 8445)],
                 "tls": {"frontend": {
                     "default": {"validation": {"caCertificateRefs": [{"kind": "ConfigMap", "name": "client-ca"}]}},
                     "perPort": [per_port(8443, {"kind": "ConfigMap", "name": "does-not-exist"}),
                                 per_port(8444, {"group": "example.com", "kind": "Unknown", "name": "x"}),
                                 per_port(8445, {"kind": "ConfigMap", "name": "client-ca", "namespace": "other"})]}}}}
    objects = [o for o in yaml.safe_load_all(STATE) if o["kind"] in ("GatewayClass", "Secret")]
    state = MemoryState([*objects, gateway, ca_config_map("client-ca", "infra"), ca_config_map("client-ca", "other")])
    [target] = [t for t in statusshapes.targets(state, statuses.all_statuses(state), statusshapes.Facts(),
                                                Scope.of(["haproxy"])) if t.ref.kind == "Gateway"]
    listeners = _listeners(target.status)
    valid = listeners["https"]
    assert (valid["ResolvedRefs"][0], valid["Accepted"][0], valid["Programmed"][0]) == ("True", "True", "True")
    for name, reason in (("https-unresolved", "InvalidCACertificateRef"),
                         ("https-invalid-kind", "InvalidCACertificateKind"),
                         ("https-grant-missing", "RefNotPermitted")):
        got = listeners[name]
        assert got["ResolvedRefs"] == ("False", reason), (name, got)
        assert got["Accepted"] == ("False", "NoValidCACertificate"), (name, got)
        assert got["Programmed"][0] == "False", (name, got)


def test_conflicting_backend_tls_policies_the_older_wins() -> None:
    """BackendTLSPolicyConflictResolution: of two policies on the same Service (and the same sectionName,
    or none), the older is Accepted and the other Accepted=False Conflicted; a sectionName policy and a
    whole-Service one on the same Service do not conflict."""
    from tests.render_l4.conftest import ca_config_map

    def policy(name: str, created: str, service: str, section: str = "") -> dict[str, Any]:
        target = {"group": "", "kind": "Service", "name": service, **({"sectionName": section} if section else {})}
        return {"apiVersion": f"{GW}/v1", "kind": "BackendTLSPolicy",
                "metadata": {"name": name, "namespace": "infra", "creationTimestamp": created},
                "spec": {"targetRefs": [target],
                         "validation": {"hostname": "abc.example.com",
                                        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}]}}}

    def service(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "infra"},
                "spec": {"ports": [{"name": "https", "port": 443}]}}

    policies = [policy("without-section-1", "2026-01-01T00:00:00Z", "a"),
                policy("without-section-2", "2026-01-02T00:00:00Z", "a"),
                policy("with-section-1", "2026-01-01T00:00:00Z", "b", "https"),
                policy("with-section-2", "2026-01-02T00:00:00Z", "b", "https"),
                policy("not-conflicted-with-section", "2026-01-02T00:00:00Z", "c", "https"),
                policy("not-conflicted-without-section", "2026-01-01T00:00:00Z", "c")]
    state = MemoryState([*policies, service("a"), service("b"), service("c"), ca_config_map("ca", "infra")])
    accepted = {p["metadata"]["name"]: _conditions(statuses.backend_tls_policy_status(p, state)["conditions"])
                ["Accepted"] for p in policies}
    assert accepted == {"without-section-1": ("True", "Accepted"), "without-section-2": ("False", "Conflicted"),
                        "with-section-1": ("True", "Accepted"), "with-section-2": ("False", "Conflicted"),
                        "not-conflicted-with-section": ("True", "Accepted"),
                        "not-conflicted-without-section": ("True", "Accepted")}


def _listener_status(listener: dict[str, Any], **spec: Any) -> tuple[list[str], dict[str, tuple[str, str]], int]:
    gateway = {"apiVersion": f"{GW}/v1", "kind": "Gateway", "metadata": {"name": "g", "namespace": "infra"},
               "spec": {"gatewayClassName": "haproxy", "listeners": [listener], **spec}}
    found = statuses.all_statuses(MemoryState([gateway]))["Gateway infra/g"]
    [status] = found["listeners"]
    return [k["kind"] for k in status["supportedKinds"]], _conditions(status["conditions"]), status["attachedRoutes"]


def test_supported_kinds_as_the_suite_asserts() -> None:
    """GatewayInvalidTLSConfiguration: a listener whose certificateRef is missing, of another group or kind,
    keeps HTTPRoute in supportedKinds (the suite's list is a subset the implementation must include), with
    ResolvedRefs=False InvalidCertificateRef and no attached route; GatewayInvalidRouteKind /
    GatewayUnsupportedRouteKind: a listener asking only for kinds it cannot serve has none, one asking for
    some it can keeps those, ResolvedRefs=False InvalidRouteKinds either way."""
    for ref in ({"name": "missing"}, {"group": "wrong.group", "kind": "Secret", "name": "cert"},
                {"group": "", "kind": "WrongKind", "name": "cert"}):
        kinds, conditions, attached = _listener_status(
            {"name": "https", "protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [ref]}})
        assert "HTTPRoute" in kinds and attached == 0
        assert conditions["ResolvedRefs"] == ("False", "InvalidCertificateRef"), ref
    for asked, expected in (([{"kind": "FooRoute"}], []), ([{"kind": "TCPRoute"}], []),
                            ([{"kind": "HTTPRoute"}, {"kind": "FooRoute"}], ["HTTPRoute"])):
        kinds, conditions, _ = _listener_status({"name": "http", "protocol": "HTTP", "port": 80,
                                                 "allowedRoutes": {"kinds": asked}})
        assert kinds == expected and conditions["ResolvedRefs"] == ("False", "InvalidRouteKinds"), asked


def test_gateway_invalid_parameters_ref_and_unsupported_addresses() -> None:
    """GatewayInvalidParametersRef: Accepted=False InvalidParameters; GatewayStaticAddresses: an address type
    the implementation does not support is Accepted=False UnsupportedAddress, and without it the Gateway
    is accepted (validators.objectrules.gatewayrefusals)."""
    listener = {"name": "http", "protocol": "HTTP", "port": 8080}
    for spec, reason in (({"infrastructure": {"parametersRef": {"group": "", "kind": "ConfigMap", "name": "x"}}},
                          "InvalidParameters"),
                         ({"addresses": [{"type": "test/fake-invalid-type", "value": "fake"},
                                         {"type": "IPAddress", "value": "192.0.2.1"}]}, "UnsupportedAddress"),
                         ({"addresses": [{"type": "NamedAddress", "value": "pool"}]}, "UnsupportedAddress"),
                         ({"addresses": [{"type": "IPAddress", "value": "192.0.2.1"}]}, "Accepted")):
        gateway = {"apiVersion": f"{GW}/v1", "kind": "Gateway", "metadata": {"name": "g", "namespace": "infra"},
                   "spec": {"gatewayClassName": "haproxy", "listeners": [listener], **spec}}
        found = statuses.all_statuses(MemoryState([gateway]))["Gateway infra/g"]
        accepted = _conditions(found["conditions"])["Accepted"]
        assert accepted == (("True" if reason == "Accepted" else "False"), reason), spec
