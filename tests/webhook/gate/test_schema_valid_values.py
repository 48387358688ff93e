"""Never deny what the API server accepts without an HAProxy reason (property test).

For every kind routegate reviews, each string field of a valid base object gets values generated from
that field's own CRD schema (``pattern`` with hypothesis ``from_regex``, ``enum``, ``format``,
``minLength``/``maxLength``; the Gateway API v1.6.1 CRDs from shared/ and the custom Route CRD). The
object goes through the real gate (validators, render, ``haproxy -c``). It must be allowed, or denied by
the API server's own rules (schema, CEL: then the API server would not have accepted it either), or
denied with a code from the documented list of HAProxy limitations (docs/RULES.md, "Values the API
server accepts and HAProxy cannot take"), on the field that was changed, with a message that quotes
the value (so it describes this value, not a rule the value does not break).

Eight examples per kind keep the suite fast; ``ROUTEGATE_PROPERTY_EXAMPLES=150`` searches deeper (about
four minutes on a loaded two-core machine).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.results import HAProxyBinary
from tests.conftest import REPO, need_shared
from validators.changes import Change, Operation
from validators.objects import Obj
from validators.schema.crds import SchemaSet
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision

pytestmark = pytest.mark.haproxy

NS = "shop"
GW = "gateway.networking.k8s.io/v1"
#: Codes of the API server's own rules: a value they deny would not have been stored either.
API_SERVER_CODES = frozenset({"RG0002", "RG0004", "RG0006", "RG0300", "RG0303"})


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": NS}


STATE: list[Obj] = [
    {"apiVersion": "v1", "kind": "Service", "metadata": _meta("web"),
     "spec": {"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("ca"), "data": {"ca.crt": ""}},
    {"apiVersion": GW, "kind": "Gateway", "metadata": _meta("edge"),
     "spec": {"gatewayClassName": "haproxy", "allowedListeners": {"namespaces": {"from": "Same"}},
              "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"},
                            {"name": "tls", "port": 8443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
                            {"name": "tcp", "port": 9000, "protocol": "TCP"}]}},
]
PARENT = [{"name": "edge", "sectionName": "http"}]
BACKEND = {"name": "web", "port": 80}

BASES: dict[str, Obj] = {
    "HTTPRoute": {"apiVersion": GW, "kind": "HTTPRoute", "metadata": _meta("api"), "spec": {
        "parentRefs": PARENT, "hostnames": ["api.example.com"],
        "rules": [
            {"name": "main",
             "matches": [{"path": {"type": "PathPrefix", "value": "/api"},
                          "headers": [{"type": "Exact", "name": "x-tenant", "value": "a"}],
                          "queryParams": [{"type": "Exact", "name": "q", "value": "1"}], "method": "GET"}],
             "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                             "set": [{"name": "x-set", "value": "v"}], "add": [{"name": "x-add", "value": "v"}],
                             "remove": ["x-remove"]}},
                         {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                             "set": [{"name": "x-resp", "value": "v"}]}},
                         {"type": "URLRewrite", "urlRewrite": {"hostname": "internal.example.com",
                                                               "path": {"type": "ReplacePrefixMatch",
                                                                        "replacePrefixMatch": "/v2"}}}],
             "backendRefs": [{"name": "web", "port": 80, "weight": 3}],
             "timeouts": {"backendRequest": "10s"},
             "retry": {"attempts": 2, "codes": [503], "backoff": "0s"},
             "sessionPersistence": {"sessionName": "SESSION", "type": "Cookie", "absoluteTimeout": "1h"}},
            {"matches": [{"path": {"type": "Exact", "value": "/old"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {
                 "scheme": "https", "hostname": "new.example.com", "statusCode": 301,
                 "path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"}}}]},
            {"matches": [{"path": {"type": "RegularExpression", "value": "/items/[0-9]+"}}],
             "backendRefs": [BACKEND]},
        ]}},
    "GRPCRoute": {"apiVersion": GW, "kind": "GRPCRoute", "metadata": _meta("grpc"), "spec": {
        "parentRefs": PARENT, "hostnames": ["grpc.example.com"],
        "rules": [{"matches": [{"method": {"type": "Exact", "service": "shop.Cart", "method": "Get"},
                                "headers": [{"type": "Exact", "name": "x-grpc", "value": "1"}]}],
                   "backendRefs": [BACKEND]}]}},
    "TLSRoute": {"apiVersion": GW, "kind": "TLSRoute", "metadata": _meta("tls"), "spec": {
        "parentRefs": [{"name": "edge", "sectionName": "tls"}], "hostnames": ["secure.example.com"],
        "rules": [{"backendRefs": [{"name": "web", "port": 443}]}]}},
    "TCPRoute": {"apiVersion": GW, "kind": "TCPRoute", "metadata": _meta("tcp"), "spec": {
        "parentRefs": [{"name": "edge", "sectionName": "tcp"}], "rules": [{"backendRefs": [BACKEND]}]}},
    "Gateway": {"apiVersion": GW, "kind": "Gateway", "metadata": _meta("edge2"), "spec": {
        "gatewayClassName": "haproxy",
        "infrastructure": {"labels": {"team": "shop"}, "annotations": {"note": "x"}},
        "listeners": [{"name": "web", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com",
                       "allowedRoutes": {"namespaces": {"from": "Same"}}},
                      {"name": "pass", "port": 8444, "protocol": "TLS", "hostname": "p.example.com",
                       "tls": {"mode": "Passthrough"}}]}},
    "ListenerSet": {"apiVersion": GW, "kind": "ListenerSet", "metadata": _meta("extra"), "spec": {
        "parentRef": {"name": "edge"},
        "listeners": [{"name": "more", "port": 8081, "protocol": "HTTP", "hostname": "more.example.com"}]}},
    "BackendTLSPolicy": {"apiVersion": GW, "kind": "BackendTLSPolicy", "metadata": _meta("tlspolicy"), "spec": {
        "targetRefs": [{"group": "", "kind": "Service", "name": "web", "sectionName": "https"}],
        "validation": {"hostname": "web.example.com", "wellKnownCACertificates": "System"}}},
    "ReferenceGrant": {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                       "metadata": _meta("grant"), "spec": {
                           "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "other"}],
                           "to": [{"group": "", "kind": "Service", "name": "web"}]}},
    "Route": {"apiVersion": "routegate.io/v1alpha1", "kind": "Route", "metadata": _meta("custom"), "spec": {
        "backend": {"address": "10.0.0.7", "port": 8080}, "hostnames": ["custom.example.com"],
        "paths": ["/custom"], "requestHeaders": [{"name": "x-custom", "value": "v"}]}},
}


def documented_codes() -> frozenset[str]:
    """The codes of the docs/RULES.md section listing HAProxy's reasons to deny an API-valid value."""
    text = (REPO / "docs" / "RULES.md").read_text()
    section = text.split("## Values the API server accepts and HAProxy cannot take", 1)[1].split("\n## ", 1)[0]
    return frozenset(re.findall(r"^\| `(RG\d{4})` \|", section, re.M))


