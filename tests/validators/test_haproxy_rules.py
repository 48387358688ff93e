"""HAProxy admission rules 1 to 5 of seed 004 (issue 5 section 2): allowed and denied objects.

Each case names the rule's code and the exact (severity, field path) findings expected for that code;
an empty list means the object is allowed by that rule.
"""

from __future__ import annotations

from typing import Any

import pytest
from validatorbuilders import (
    R0,
    backend,
    btls,
    crd_route,
    hdr,
    hits,
    prefix,
    regex,
    rewrite,
    route,
    sp,
)

from validators import codes

D, W = "deny", "warn"

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
        route({"backendRefs": [backend(filters=[hdr(add=[{"name": "X@", "value": "v"}])])]}),
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
    pytest.param(
        route({"matches": [{**prefix(), "headers": [{"name": "X:1", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.matches[0].headers[0].name")],
        id="4 header match names are tokens too",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "headers": [{"name": "X#1|'`%", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [],
        id="4 header match names may hold every token character",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "queryParams": [{"name": "q:x", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.matches[0].queryParams[0].name")],
        id="4 query parameter names are tokens too",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "queryParams": [{"name": "q#x", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [(D, f"{R0}.matches[0].queryParams[0].name")],
        id="4 a query parameter name urlp() can never match",
    ),
    pytest.param(
        route({"matches": [{**prefix(), "queryParams": [{"name": "q|x'`", "value": "v"}]}]}),
        codes.HEADER_NAME,
        [],
        id="4 query parameter names with other token characters ok",
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
]


@pytest.mark.parametrize(("o", "code", "expected"), CASES)
def test_rule(o: dict[str, Any], code: str, expected: list[tuple[str, str]]) -> None:
    assert hits(o, code) == expected
