# ruff: noqa: E501 - expected messages are the API server's exact text, kept whole so they can be grepped
"""Gateway API v1.6.1's own CEL rules, judged offline as the API server judges them.

Each case is an object written by hand from a CRD rule: one that passes and one that fails with the
API server's text (``<field path>: <message>``). Objects are defaulted first, as the API server does
before it evaluates CEL.
"""

from __future__ import annotations

import copy
import functools
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators.cel import celchecks, celengines
from validators.findings import Severity

VERSION = "v1.6.1"


def _bundle_dir() -> Path | None:
    repo = Path(__file__).resolve().parents[2]
    for candidate in (repo.parent / "shared" / "gateway-api", Path("/work/shared/gateway-api")):
        if (candidate / VERSION).is_dir():
            return candidate / VERSION
    return None


BUNDLES = _bundle_dir()
needs_bundles = pytest.mark.skipif(
    BUNDLES is None, reason="Gateway API CRDs (shared/gateway-api) are not beside the checkout"
)


@functools.cache
def crds(bundle: str) -> dict[tuple[str, str], dict[str, Any]]:
    assert BUNDLES is not None
    text = (BUNDLES / f"{bundle}-install.yaml").read_text()
    out = {}
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            for version in doc["spec"]["versions"]:
                out[(doc["spec"]["names"]["kind"], version["name"])] = version["schema"]["openAPIV3Schema"]
    return out


ENGINES = celengines.installed()
if not ENGINES:
    pytest.skip("no CEL engine installed (extra `cel`)", allow_module_level=True)
PREFERRED = next(iter(ENGINES))
FALLBACK = "common-expression-language"
needs_fallback = pytest.mark.skipif(
    FALLBACK not in ENGINES or PREFERRED == FALLBACK, reason="the fallback engine common-expression-language is not installed"
)


def engine(name: str) -> celengines.Engine:
    return ENGINES[name]


@functools.cache
def validator(bundle: str, kind: str, version: str = "v1", engine_name: str = PREFERRED) -> celchecks.CelValidator:
    return celchecks.CelValidator.compile(crds(bundle)[(kind, version)], kind=kind, engine=engine(engine_name))


def defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """Structural defaulting, top-down, as the API server applies it before admission."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        for name, item in value.items():
            sub = props.get(name) or (
                schema.get("additionalProperties")
                if isinstance(schema.get("additionalProperties"), dict)
                else None
            )
            if sub:
                defaulted(item, sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            defaulted(item, schema["items"])
    return value


def judge(
    bundle: str,
    kind: str,
    spec: dict[str, Any],
    *,
    old_spec: dict[str, Any] | None = None,
    version: str = "v1",
    engine_name: str = PREFERRED,
) -> list[str]:
    schema = crds(bundle)[(kind, version)]

    def obj(s: dict[str, Any]) -> dict[str, Any]:
        raw = {
            "apiVersion": f"gateway.networking.x-k8s.io/{version}" if kind.startswith("X") else f"gateway.networking.k8s.io/{version}",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "default"},
            "spec": copy.deepcopy(s),
        }
        return defaulted(raw, schema)

    old = obj(old_spec) if old_spec is not None else None
    findings = validator(bundle, kind, version, engine_name).validate(obj(spec), old=old)
    assert all(f.severity is Severity.DENY for f in findings), [f.message for f in findings]
    return sorted(f"{f.field}: {f.message}" for f in findings)


GW = {"name": "gw"}
VERSIONS = {"XBackendTrafficPolicy": "v1alpha1"}


def route(*rules: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"parentRefs": [GW], "rules": list(rules), **spec}


def rule(path: tuple[str, str] | None = ("PathPrefix", "/"), **fields: Any) -> dict[str, Any]:
    out = dict(fields)
    if path is not None:
        out.setdefault("matches", [{"path": {"type": path[0], "value": path[1]}}])
    return out


SVC = {"name": "svc", "port": 8080}
MODIFIER = {"set": [{"name": "X-A", "value": "1"}]}
INVALID = "Invalid value: "  # Kubernetes >= 1.35 omits the value of object and array nodes
ERRORED = 'Invalid value: "object": '  # evaluation errors still print the schema type

CASES = [
    # HTTPRoute path values for Exact / PathPrefix
    ("standard", "HTTPRoute", route(rule(("Exact", "/foo"), backendRefs=[SVC])), []),
    (
        "standard",
        "HTTPRoute",
        route(rule(("Exact", "foo"), backendRefs=[SVC])),
        [
            f"spec.rules[0].matches[0].path: {INVALID}value must be an absolute path and start with '/' when type "
            "one of ['Exact', 'PathPrefix']"
        ],
    ),
    (
        "standard",
        "HTTPRoute",
        route(rule(("PathPrefix", "/a/../b"), backendRefs=[SVC])),
        [
            f"spec.rules[0].matches[0].path: {INVALID}must not contain '/../' when type one of ['Exact', 'PathPrefix']"
        ],
    ),
    (
        "standard",
        "HTTPRoute",
        route(rule(("PathPrefix", "/a%2Fb/."), backendRefs=[SVC])),
        [
            f"spec.rules[0].matches[0].path: {INVALID}must not contain '%2F' when type one of ['Exact', 'PathPrefix']",
            f"spec.rules[0].matches[0].path: {INVALID}must not end with '/.' when type one of ['Exact', 'PathPrefix']",
        ],
    ),
    ("standard", "HTTPRoute", route(rule(("RegularExpression", "/a//b[0-9]+"), backendRefs=[SVC])), []),
    # filter type / field consistency
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                filters=[{"type": "RequestHeaderModifier", "requestHeaderModifier": MODIFIER}],
                backendRefs=[SVC],
            )
        ),
        [],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                filters=[{"type": "RequestHeaderModifier", "responseHeaderModifier": MODIFIER}],
                backendRefs=[SVC],
            )
        ),
        [
            f"spec.rules[0].filters[0]: {INVALID}filter.requestHeaderModifier must be specified for "
            "RequestHeaderModifier filter.type",
            f"spec.rules[0].filters[0]: {INVALID}filter.responseHeaderModifier must be nil if the filter.type is not "
            "ResponseHeaderModifier",
        ],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                backendRefs=[
                    {
                        **SVC,
                        "filters": [
                            {"type": "RequestHeaderModifier", "requestHeaderModifier": MODIFIER},
                            {"type": "RequestHeaderModifier", "requestHeaderModifier": MODIFIER},
                        ],
                    }
                ]
            )
        ),
        [
            'spec.rules[0].backendRefs[0].filters: Invalid value: RequestHeaderModifier filter cannot be '
            "repeated"
        ],
    ),
    # RequestRedirect together with backendRefs
    (
        "standard",
        "HTTPRoute",
        route(rule(filters=[{"type": "RequestRedirect", "requestRedirect": {"statusCode": 301}}])),
        [],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                filters=[{"type": "RequestRedirect", "requestRedirect": {"statusCode": 301}}],
                backendRefs=[SVC],
            )
        ),
        [f"spec.rules[0]: {INVALID}RequestRedirect filter must not be used together with backendRefs"],
    ),
    # ReplacePrefixMatch needs exactly one PathPrefix match
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                ("PathPrefix", "/old"),
                filters=[
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}},
                    }
                ],
                backendRefs=[SVC],
            )
        ),
        [],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                None,
                matches=[
                    {"path": {"type": "PathPrefix", "value": "/a"}},
                    {"path": {"type": "PathPrefix", "value": "/b"}},
                ],
                filters=[
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}},
                    }
                ],
                backendRefs=[SVC],
            )
        ),
        [
            f"spec.rules[0]: {INVALID}When using URLRewrite filter with path.replacePrefixMatch, exactly one "
            "PathPrefix match must be specified"
        ],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                ("Exact", "/old"),
                filters=[
                    {
                        "type": "RequestRedirect",
                        "requestRedirect": {
                            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}
                        },
                    }
                ],
            )
        ),
        [
            f"spec.rules[0]: {INVALID}When using RequestRedirect filter with path.replacePrefixMatch, exactly one "
            "PathPrefix match must be specified"
        ],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                filters=[
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replaceFullPath": "/new"}},
                    }
                ],
                backendRefs=[SVC],
            )
        ),
        [
            f"spec.rules[0].filters[0].urlRewrite.path: {INVALID}replacePrefixMatch must be specified when type is set "
            "to 'ReplacePrefixMatch'",
            f"spec.rules[0].filters[0].urlRewrite.path: {INVALID}type must be 'ReplaceFullPath' when replaceFullPath is "
            "set",
        ],
    ),
    # timeouts: backendRequest <= request (0s means no request timeout)
    (
        "standard",
        "HTTPRoute",
        route(rule(backendRefs=[SVC], timeouts={"request": "0s", "backendRequest": "20s"})),
        [],
    ),
    (
        "standard",
        "HTTPRoute",
        route(rule(backendRefs=[SVC], timeouts={"request": "10s", "backendRequest": "1m"})),
        [f"spec.rules[0].timeouts: {INVALID}backendRequest timeout cannot be longer than request timeout"],
    ),
    # total matches across rules
    (
        "standard",
        "HTTPRoute",
        route(
            *[
                rule(
                    None,
                    matches=[{"path": {"type": "PathPrefix", "value": f"/{i}/{j}"}} for j in range(9)],
                    backendRefs=[SVC],
                )
                for i in range(15)
            ]
        ),
        [
            'spec.rules: Invalid value: While 16 rules and 64 matches per rule are allowed, the total number '
            "of matches across all rules in a route must be less than 128"
        ],
    ),
    # CORS origins (and the filter it sits on)
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                filters=[
                    {"type": "CORS", "cors": {"allowOrigins": ["https://a.example", "https://*.b.example"]}}
                ],
                backendRefs=[SVC],
            )
        ),
        [],
    ),
    (
        "standard",
        "HTTPRoute",
        route(
            rule(
                filters=[
                    {
                        "type": "CORS",
                        "cors": {"allowOrigins": ["*", "https://a.example"], "allowMethods": ["*", "GET"]},
                    }
                ],
                backendRefs=[SVC],
            )
        ),
        [
            "spec.rules[0].filters[0].cors.allowMethods: Invalid value: AllowMethods cannot contain '*' "
            "alongside other methods",
            "spec.rules[0].filters[0].cors.allowOrigins: Invalid value: AllowOrigins cannot contain '*' "
            "alongside other origins",
        ],
    ),
    # parentRefs to the same parent need distinct sectionNames
    (
        "standard",
        "HTTPRoute",
        route(rule(backendRefs=[SVC]), parentRefs=[{**GW, "sectionName": "a"}, {**GW, "sectionName": "b"}]),
        [],
    ),
    (
        "standard",
        "HTTPRoute",
        route(rule(backendRefs=[SVC]), parentRefs=[{**GW, "sectionName": "a"}, GW]),
        [
            'spec.parentRefs: Invalid value: sectionName must be specified when parentRefs includes 2 or more '
            "references to the same parent"
        ],
    ),
    # Gateway listeners: tls / hostname / uniqueness
    (
        "standard",
        "Gateway",
        {
            "gatewayClassName": "c",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "a.example"},
                {
                    "name": "https",
                    "port": 443,
                    "protocol": "HTTPS",
                    "tls": {"certificateRefs": [{"name": "cert"}]},
                },
                {"name": "tls", "port": 8443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
                {"name": "tcp", "port": 9000, "protocol": "TCP"},
            ],
        },
        [],
    ),
    (
        "standard",
        "Gateway",
        {
            "gatewayClassName": "c",
            "listeners": [
                {
                    "name": "http",
                    "port": 80,
                    "protocol": "HTTP",
                    "tls": {"certificateRefs": [{"name": "cert"}]},
                },
                {"name": "tcp", "port": 9000, "protocol": "TCP", "hostname": "a.example"},
            ],
        },
        [
            "spec.listeners: Invalid value: hostname must not be specified for protocols ['TCP', 'UDP']",
            "spec.listeners: Invalid value: tls must not be specified for protocols ['HTTP', 'TCP', "
            "'UDP']",
        ],
    ),
    (
        "standard",
        "Gateway",
        {
            "gatewayClassName": "c",
            "listeners": [
                {
                    "name": "web",
                    "port": 443,
                    "protocol": "HTTPS",
                    "tls": {"mode": "Passthrough", "certificateRefs": [{"name": "c"}]},
                },
                {
                    "name": "web",
                    "port": 443,
                    "protocol": "HTTPS",
                    "hostname": "a.example",
                    "tls": {"certificateRefs": []},
                },
            ],
        },
        [
            'spec.listeners: Invalid value: Listener name must be unique within the Gateway',
            'spec.listeners: Invalid value: tls mode must be Terminate for protocol HTTPS',
            # the rule reads self.options without has(): cel-go errors on the unset field, and so do we
            f"spec.listeners[1].tls: {ERRORED}no such key: options evaluating rule: certificateRefs or options must be "
            "specified when mode is Terminate",
        ],
    ),
    # TLSRoute hostnames
    (
        "standard",
        "TLSRoute",
        {"parentRefs": [GW], "hostnames": ["a.example", "*.b.example"], "rules": [{"backendRefs": [SVC]}]},
        [],
    ),
    (
        "standard",
        "TLSRoute",
        {"parentRefs": [GW], "hostnames": ["10.0.0.1", "a.*.example"], "rules": [{"backendRefs": [SVC]}]},
        [
            'spec.hostnames: Invalid value: Hostnames cannot contain an IP',
            'spec.hostnames: Invalid value: Wildcards on hostnames must be the first label, and the rest of '
            "hostname must be valid based on RFC-1123",
        ],
    ),
    # BackendTLSPolicy: CA source exclusivity and SAN element consistency
    (
        "standard",
        "BackendTLSPolicy",
        {
            "targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
            "validation": {"hostname": "s.example", "wellKnownCACertificates": "System"},
        },
        [],
    ),
    (
        "standard",
        "BackendTLSPolicy",
        {
            "targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
            "validation": {
                "hostname": "s.example",
                "wellKnownCACertificates": "System",
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
            },
        },
        [f"spec.validation: {INVALID}must not contain both CACertificateRefs and WellKnownCACertificates"],
    ),
    (
        "standard",
        "BackendTLSPolicy",
        {
            "targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
            "validation": {
                "hostname": "s.example",
                "subjectAltNames": [{"type": "Hostname", "uri": "spiffe://x"}],
            },
        },
        [
            f"spec.validation.subjectAltNames[0]: {INVALID}SubjectAltName element must contain Hostname, if Type is "
            "set to Hostname",
            f"spec.validation.subjectAltNames[0]: {INVALID}SubjectAltName element must not contain URI, if Type is not "
            "set to URI",
            f"spec.validation: {INVALID}must specify either CACertificateRefs or WellKnownCACertificates",
        ],
    ),
    # GRPCRoute method names (RE2 (?i) flag)
    (
        "standard",
        "GRPCRoute",
        {
            "parentRefs": [GW],
            "rules": [
                {"matches": [{"method": {"service": "Pkg.Svc", "method": "Get"}}], "backendRefs": [SVC]}
            ],
        },
        [],
    ),
    (
        "standard",
        "GRPCRoute",
        {
            "parentRefs": [GW],
            "rules": [
                {"matches": [{"method": {"service": "pkg svc", "method": "Get"}}], "backendRefs": [SVC]}
            ],
        },
        [
            f"spec.rules[0].matches[0].method: {INVALID}service must only contain valid characters (matching "
            r"^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$)"
        ],
    ),
    # experimental: ExternalAuth protocol/field consistency, rule names, retry budget interval
    (
        "experimental",
        "HTTPRoute",
        route(
            rule(
                filters=[
                    {
                        "type": "ExternalAuth",
                        "externalAuth": {
                            "protocol": "HTTP",
                            "backendRef": {"name": "auth", "port": 80},
                            "http": {},
                        },
                    }
                ],
                backendRefs=[SVC],
            )
        ),
        [],
    ),
    (
        "experimental",
        "HTTPRoute",
        route(
            rule(
                filters=[
                    {
                        "type": "ExternalAuth",
                        "externalAuth": {
                            "protocol": "GRPC",
                            "backendRef": {"name": "auth", "port": 80},
                            "http": {},
                        },
                    }
                ],
                backendRefs=[SVC],
            )
        ),
        [
            f"spec.rules[0].filters[0].externalAuth: {INVALID}grpc must be specified when protocol is set to 'GRPC'",
            f"spec.rules[0].filters[0].externalAuth: {INVALID}protocol must be 'HTTP' when http is set",
        ],
    ),
    (
        "experimental",
        "GRPCRoute",
        {
            "parentRefs": [GW],
            "rules": [{"name": "a", "backendRefs": [SVC]}, {"name": "a", "backendRefs": [SVC]}],
        },
        ['spec.rules: Invalid value: Rule name must be unique within the route'],
    ),
    (
        "experimental",
        "HTTPRoute",
        route(rule(backendRefs=[SVC]), parentRefs=[{**GW, "port": 80}, {**GW, "port": 81}]),
        [],
    ),
    (
        "experimental",
        "HTTPRoute",
        route(rule(backendRefs=[SVC]), parentRefs=[{**GW, "port": 80}, GW]),
        [
            'spec.parentRefs: Invalid value: sectionName or port must be specified when parentRefs includes 2 '
            "or more references to the same parent"
        ],
    ),
    # parentRefs' "namespace" is a CEL keyword: the rule reads it as __namespace__
    ("standard", "GRPCRoute", {"parentRefs": [{**GW, "namespace": "a"}, {**GW, "namespace": "b"}],
                               "rules": [{"backendRefs": [SVC]}]}, []),
    ("standard", "GRPCRoute", {"parentRefs": [{**GW, "namespace": "a"}, {**GW, "namespace": "a"}],
                               "rules": [{"backendRefs": [SVC]}]},
     ['spec.parentRefs: Invalid value: sectionName must be unique when parentRefs includes 2 or more references to the same parent']),
    # Gateway infrastructure annotations: rules over map keys
    ("standard", "Gateway", {"gatewayClassName": "c", "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}],
                             "infrastructure": {"annotations": {"example.com/ok": "v"}}}, []),
    ("standard", "Gateway", {"gatewayClassName": "c", "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}],
                             "infrastructure": {"annotations": {"-bad": "v"}}},
     ['spec.infrastructure.annotations: Invalid value: Annotation keys must be in the form of an optional DNS subdomain prefix followed by a required name segment of up to 63 characters.']),
    # Gateway addresses: IPAddress values unique
    ("standard", "Gateway", {"gatewayClassName": "c", "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}],
                             "addresses": [{"value": "10.0.0.1"}, {"value": "10.0.0.2"}]}, []),
    ("standard", "Gateway", {"gatewayClassName": "c", "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}],
                             "addresses": [{"value": "10.0.0.1"}, {"type": "IPAddress", "value": "10.0.0.1"}]},
     ['spec.addresses: Invalid value: IPAddress values must be unique']),
    # experimental XBackendTrafficPolicy: duration bounds on a string node
    ("experimental", "XBackendTrafficPolicy", {"targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
                                               "retryConstraint": {"budget": {"interval": "10s"}}}, []),
    ("experimental", "XBackendTrafficPolicy", {"targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
                                               "retryConstraint": {"budget": {"interval": "2h"}}},
     ['spec.retryConstraint.budget.interval: Invalid value: "2h": interval cannot be greater than one hour or less than one second']),
]


@needs_bundles
@pytest.mark.parametrize(
    ("bundle", "kind", "spec", "expected"),
    CASES,
    ids=[f"{c[0][:3]}-{c[1]}-{i}-{'pass' if not c[3] else 'deny'}" for i, c in enumerate(CASES)],
)
def test_gateway_api_rules_match_the_api_server(
    bundle: str, kind: str, spec: dict[str, Any], expected: list[str]
) -> None:
    assert judge(bundle, kind, spec, version=VERSIONS.get(kind, "v1")) == sorted(expected)


@needs_bundles
@needs_fallback
@pytest.mark.parametrize(
    ("bundle", "kind", "spec", "expected"),
    CASES,
    ids=[f"{c[0][:3]}-{c[1]}-{i}-{'pass' if not c[3] else 'deny'}" for i, c in enumerate(CASES)],
)
def test_the_fallback_engine_gives_the_same_verdicts(
    bundle: str, kind: str, spec: dict[str, Any], expected: list[str]
) -> None:
    assert judge(bundle, kind, spec, version=VERSIONS.get(kind, "v1"), engine_name=FALLBACK) == sorted(expected)


@needs_bundles
@pytest.mark.parametrize("bundle", ["standard", "experimental"])
@pytest.mark.parametrize("engine_name", list(ENGINES))
def test_every_rule_of_the_bundle_compiles(bundle: str, engine_name: str) -> None:
    total = 0
    for (kind, version), schema in crds(bundle).items():
        compiled = celchecks.CelValidator.compile(schema, kind=kind, engine=engine(engine_name))
        assert compiled.compile_errors == (), f"{kind}/{version}"
        assert compiled.engine == engine_name
        total += compiled.rule_count
    raw = (BUNDLES / f"{bundle}-install.yaml").read_text() if BUNDLES else ""
    assert total == raw.count("rule: ") > 250


@needs_bundles
def test_transition_rule_runs_only_on_update_with_an_old_value() -> None:
    assert judge("standard", "GatewayClass", {"controllerName": "example.com/b"}) == []
    assert (
        judge(
            "standard",
            "GatewayClass",
            {"controllerName": "example.com/b"},
            old_spec={"controllerName": "example.com/b"},
        )
        == []
    )
    assert judge(
        "standard",
        "GatewayClass",
        {"controllerName": "example.com/b"},
        old_spec={"controllerName": "example.com/a"},
    ) == ['spec.controllerName: Invalid value: "example.com/b": Value is immutable']


@needs_bundles
def test_unchanged_invalid_values_are_ratcheted_on_update_where_the_api_server_correlates_them() -> None:
    bad = {"name": "web", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [], "options": {}}}
    other = {
        "name": "other",
        "port": 8443,
        "protocol": "HTTPS",
        "hostname": "a.example",
        "tls": {"certificateRefs": [{"name": "c"}]},
    }
    message = (
        f"spec.listeners[0].tls: {INVALID}certificateRefs or options must be specified when mode is Terminate"
    )
    assert judge("standard", "Gateway", {"gatewayClassName": "c", "listeners": [bad]}) == [message]
    # listeners is a map list keyed by name: the unchanged listener keeps passing on UPDATE
    assert (
        judge(
            "standard",
            "Gateway",
            {"gatewayClassName": "c", "listeners": [bad, other]},
            old_spec={"gatewayClassName": "c", "listeners": [bad]},
        )
        == []
    )
    good = {**bad, "tls": {"certificateRefs": [{"name": "c"}]}}
    assert judge(
        "standard",
        "Gateway",
        {"gatewayClassName": "c", "listeners": [bad]},
        old_spec={"gatewayClassName": "c", "listeners": [good]},
    ) == [message]
    # HTTPRoute rules are an atomic list: its items ratchet with the list as a whole
    bad_rule = rule(("Exact", "foo"), backendRefs=[SVC])
    assert judge("standard", "HTTPRoute", route(bad_rule), old_spec=route(bad_rule)) == []
    assert len(judge("standard", "HTTPRoute", route(bad_rule, rule(backendRefs=[SVC])),
                     old_spec=route(bad_rule))) == 1


@needs_bundles
def test_a_rule_that_errors_on_the_object_denies_as_the_api_server_does() -> None:
    spec = route(rule(backendRefs=[SVC], timeouts={"request": "soon", "backendRequest": "1s"}))
    [finding] = judge("standard", "HTTPRoute", spec)
    assert finding.startswith(f"spec.rules[0].timeouts: {ERRORED}")
    assert finding.endswith(" evaluating rule: backendRequest timeout cannot be longer than request timeout")


@needs_bundles
def test_one_httproute_evaluates_well_under_a_millisecond_budget() -> None:
    spec = route(
        *[
            rule(
                ("PathPrefix", f"/{i}"),
                backendRefs=[SVC],
                filters=[{"type": "RequestHeaderModifier", "requestHeaderModifier": MODIFIER}],
            )
            for i in range(8)
        ]
    )
    schema = crds("standard")[("HTTPRoute", "v1")]
    obj = defaulted(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "x"},
            "spec": spec,
        },
        schema,
    )
    check = validator("standard", "HTTPRoute")
    samples = []
    for _ in range(30):
        start = time.perf_counter()
        assert check.validate(obj) == []
        samples.append(time.perf_counter() - start)
    assert statistics.median(samples) < 0.05


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copied = copy.copy(value)
    copied[head] = _replaced(value[head], tuple(rest), new)
    return copied


SEEDS = {
    "HTTPRoute": route(rule(filters=[{"type": "CORS", "cors": {"allowOrigins": ["*"]}}], backendRefs=[SVC],
                            timeouts={"request": "1s", "backendRequest": "1s"}),
                       rule(("Exact", "/x"), filters=[{"type": "URLRewrite", "urlRewrite": {
                           "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y"}}}])),
    "Gateway": {"gatewayClassName": "c", "addresses": [{"value": "10.0.0.1"}],
                "infrastructure": {"annotations": {"a": "b"}},
                "listeners": [{"name": "h", "port": 443, "protocol": "HTTPS", "hostname": "a.example",
                               "tls": {"certificateRefs": [{"name": "c"}]}}]},
    "BackendTLSPolicy": {"targetRefs": [{"group": "", "kind": "Service", "name": "s"}],
                         "validation": {"hostname": "h", "subjectAltNames": [{"type": "URI", "uri": "spiffe://a"}]}},
}
fuzz_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "value", "name", "matches", "path", "tls", "mode", "hostname", "port", "x"]),
        inner, max_size=4),
    max_leaves=12,
)


@needs_bundles
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(sorted(SEEDS)), engine_name=st.sampled_from(list(ENGINES)))
def test_arbitrary_values_anywhere_in_real_objects_never_make_the_evaluator_raise(
    data: st.DataObject, kind: str, engine_name: str
) -> None:
    schema = crds("experimental")[(kind, "v1")]
    seed = defaulted({"kind": kind, "metadata": {"name": "x"}, "spec": copy.deepcopy(SEEDS[kind])}, schema)
    path = data.draw(st.sampled_from(_paths(seed["spec"])))
    obj = {**seed, "spec": _replaced(seed["spec"], path, data.draw(fuzz_values))}
    old = data.draw(st.sampled_from([None, seed]))
    findings = validator("experimental", kind, "v1", engine_name).validate(obj, old=old)
    assert all(f.code.startswith("RG030") for f in findings)
