"""Stable rule codes, their default severity and one line each: the table behind ``routegate rules``.

Codes never change meaning once released. RG00xx are schema and object-shape checks, RG01xx the
HAProxy admission rules of seed 004, RG03xx CEL (their table lives in ``validators.cel.celchecks``),
RG04xx findings of the render step (``haproxy_check``; listed here so that enforcement and the table
know them), RG05xx cross-object findings (``validators.crossobject.crossobjects``), RG08xx verdicts of the gate itself
(``webhook.gate.gates``: haproxy -c rejected the config, the renderer refused a value), which no
enforcement setting can change.
"""

from __future__ import annotations

from dataclasses import dataclass

from validators.findings import Severity


@dataclass(frozen=True, slots=True)
class RuleInfo:
    code: str
    default_severity: Severity
    summary: str
    name: str = ""  # the event reason HAPTIC uses, when there is one
    configurable: bool = True  # False: a verdict of the gate itself, not a rule enforcement can change


DENY, WARN = Severity.DENY, Severity.WARN

NO_SCHEMA = "RG0001"
SCHEMA_INVALID = "RG0002"
UNKNOWN_FIELD = "RG0003"
DUPLICATE_ITEM = "RG0004"
SCHEMA_UNCHECKED = "RG0005"
OBJECT_NAME = "RG0006"
VALIDATION_BUDGET = "RG0007"

SESSION_NAME = "RG0101"
SAN_SEVERAL = "RG0102"
SAN_URI = "RG0103"
SAN_MISMATCH = "RG0104"
TLS_NO_TRUST = "RG0105"
REGEX_UNBALANCED = "RG0106"
HEADER_NAME = "RG0107"
HEADER_VALUE = "RG0108"
PREFIX_REWRITE = "RG0109"
REDIRECT_STATUS = "RG0110"
RETRY_CODE = "RG0111"
RETRY_BACKOFF = "RG0112"
REQUEST_TIMEOUT = "RG0113"
EXTERNAL_AUTH = "RG0114"
EXTENSION_REF = "RG0115"
BACKEND_FILTER = "RG0116"
TLSROUTE_HOSTNAMES = "RG0117"
TCP_PORT_TAKEN = "RG0118"
TLS_MODE_CONFLICT = "RG0119"
UNSAFE_VALUE = "RG0120"
RULE_MATCH_HOSTNAMES = "RG0121"
TIMEOUT_TOO_LONG = "RG0122"
REQUEST_MIRROR = "RG0123"
ROUTE_POLICY = "RG0124"
TLS_OPTION = "RG0125"
POD_PORT_RESERVED = "RG0126"
ADDRESS_MOVED = "RG0127"
PASSTHROUGH_OVER_HTTPS = "RG0128"
HTTPS_OVER_PASSTHROUGH = "RG0129"
GATEWAY_REFUSED = "RG0130"

RENDER_UNATTACHED = "RG0401"
RENDER_BACKEND_UNSERVED = "RG0402"
RENDER_PLACEHOLDER_CERT = "RG0405"
RENDER_PROTOCOL_CLASH = "RG0406"
RENDER_SERVERS_CAPPED = "RG0407"
RENDER_ROUTE_TOO_LARGE = "RG0408"
RENDER_CERT_VALIDITY = "RG0409"
RENDER_CLIENT_CA = "RG0410"

HAPROXY_REJECTED = "RG0800"
RENDER_REFUSED = "RG0801"

