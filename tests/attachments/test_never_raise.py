"""Property: attachment, references, claims, cross-object findings and the L4/Route-CRD render models
never raise on arbitrary JSON-like objects in the state (they return findings or skip)."""

from __future__ import annotations

from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.render.l4 import crdroutes, tcproutes, tlsroutes
from validators.crossobject import backendrefs, claims, crossobjects
from validators.findings import Finding
from validators.objects import Obj
from validators.states import MemoryState
from validators.views import attachments

KEYS = ["listeners", "name", "port", "protocol", "hostname", "tls", "mode", "certificateRefs", "allowedRoutes",
        "namespaces", "from", "selector", "matchLabels", "kinds", "kind", "group", "parentRefs", "parentRef",
        "sectionName", "namespace", "hostnames", "rules", "backendRefs", "weight", "matches", "path", "value",
        "targetRefs", "validation", "caCertificateRefs", "wellKnownCACertificates", "to", "ports", "backend",
        "address", "requestHeaders", "paths", "allowedListeners", "endpoints", "addresses", "conditions", "ready"]
VALUES = ["Passthrough", "Terminate", "TLS", "TCP", "HTTP", "HTTPS", "All", "Same", "Selector", "None", "Service",
          "ListenerSet", "Gateway", "System", "ConfigMap", "Secret", "gw", "svc", "*.a.com", "a.com", "a b",
          "x\ny", "", 0, 5432, 80, 443, 70000, -1, True]
KINDS = ["Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Service", "EndpointSlice",
         "ReferenceGrant", "BackendTLSPolicy", "Route", "Namespace", "Secret", "ConfigMap"]

scalars = st.one_of(st.none(), st.integers(-5, 70000), st.text(max_size=8), st.sampled_from(VALUES))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=4))
json_like: st.SearchStrategy[Any] = st.recursive(
    scalars, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(keys, c, max_size=5)), max_leaves=30)
objects = st.fixed_dictionaries({
    "apiVersion": st.sampled_from(["gateway.networking.k8s.io/v1", "routegate.io/v1alpha1", "v1", 3]),
    "kind": st.sampled_from(KINDS),
    "metadata": st.fixed_dictionaries({"name": st.sampled_from(["gw", "svc", "r", "x y", 3]),
                                       "namespace": st.sampled_from(["default", "other", "", None])}),
    "spec": json_like,
})


class Files:
    def add_file(self, path: str, content: bytes, kind: Literal["cert", "ca", "other"] = "other") -> str:
        return path


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(objects, min_size=1, max_size=8))
def test_never_raises(objs: list[Obj]) -> None:
    state = MemoryState(objs)
    for obj in objs:
        assert all(isinstance(f, Finding) for f in crossobjects.findings(obj, state))
        attachments.attach(obj, state)
        backendrefs.backend_refs(obj, state)
    claims.tcp_claims(state)
    claims.match_claims(state)
    tlsroutes.build(state, Files())
    tcproutes.build(state, Files())
    crdroutes.build(state)