def _schema_for(schemas: SchemaSet, obj: Obj) -> Mapping[str, Any]:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    found = schemas.get(group, version, str(obj["kind"]))
    assert found is not None, f"no schema for {obj['apiVersion']} {obj['kind']}"
    return found


def _leaves(value: Any, schema: Mapping[str, Any], path: tuple[str | int, ...] = ()
            ) -> Iterator[tuple[tuple[str | int, ...], Mapping[str, Any]]]:
    """(path, schema) of every string leaf of ``value`` whose schema constrains it."""
    if isinstance(value, Mapping):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) or (extra if isinstance(extra, Mapping) else None)
            if sub is not None and key != "metadata":
                yield from _leaves(item, sub, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, schema.get("items", {}), (*path, i))
    elif isinstance(value, str) and schema.get("type") == "string" and any(
            k in schema for k in ("pattern", "enum", "format", "maxLength", "minLength")):
        yield path, schema


def _values(schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    low, high = int(schema.get("minLength", 0)), int(schema.get("maxLength", 64))
    if "enum" in schema:
        return st.sampled_from([str(v) for v in schema["enum"]])
    if "pattern" in schema:
        strategy: st.SearchStrategy[str] = st.from_regex(schema["pattern"], fullmatch=True)
    elif schema.get("format") == "ipv4":
        strategy = st.ip_addresses(v=4).map(str)
    elif schema.get("format") == "ipv6":
        strategy = st.ip_addresses(v=6).map(str)
    else:
        strategy = st.text(st.characters(codec="utf-8"), max_size=min(high, 64))
    return strategy.filter(lambda s: low <= len(s) <= high)


def _put(obj: Obj, path: tuple[str | int, ...], value: str) -> Obj:
    out = copy.deepcopy(dict(obj))
    node: Any = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def _dotted(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


@pytest.fixture(scope="module")
def world(haproxy_path: str) -> tuple[Gate, SchemaSet]:
    from haproxy_check.check import binaries

    crds = need_shared("gateway-api", "v1.6.1", "experimental-install.yaml")
    schemas = assembly.load_schemas([str(crds), str(REPO / "manifests" / "base" / "route-crd.yaml")])
    binary: HAProxyBinary = asyncio.run(binaries.detect(haproxy_path))
    return assembly.build_gate(binary, assembly.GateSettings(), schemas=schemas), schemas


def _review(gate: Gate, obj: Obj) -> Any:
    state = MemoryState(STATE)
    return asyncio.run(gate.review(Change(Operation.CREATE, obj), state=state, reload_note=False))


def test_the_documented_list_is_explained() -> None:
    from webhook.cli.explanations import EXPLANATIONS

    listed = documented_codes()
    assert listed and listed <= set(EXPLANATIONS), listed


@pytest.mark.parametrize("kind", sorted(BASES))
def test_every_base_object_is_allowed(world: tuple[Gate, SchemaSet], kind: str) -> None:
    verdict = _review(world[0], BASES[kind])
    assert verdict.decision is Decision.ALLOW, verdict.message


@pytest.mark.parametrize("kind", sorted(BASES))
def test_schema_valid_values_are_allowed_or_denied_for_a_documented_haproxy_reason(
        world: tuple[Gate, SchemaSet], kind: str) -> None:
    gate, schemas = world
    base = BASES[kind]
    leaves = list(_leaves(base, _schema_for(schemas, base)))
    assert leaves, kind
    documented = documented_codes()

    @settings(max_examples=int(os.environ.get("ROUTEGATE_PROPERTY_EXAMPLES", "8")), deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        path, schema = data.draw(st.sampled_from(leaves), label="field")
        value = data.draw(_values(schema), label="value")
        verdict = _review(gate, _put(base, path, value))
        if verdict.decision is Decision.ALLOW:
            return
        assert verdict.decision is Decision.DENY, verdict.message
        denials = verdict.denials
        if any(f.code in API_SERVER_CODES for f in denials):
            return  # the API server's own schema/CEL rule: it would not have stored the object either
        field = _dotted(path)
        for finding in denials:
            assert finding.code in documented, (field, value, finding)
            assert finding.field == field or field.startswith(finding.field + "."), (field, value, finding)
            shown = {value, json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]}
            assert any(form in finding.message for form in shown), (field, value, finding)

    check()


def test_a_value_from_the_pattern_reaches_the_gate() -> None:
    """The generators are the fields' own: a pattern's values match it, an enum's are its members."""
    schema = yaml.safe_load("{type: string, pattern: '^/[a-z]+$', maxLength: 8}")
    strategy = _values(schema)

    @settings(max_examples=20, deadline=None, derandomize=True)
    @given(strategy)
    def matches(value: str) -> None:
        assert re.fullmatch(r"/[a-z]+", value) and len(value) <= 8

    matches()
