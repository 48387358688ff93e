"""Every HAProxy admission rule of seed 004 (issue 5 section 2): allowed and denied objects.

Each case names the rule's code and the exact (severity, field path) findings expected for that code;
an empty list means the object is allowed by that rule.
"""

from __future__ import annotations

from typing import Any

import pytest
from validatorbuilders import backend, hits, obj, prefix, regex, route, run

from validators import codes

D, W = "deny", "warn"
R0 = "spec.rules[0]"


def sp(**persistence: Any) -> dict[str, Any]:
    return {"backendRefs": [backend()], "sessionPersistence": persistence}


def hdr(kind: str = "RequestHeaderModifier", **ops: Any) -> dict[str, Any]:
    field = kind[0].lower() + kind[1:]
    return {"type": kind, field: ops}


def rewrite(kind: str = "URLRewrite") -> dict[str, Any]:
    field = "urlRewrite" if kind == "URLRewrite" else "requestRedirect"
    return {"type": kind, field: {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}


def auth(**settings: Any) -> dict[str, Any]:
    body = {
        "protocol": "HTTP",
        "backendRef": {"name": "auth", "port": 8080},
        "http": {"allowedResponseHeaders": ["X-Auth-User"]},
    }
    body.update(settings)
    return {"type": "ExternalAuth", "externalAuth": body}


def btls(**validation: Any) -> dict[str, Any]:
    spec = {
        "targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
        "validation": {"hostname": "api.example.com", "wellKnownCACertificates": "System", **validation},
    }
    return obj("BackendTLSPolicy", spec)


def gateway(*listeners: dict[str, Any]) -> dict[str, Any]:
    return obj("Gateway", {"gatewayClassName": "haptic", "listeners": list(listeners)})


def listener(name: str, protocol: str, port: int, mode: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "protocol": protocol, "port": port}
    if mode is not None:
        out["tls"] = {"mode": mode}
    return out


def crd_route(header: str, address: str = "10.0.0.1") -> dict[str, Any]:
    spec = {
        "backend": {"address": address, "port": 8080},
        "requestHeaders": [{"name": header, "value": "a b;%"}],
    }
    return obj("Route", spec, group="routegate.io", version="v1alpha1")


CASES = [
    # rule 1: session persistence names
    pytest.param(
        route(sp(sessionName="my-session_1.x")), codes.SESSION_NAME, [], id="1 token session name ok"
    ),
    pytest.param(route(sp(type="Header")), codes.SESSION_NAME, [], id="1 default names need no check"),
    pytest.param(
        route(sp(sessionName="a b")),
        codes.SESSION_NAME,
        [(D, f"{R0}.sessionPersistence.sessionName")],
        id="1 space in sessionName denied",
    ),
    pytest.param(
        route(sp(sessionName="sess;id")),
        codes.SESSION_NAME,
        [(D, f"{R0}.sessionPersistence.sessionName")],
        id="1 semicolon denied",
    ),
    pytest.param(
        route(sp(cookie={"name": "a%b"})),
        codes.SESSION_NAME,
        [(D, f"{R0}.sessionPersistence.cookie.name")],
        id="1 cookie.name checked",
    ),
    pytest.param(
        route(sp(header={"name": "X|Y"}), kind="GRPCRoute"),
        codes.SESSION_NAME,
        [(D, f"{R0}.sessionPersistence.header.name")],
        id="1 GRPCRoute header.name checked",
    ),
    # rule 2: BackendTLSPolicy subjectAltNames and trust
    pytest.param(btls(), codes.SAN_SEVERAL, [], id="2 no SANs ok"),
    pytest.param(
        btls(subjectAltNames=[{"type": "Hostname", "hostname": "api.example.com"}]),
        codes.SAN_MISMATCH,
        [],
        id="2 one SAN equal to hostname ok",
    ),
    pytest.param(
        btls(subjectAltNames=[{"type": "Hostname", "hostname": "other.example.com"}]),
        codes.SAN_MISMATCH,
        [(D, "spec.validation.subjectAltNames[0].hostname")],
        id="2 SAN differing from hostname denied",
    ),
    pytest.param(
        btls(subjectAltNames=[{"type": "URI", "uri": "spiffe://td/ns/a"}]),
        codes.SAN_URI,
        [(D, "spec.validation.subjectAltNames[0].type")],
        id="2 URI SAN denied",
    ),
    pytest.param(
        btls(
            subjectAltNames=[
                {"type": "Hostname", "hostname": "api.example.com"},
                {"type": "Hostname", "hostname": "api.example.com"},
            ]
        ),
        codes.SAN_SEVERAL,
        [(D, "spec.validation.subjectAltNames")],
        id="2 several SANs denied",
    ),
    pytest.param(
        btls(
            wellKnownCACertificates=None, caCertificateRefs=[{"group": "", "kind": "ConfigMap", "name": "ca"}]
        ),
        codes.TLS_NO_TRUST,
        [],
        id="2 CA refs give trust",
    ),
    pytest.param(
        btls(wellKnownCACertificates=None),
        codes.TLS_NO_TRUST,
        [(D, "spec.validation")],
        id="2 no trust source denied",
    ),
    # rule 3: regular expressions
    pytest.param(
        route({"matches": [regex(r"^/api/v[0-9]+/.*")]}),
        codes.REGEX_UNBALANCED,
        [],
        id="3 seed example regex ok",
    ),
    pytest.param(
        route({"matches": [regex(r"/(a|b)/\)[]x]")]}),
        codes.REGEX_UNBALANCED,
        [],
        id="3 escaped paren and literal bracket ok",
    ),
    pytest.param(
        route({"matches": [regex(r"/a)|(b")]}),
        codes.REGEX_UNBALANCED,
        [(D, f"{R0}.matches[0].path.value")],
        id="3 early close paren denied",
    ),
    pytest.param(
        route({"matches": [regex(r"/[a-z")]}),
        codes.REGEX_UNBALANCED,
        [(D, f"{R0}.matches[0].path.value")],
        id="3 unclosed class denied",
    ),
    pytest.param(
        route({"matches": [regex(r"/a|/b")]}),
        codes.REGEX_UNBALANCED,
        [(D, f"{R0}.matches[0].path.value")],
        id="3 top-level alternation denied",
    ),
    pytest.param(
        route(
            {
                "matches": [
                    {**prefix(), "headers": [{"type": "RegularExpression", "name": "UA", "value": "(Mobile"}]}
                ]
            }
        ),
        codes.REGEX_UNBALANCED,
        [(D, f"{R0}.matches[0].headers[0].value")],
        id="3 header regex checked",
    ),
    pytest.param(
        route(
            {
                "matches": [
                    {
                        **prefix(),
                        "queryParams": [{"type": "RegularExpression", "name": "v", "value": "^v[2-3$"}],
                    }
                ]
            }
        ),
        codes.REGEX_UNBALANCED,
        [(D, f"{R0}.matches[0].queryParams[0].value")],
        id="3 query regex checked",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "queryParams": [{"type": "Exact", "name": "v", "value": "(x"}]}]}),
        codes.REGEX_UNBALANCED,
        [],
        id="3 exact values are not regexes",
    ),
    pytest.param(
        route(
            {"matches": [{"method": {"type": "RegularExpression", "service": "com\\.ex)x"}}]},
            kind="GRPCRoute",
        ),
        codes.REGEX_UNBALANCED,
        [(D, f"{R0}.matches[0].method.service")],
        id="3 GRPCRoute method regex checked",
    ),
    # rule 4: header modifiers
    pytest.param(
        route({"filters": [hdr(set=[{"name": "X-API-Version", "value": "v2"}], remove=["Server"])]}),
        codes.HEADER_NAME,
        [],
        id="4 token header names ok",
    ),
    pytest.param(
        route({"filters": [hdr(set=[{"name": "X:Bad", "value": "v"}])]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.filters[0].requestHeaderModifier.set[0].name")],
        id="4 colon in set name denied",
    ),
    pytest.param(
        route({"filters": [hdr("ResponseHeaderModifier", remove=["X(y)"])]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.filters[0].responseHeaderModifier.remove[0]")],
        id="4 response remove checked",
    ),
    pytest.param(
        route({"backendRefs": [backend(filters=[hdr(add=[{"name": "X#", "value": "v"}])])]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.backendRefs[0].filters[0].requestHeaderModifier.add[0].name")],
        id="4 backendRef level checked",
    ),
    pytest.param(
        route({"filters": [hdr(set=[{"name": "X", "value": "a\x01b"}])]}),
        codes.HEADER_VALUE,
        [(D, f"{R0}.filters[0].requestHeaderModifier.set[0].value")],
        id="4 control char in value denied",
    ),
    pytest.param(
        route({"filters": [hdr(set=[{"name": "X", "value": "max-age=1; includeSubDomains"}])]}),
        codes.HEADER_VALUE,
        [],
        id="4 printable value ok",
    ),
    # rule 5: ReplacePrefixMatch
    pytest.param(
        route({"matches": [prefix("/old")], "filters": [rewrite()]}),
        codes.PREFIX_REWRITE,
        [],
        id="5 PathPrefix with ReplacePrefixMatch ok",
    ),
    pytest.param(
        route({"filters": [rewrite("RequestRedirect")]}),
        codes.PREFIX_REWRITE,
        [],
        id="5 defaulted match is PathPrefix",
    ),
    pytest.param(
        route({"matches": [regex("/old/.*")], "filters": [rewrite()]}),
        codes.PREFIX_REWRITE,
        [(D, f"{R0}.filters[0].urlRewrite.path.replacePrefixMatch")],
        id="5 regex with URLRewrite denied",
    ),
    pytest.param(
        route(
            {"matches": [regex("/old/.*")], "backendRefs": [backend(filters=[rewrite("RequestRedirect")])]}
        ),
        codes.PREFIX_REWRITE,
        [(D, f"{R0}.backendRefs[0].filters[0].requestRedirect.path.replacePrefixMatch")],
        id="5 regex with backend redirect denied",
    ),
    # rule 6: redirect status codes
    pytest.param(
        route({"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 308}}]}),
        codes.REDIRECT_STATUS,
        [],
        id="6 308 ok",
    ),
    pytest.param(
        route({"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 305}}]}),
        codes.REDIRECT_STATUS,
        [(D, f"{R0}.filters[0].requestRedirect.statusCode")],
        id="6 305 denied",
    ),
    # rule 7: retries
    pytest.param(
        route({"retry": {"codes": [500, 503, 429], "backoff": "0s"}}),
        codes.RETRY_CODE,
        [],
        id="7 retryable codes ok",
    ),
    pytest.param(
        route({"retry": {"codes": [500, 418]}}),
        codes.RETRY_CODE,
        [(W, f"{R0}.retry.codes[1]")],
        id="7 418 dropped with a warning",
    ),
    pytest.param(
        route({"retry": {"codes": [421]}}),
        codes.RETRY_CODE,
        [(W, f"{R0}.retry.codes[0]")],
        id="7 421 warns before HAProxy 3.1",
    ),
    pytest.param(route({"retry": {"backoff": "0ms"}}), codes.RETRY_BACKOFF, [], id="7 zero backoff ok"),
    pytest.param(
        route({"retry": {"backoff": "1s500ms"}}),
        codes.RETRY_BACKOFF,
        [(W, f"{R0}.retry.backoff")],
        id="7 non-zero backoff warns",
    ),
    # rule 8: request timeout
    pytest.param(
        route({"timeouts": {"backendRequest": "10s"}}),
        codes.REQUEST_TIMEOUT,
        [],
        id="8 backendRequest alone ok",
    ),
    pytest.param(
        route({"timeouts": {"request": "10s"}}),
        codes.REQUEST_TIMEOUT,
        [(W, f"{R0}.timeouts.request")],
        id="8 request timeout warns",
    ),
    # rule 9: ExternalAuth
    pytest.param(route({"filters": [auth()]}), codes.EXTERNAL_AUTH, [], id="9 supported ExternalAuth ok"),
    pytest.param(
        route({"filters": [auth(protocol="GRPC", grpc={})]}),
        codes.EXTERNAL_AUTH,
        [(W, f"{R0}.filters[0].externalAuth.protocol")],
        id="9 GRPC protocol warns",
    ),
    pytest.param(
        route({"filters": [auth(forwardBody={"maxSize": 1024})]}),
        codes.EXTERNAL_AUTH,
        [(W, f"{R0}.filters[0].externalAuth.forwardBody.maxSize")],
        id="9 forwardBody warns",
    ),
    pytest.param(
        route({"filters": [auth(http={"allowedResponseHeaders": []})]}),
        codes.EXTERNAL_AUTH,
        [(W, f"{R0}.filters[0].externalAuth.http.allowedResponseHeaders")],
        id="9 empty allowedResponseHeaders warns",
    ),
    pytest.param(
        route({"filters": [auth(http={"allowedHeaders": ["X_Key"], "allowedResponseHeaders": ["X-U"]})]}),
        codes.EXTERNAL_AUTH,
        [(W, f"{R0}.filters[0].externalAuth.http.allowedHeaders[0]")],
        id="9 underscore header name warns",
    ),
    pytest.param(
        route({"filters": [auth(http={"allowedResponseHeaders": ["X-U", "Content-Length"]})]}),
        codes.EXTERNAL_AUTH,
        [(W, f"{R0}.filters[0].externalAuth.http.allowedResponseHeaders[1]")],
        id="9 reserved response header warns",
    ),
    pytest.param(
        route({"backendRefs": [backend(filters=[auth()])]}),
        codes.EXTERNAL_AUTH,
        [(W, f"{R0}.backendRefs[0].filters[0]")],
        id="9 ExternalAuth on a backendRef warns",
    ),
    # rule 10: ExtensionRef and backend-level mirrors
    pytest.param(
        route(
            {
                "filters": [
                    {
                        "type": "ExtensionRef",
                        "extensionRef": {
                            "group": "haproxy-haptic.org",
                            "kind": "HAProxyRoutePolicy",
                            "name": "p",
                        },
                    }
                ]
            }
        ),
        codes.EXTENSION_REF,
        [],
        id="10 HAProxyRoutePolicy ok",
    ),
    pytest.param(
        route(
            {
                "filters": [
                    {
                        "type": "ExtensionRef",
                        "extensionRef": {"group": "example.com", "kind": "Magic", "name": "p"},
                    }
                ]
            }
        ),
        codes.EXTENSION_REF,
        [(W, f"{R0}.filters[0].extensionRef.kind")],
        id="10 other ExtensionRef kind warns",
    ),
    pytest.param(
        route({"filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": backend()}}]}),
        codes.BACKEND_FILTER,
        [],
        id="10 rule-level mirror ok",
    ),
    pytest.param(
        route(
            {
                "backendRefs": [
                    backend(filters=[{"type": "RequestMirror", "requestMirror": {"backendRef": backend()}}])
                ]
            }
        ),
        codes.BACKEND_FILTER,
        [(W, f"{R0}.backendRefs[0].filters[0].type")],
        id="10 backend mirror warns",
    ),
    # rule 11: TLSRoute hostnames, TCP port, TLS mode conflict
    pytest.param(
        route({"backendRefs": [backend()]}, kind="TLSRoute", hostnames=["a.example.com"]),
        codes.TLSROUTE_HOSTNAMES,
        [],
        id="11 TLSRoute with hostname ok",
    ),
    pytest.param(
        route({"backendRefs": [backend()]}, kind="TLSRoute"),
        codes.TLSROUTE_HOSTNAMES,
        [(W, "spec.hostnames")],
        id="11 TLSRoute without hostnames warns",
    ),
    pytest.param(
        gateway(listener("pg", "TCP", 5432)), codes.TCP_PORT_TAKEN, [], id="11 TCP on its own port ok"
    ),
    pytest.param(
        gateway(listener("http", "HTTP", 80), listener("raw", "TCP", 443)),
        codes.TCP_PORT_TAKEN,
        [(W, "spec.listeners[1].port")],
        id="11 TCP on the HTTPS port warns",
    ),
    pytest.param(
        gateway(listener("a", "TLS", 8443, "Passthrough"), listener("b", "TLS", 9443, "Terminate")),
        codes.TLS_MODE_CONFLICT,
        [],
        id="11 TLS modes on separate ports ok",
    ),
    pytest.param(
        gateway(listener("a", "TLS", 8443, "Passthrough"), listener("b", "TLS", 8443)),
        codes.TLS_MODE_CONFLICT,
        [(W, "spec.listeners[0].tls.mode"), (W, "spec.listeners[1].tls.mode")],
        id="11 Passthrough and defaulted Terminate on one port warn",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "headers": [{"name": "X#1", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.matches[0].headers[0].name")],
        id="4 header match names are tokens too",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "queryParams": [{"name": "q|x", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.matches[0].queryParams[0].name")],
        id="4 query parameter names are tokens too",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "headers": [{"name": "User-Agent", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [],
        id="4 token match name ok",
    ),
    # rule 4 for the custom Route CRD of seed 000
    pytest.param(crd_route("X-Trace"), codes.HEADER_NAME, [], id="4 Route CRD token header ok"),
    pytest.param(
        crd_route("X Trace"),
        codes.HEADER_NAME,
        [(D, "spec.requestHeaders[0].name")],
        id="4 Route CRD header name denied",
    ),
    pytest.param(
        crd_route("X-Trace", address="10.0.0.1 backup"),
        codes.UNSAFE_VALUE,
        [(D, "spec.backend.address")],
        id="12 whitespace in a Route CRD server address denied",
    ),
    # rule 12: values the renderer cannot represent
    pytest.param(
        route({"backendRefs": [backend("web:8080")]}),
        codes.UNSAFE_VALUE,
        [(D, f"{R0}.backendRefs[0].name")],
        id="12 referenced name outside the identifier alphabet denied",
    ),
    pytest.param(
        route({"backendRefs": [backend("web-1.v2_x")]}), codes.UNSAFE_VALUE, [], id="12 identifier name ok"
    ),
    pytest.param(
        route(
            {
                "matches": [
                    {
                        **prefix(),
                        "headers": [{"type": "RegularExpression", "name": "UA", "value": "Mobile|Android"}],
                    }
                ]
            }
        ),
        codes.REGEX_UNBALANCED,
        [],
        id="3 alternation in a header regex is fine (searched unanchored)",
    ),
    pytest.param(
        route({"matches": [prefix("/api")]}, hostnames=["api.example.com"]),
        codes.UNSAFE_VALUE,
        [],
        id="12 ordinary values ok",
    ),
    pytest.param(
        route(hostnames=["a.example.com\nevil"]),
        codes.UNSAFE_VALUE,
        [(D, "spec.hostnames[0]")],
        id="12 LF in hostname denied",
    ),
    pytest.param(
        route({"matches": [prefix("/a b")]}),
        codes.UNSAFE_VALUE,
        [(D, f"{R0}.matches[0].path.value")],
        id="12 space in path key denied",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "headers": [{"name": "X", "value": "a b"}]}]}),
        codes.UNSAFE_VALUE,
        [],
        id="12 space in a header match value ok",
    ),
    pytest.param(
        route({"filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "a\x00b"}}]}),
        codes.UNSAFE_VALUE,
        [(D, f"{R0}.filters[0].urlRewrite.hostname")],
        id="12 NUL denied",
    ),
    pytest.param(
        btls(hostname="api.example.com\r"),
        codes.UNSAFE_VALUE,
        [(D, "spec.validation.hostname")],
        id="12 CR in BackendTLSPolicy hostname denied",
    ),
]


@pytest.mark.parametrize(("o", "code", "expected"), CASES)
def test_rule(o: dict[str, Any], code: str, expected: list[tuple[str, str]]) -> None:
    assert hits(o, code) == expected


def test_421_is_retryable_from_haproxy_3_1() -> None:
    o = route({"retry": {"codes": [421]}})
    assert hits(o, codes.RETRY_CODE, haproxy_version=(3, 0, 9)) == [(W, f"{R0}.retry.codes[0]")]
    assert hits(o, codes.RETRY_CODE, haproxy_version=(3, 1)) == []
    assert hits(o, codes.RETRY_CODE, haproxy_version=(3, 2, 1)) == []


@pytest.mark.parametrize(
    ("o", "code", "text"),
    [
        pytest.param(
            route(sp(sessionName="a b")),
            codes.SESSION_NAME,
            '"a b" has a space; allowed: letters, digits and !$&*+.^_~-',
            id="session name",
        ),
        pytest.param(
            route({"filters": [hdr(set=[{"name": "X:Bad", "value": "v"}])]}),
            codes.HEADER_NAME,
            "\"X:Bad\" has ':'; allowed: letters, digits and !$&*+.^_~-",
            id="header name",
        ),
        pytest.param(
            route({"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 305}}]}),
            codes.REDIRECT_STATUS,
            "Unsupported value: 305: supported values: 301, 302, 303, 307, 308",
            id="redirect code",
        ),
    ],
)
def test_message_names_the_value_and_what_is_allowed(o: dict[str, Any], code: str, text: str) -> None:
    assert [f.message for f in run(o) if f.code == code] == [text]


@pytest.mark.parametrize("code", [codes.SAN_SEVERAL, codes.SAN_URI, codes.SAN_MISMATCH])
def test_each_san_message_says_haproxy_verifies_via_sni(code: str) -> None:
    o = btls(
        subjectAltNames=[{"type": "URI", "uri": "spiffe://a"}, {"type": "Hostname", "hostname": "b.example"}]
    )
    messages = [f.message for f in run(o) if f.code == code]
    assert len(messages) == 1
    assert "via SNI" in messages[0]


def test_a_specific_denial_hides_the_generic_unsafe_finding_on_the_same_field() -> None:
    o = route({"filters": [hdr(set=[{"name": "X Y", "value": "v"}])]})
    found = [(f.code, f.field) for f in run(o) if f.severity == "deny"]
    assert found == [(codes.HEADER_NAME, f"{R0}.filters[0].requestHeaderModifier.set[0].name")]


@pytest.mark.parametrize(
    ("name", "namespace", "fields"),
    [
        pytest.param("web-1.example", "team-a", [], id="DNS names ok"),
        pytest.param("Web_1", "team-a", ["metadata.name"], id="uppercase name denied"),
        pytest.param("web", "team.a", ["metadata.namespace"], id="dotted namespace denied"),
    ],
)
def test_object_names(name: str, namespace: str, fields: list[str]) -> None:
    o = obj("HTTPRoute", {}, name=name, namespace=namespace)
    assert [f for s, f in hits(o, codes.OBJECT_NAME) if s == D] == fields
