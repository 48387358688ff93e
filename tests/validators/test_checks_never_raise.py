"""Property: Checks.check returns findings, never raises, on arbitrary JSON-like objects.

Keys are drawn mostly from the field names the rules and schemas look at, so the generator reaches
deep into rules, filters, listeners and policies with wrong types and odd values at every level.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from validatorbuilders import shared_dir

from validators.changes import Change, Operation
from validators.checks import Checks
from validators.findings import Finding
from validators.schema.crds import SchemaSet
from validators.states import MemoryState

KEYS = [
    "rules", "matches", "path", "type", "value", "filters", "backendRefs", "name", "port", "headers",
    "queryParams", "method", "requestHeaderModifier", "responseHeaderModifier", "set", "add", "remove",
    "urlRewrite", "requestRedirect", "statusCode", "replacePrefixMatch", "sessionPersistence", "sessionName",
    "cookie", "header", "retry", "codes", "backoff", "timeouts", "request", "externalAuth", "protocol",
    "http",
    "allowedHeaders", "allowedResponseHeaders", "forwardBody", "maxSize", "extensionRef", "kind",
    "listeners", "tls", "mode", "hostnames", "hostname", "validation", "subjectAltNames", "uri",
    "caCertificateRefs", "wellKnownCACertificates", "parentRefs", "namespace", "weight", "service",
]
TYPES = ["RegularExpression", "PathPrefix", "Exact", "ReplacePrefixMatch", "ExternalAuth", "RequestRedirect",
         "URLRewrite", "RequestHeaderModifier", "ExtensionRef", "RequestMirror", "TLS", "TCP", "Passthrough",
         "URI", "Hostname", "GRPC", "System"]
KINDS = ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Gateway", "ListenerSet", "BackendTLSPolicy",
         "ReferenceGrant", "Route", "Other"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12), st.sampled_from(TYPES),
    st.sampled_from([421, 418, 305, 301, 80, 443, "(a", "a|b", "a b", "x\ny"]),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6))
json_like: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)),
    max_leaves=40,
)
objects = st.one_of(
    json_like,
    st.fixed_dictionaries({
        "apiVersion": st.sampled_from(["gateway.networking.k8s.io/v1", "v1", "x", 3]),
        "kind": st.sampled_from(KINDS),
        "metadata": st.one_of(json_like, st.fixed_dictionaries({"name": scalars, "namespace": scalars})),
        "spec": json_like,
    }),
)


def _schema_set() -> SchemaSet | None:
    base = shared_dir()
    path = base / "gateway-api" / "v1.6.1" / "experimental-install.yaml" if base else None
    if path is None or not path.exists():
        return None
    import yaml

    return SchemaSet.from_documents(yaml.safe_load_all(path.read_text()))


CHECKS = [Checks(schemas=None), Checks(schemas=_schema_set(), haproxy_version=(3, 1))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=objects, old=st.one_of(st.none(), objects), which=st.sampled_from([0, 1]),
       op=st.sampled_from([Operation.CREATE, Operation.UPDATE]))
def test_checks_never_raise(obj: Any, old: Any, which: int, op: Operation) -> None:
    found = CHECKS[which].check(Change(op, obj, old), MemoryState())
    assert all(isinstance(f, Finding) for f in found)
    for f in found:
        assert f.message
        assert "internal error" not in f.message, f.message  # the guard is a last resort, not a habit