INFOS: tuple[RuleInfo, ...] = (
    RuleInfo(NO_SCHEMA, WARN, "No CRD schema is known for the kind/version; schema checks skipped."),
    RuleInfo(SCHEMA_INVALID, DENY,
             "The object violates its CRD OpenAPI schema (type, enum, range, pattern, ...)."),
    RuleInfo(UNKNOWN_FIELD, WARN,
             "A field the schema does not declare; the API server prunes it (deny with strict)."),
    RuleInfo(DUPLICATE_ITEM, DENY, "Duplicate entry in an x-kubernetes-list-type set or map list."),
    RuleInfo(SCHEMA_UNCHECKED, WARN,
             "Part of the schema could not be checked (untranslatable pattern, CEL error)."),
    RuleInfo(OBJECT_NAME, DENY, "metadata.name / metadata.namespace is not a valid Kubernetes name."),
    RuleInfo(VALIDATION_BUDGET, DENY,
             "Validating the object took more than its CPU budget (validators.budgets); no further checks ran.",
             configurable=False),
    RuleInfo(SESSION_NAME, DENY, "sessionPersistence cookie/header name has characters other than a token's.",
             "InvalidSessionPersistence"),
    RuleInfo(SAN_SEVERAL, DENY,
             "BackendTLSPolicy lists several subjectAltNames; HAProxy verifies one name via SNI."),
    RuleInfo(SAN_URI, DENY, "BackendTLSPolicy subjectAltNames URI entry; HAProxy verifies via SNI only."),
    RuleInfo(SAN_MISMATCH, DENY,
             "BackendTLSPolicy subjectAltNames Hostname differs from validation.hostname."),
    RuleInfo(TLS_NO_TRUST, DENY,
             "BackendTLSPolicy without caCertificateRefs or wellKnownCACertificates: System."),
    RuleInfo(REGEX_UNBALANCED, DENY,
             "A RegularExpression outside the PCRE subset routegate can wrap (validators/pcre.py), "
             "or a top-level '|' in a path."),
    RuleInfo(HEADER_NAME, DENY, "Header name (modifier, match, query parameter) is not a token."),
    RuleInfo(HEADER_VALUE, DENY, "Header modifier value contains a control character."),
    RuleInfo(PREFIX_REWRITE, DENY,
             "ReplacePrefixMatch without a PathPrefix match (prefix length undefined)."),
    RuleInfo(REDIRECT_STATUS, DENY, "RequestRedirect statusCode outside 301, 302, 303, 307, 308."),
    RuleInfo(RETRY_CODE, WARN, "retry.codes entry HAProxy cannot retry on; the code is dropped.",
             "RetryCodeUnsupported"),
    RuleInfo(RETRY_BACKOFF, WARN, "Non-zero retry.backoff; HAProxy retries without waiting.",
             "RetryBackoffUnsupported"),
    RuleInfo(REQUEST_TIMEOUT, WARN, "timeouts.request is ignored; only timeouts.backendRequest is applied."),
    RuleInfo(EXTERNAL_AUTH, WARN, "ExternalAuth setting the gateway cannot enforce; the rule answers 500."),
    RuleInfo(EXTENSION_REF, WARN,
             "ExtensionRef kind other than HAProxyRoutePolicy or SSLPassthrough is ignored."),
    RuleInfo(BACKEND_FILTER, WARN,
             "RequestMirror or ExtensionRef on a backendRef is ignored (rule level only)."),
    RuleInfo(TLSROUTE_HOSTNAMES, WARN, "TLSRoute without hostnames attaches nowhere (routing is by SNI)."),
    RuleInfo(TCP_PORT_TAKEN, WARN, "TCP listener on the HTTP/HTTPS port is dropped."),
    RuleInfo(TLS_MODE_CONFLICT, WARN,
             "Passthrough and Terminate TLS listeners on one port with overlapping hostnames: no route attaches."),
    RuleInfo(UNSAFE_VALUE, DENY,
             "A value the renderer cannot write safely (control characters, whitespace in a key)."),
    RuleInfo(RULE_MATCH_HOSTNAMES, DENY,
             "A rule's matches x the route's hostnames exceed limits.matchesTimesHostnamesPerRule (512)."),
    RuleInfo(TIMEOUT_TOO_LONG, WARN,
             "timeouts.backendRequest above HAProxy's longest timeout (2147483647 ms); the longest is used."),
    RuleInfo(REQUEST_MIRROR, WARN,
             "RequestMirror is not supported (HAProxy sends no copies without an SPOE agent); rules serve without it.",
             "RequestMirrorUnsupported"),
    RuleInfo(ROUTE_POLICY, WARN, "ExtensionRef HAProxyRoutePolicy is not rendered; the rule answers 500.",
             "RoutePolicyUnsupported"),
    RuleInfo(TLS_OPTION, WARN, "A listener tls.options entry routegate cannot apply; it is not applied.",
             "TLSOptionUnsupported"),
    RuleInfo(POD_PORT_RESERVED, DENY,
             "A listener port within the pod-port range of isolated Gateways (isolation_pod_port_base/_span)."),
    RuleInfo(ADDRESS_MOVED, DENY,
             "A Gateway/ListenerSet change moves another Gateway's listener address (its port or pod port)."),
    RuleInfo(PASSTHROUGH_OVER_HTTPS, DENY,
             "A passthrough route names a host a more specific HTTPS listener on the same port owns."),
    RuleInfo(HTTPS_OVER_PASSTHROUGH, DENY,
             "A Gateway/ListenerSet change's HTTPS listener takes passthrough names from another owner's routes."),
    RuleInfo(GATEWAY_REFUSED, WARN,
             "A Gateway with an infrastructure.parametersRef or an unsupported address type: not accepted, not served.",
             "GatewayRefused"),
    RuleInfo(RENDER_UNATTACHED, WARN,
             "Render: the route attaches to no listener (checked behind a synthetic listener)."),
    RuleInfo(RENDER_BACKEND_UNSERVED, WARN,
             "Retired: an unresolved backendRef is reported once, as RG0501-RG0503."),
    RuleInfo(RENDER_PLACEHOLDER_CERT, WARN, "Render: a listener uses a placeholder certificate."),
    RuleInfo(RENDER_PROTOCOL_CLASH, WARN, "Render: listener protocols clash on a port."),
    RuleInfo(RENDER_SERVERS_CAPPED, WARN,
             "Render: a Service has more ready endpoints than limits.serversPerBackend (500); the first are used."),
    RuleInfo(RENDER_ROUTE_TOO_LARGE, DENY,
             "Render: the route renders more lines and map entries than limits.linesPerRoute (4000)."),
    RuleInfo(RENDER_CERT_VALIDITY, WARN,
             "Render: a listener certificate is expired or not yet valid; clients will reject it."),
    RuleInfo(RENDER_CLIENT_CA, WARN,
             "Render: a frontend client-certificate CA is unusable; without any usable CA the port accepts no "
             "traffic."),
    RuleInfo(HAPROXY_REJECTED, DENY, "haproxy -c rejects the rendered configuration (new alerts only).",
             configurable=False),
    RuleInfo(RENDER_REFUSED, DENY, "The renderer refused to emit a value it cannot represent safely.",
             configurable=False),
)
