"""HAProxy admission rules 6 to 12 of seed 004 (issue 5 section 2): allowed and denied objects.

Each case names the rule's code and the exact (severity, field path) findings expected for that code;
an empty list means the object is allowed by that rule.
"""

from __future__ import annotations

from typing import Any

import pytest
from validatorbuilders import (
    R0,
    auth,
    backend,
    btls,
    crd_route,
    gateway,
    hdr,
    hits,
    listener,
    obj,
    prefix,
    route,
    run,
    sp,
)

from validators import codes

D, W = "deny", "warn"

CASES = [
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
        route({"retry": {"codes": [500, 503, 425], "backoff": "0s"}}),
        codes.RETRY_CODE,
        [],
        id="7 retryable codes ok",
    ),
    pytest.param(  # 2.8 refuses `retry-on 429` ("unknown keyword"): dropped with a warning, not rendered
        route({"retry": {"codes": [503, 429]}}),
        codes.RETRY_CODE,
        [("warn", "spec.rules[0].retry.codes[1]")],
        id="7 429 needs 3.1",
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
        gateway(listener("a", "TLS", 8443, "Passthrough") | {"hostname": "db.example.com"},
                listener("b", "TLS", 8443) | {"hostname": "*.apps.example.com"}),
        codes.TLS_MODE_CONFLICT,
        [],
        id="11 both TLS modes on one port with distinct hostnames split by SNI",
    ),
    pytest.param(
        gateway(listener("a", "TLS", 8443, "Passthrough") | {"hostname": "*.example.com"},
                listener("b", "TLS", 8443) | {"hostname": "api.example.com"}),
        codes.TLS_MODE_CONFLICT,
        [(W, "spec.listeners[0].tls.mode"), (W, "spec.listeners[1].tls.mode")],
        id="11 a wildcard covering the other mode's hostname warns",
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
            "\"X:Bad\" has ':'; allowed: letters, digits and !#$%&'*+.^_`|~-",
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
