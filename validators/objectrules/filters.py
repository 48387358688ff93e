"""Route filters HAProxy can or cannot express (seed 004, rules 4, 5, 6, 9, 10).

Header names become words in ``http-request set-header`` lines and map keys, so they must be HTTP
tokens (rule 4; the renderer quotes the token characters HAProxy's parsers would read, so every token is
honoured). Query parameter names are matched undecoded by ``urlp()``: ``#`` (never sent unencoded) and
``%`` (the start of an escape) can never match as written.
ReplacePrefixMatch needs a known prefix length (rule 5). Redirect codes are the five HAProxy's
``redirect`` accepts (rule 6). ExternalAuth, ExtensionRef and backend-level mirrors have documented gaps
(rules 9, 10) that are warnings, since the route still does something defined.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from validators import codes
from validators.contexts import Context
from validators.findings import Finding, Severity
from validators.objectrules.traversals import FilterAt, filters_of, matches_of, path_type, rules_of
from validators.objects import Obj, as_list, as_map
from validators.safety import describe_char, first_control
from validators.texts import HTTP_TOKEN_ALLOWED, HTTP_TOKEN_PUNCTUATION, quote, token_problem

REDIRECT_CODES = (301, 302, 303, 307, 308)
SUPPORTED_EXTENSIONS = ("HAProxyRoutePolicy", "SSLPassthrough")
#: Response headers ExternalAuth may not copy (seed 004, "HAPTIC can't enforce the following settings").
RESERVED_AUTH_HEADERS = frozenset(
    h.lower()
    for h in (
        "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "TE", "Trailer",
        "Upgrade", "Proxy-Connection", "Allowed", "Status-Code", "Redirect-URL", "Error",
    )
)
_AUTH_500 = "the rule answers 500"


def header_modifiers(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 4: set/add/remove header names are tokens; values carry no control characters."""
    for flt in filters_of(obj):
        if flt.type not in ("RequestHeaderModifier", "ResponseHeaderModifier"):
            continue
        at = flt.body_path  # a property building a tuple: once per filter
        for op in ("set", "add"):
            for k, entry in enumerate(as_list(flt.body.get(op))):
                entry = as_map(entry)
                name = entry.get("name")
                if (problem := _name_problem(name)) is not None:
                    yield _header_name_finding(name, problem, (*at, op, k, "name"))
                value = entry.get("value")
                if isinstance(value, str):
                    bad = first_control(value)
                    if bad is not None:
                        yield Finding(
                            codes.HEADER_VALUE,
                            f"{quote(value)} has {describe_char(bad)}; header values may not contain "
                            "control characters",
                            (*at, op, k, "value"),
                        )
        for k, name in enumerate(as_list(flt.body.get("remove"))):
            if (problem := _name_problem(name)) is not None:
                yield _header_name_finding(name, problem, (*at, "remove", k))


def _name_problem(name: Any) -> str | None:
    """Why a header name is not an HTTP token (None when it is one, or not a string: the schema reports
    that). Judged before its finding's path is built: nearly every name is fine."""
    if isinstance(name, str):
        return token_problem(name, punctuation=HTTP_TOKEN_PUNCTUATION) or None
    return None


#: Token characters a query parameter name cannot hold for ``urlp()``, which compares names undecoded.
_QUERY_UNMATCHABLE = {
    "#": "a client never sends '#' in a query (it starts the fragment; it arrives as %23), and HAProxy's "
         "urlp() compares names undecoded, so this name could never match",
    "%": "'%' starts a percent-escape in a query, and HAProxy's urlp() compares names undecoded, so this "
         "name could never match as written",
}


def _query_unmatchable(name: Any) -> str | None:
    """Why ``urlp()`` can never match a query parameter name that is an HTTP token (None: it can)."""
    if isinstance(name, str):
        bad = next((ch for ch in _QUERY_UNMATCHABLE if ch in name), None)
        if bad is not None:
            return f"has {bad!r}: {_QUERY_UNMATCHABLE[bad]}"
    return None


def _header_name_finding(name: Any, problem: str, path: tuple[str | int, ...], *, allowed: bool = True) -> Finding:
    """``allowed``: end with the characters a token may hold (not when the name is a token already)."""
    suffix = f"; allowed: {HTTP_TOKEN_ALLOWED}" if allowed else ""
    return Finding(codes.HEADER_NAME, f"{quote(name)} {problem}{suffix}", path)


def _header_name(name: Any, path: tuple[str | int, ...]) -> Iterator[Finding]:
    problem = _name_problem(name)
    if problem is not None:
        yield _header_name_finding(name, problem, path)


def prefix_rewrites(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 5: ReplacePrefixMatch only with PathPrefix matches (else the prefix length is undefined)."""
    rules = dict(rules_of(obj))
    for flt in filters_of(obj):
        if flt.type not in ("URLRewrite", "RequestRedirect"):
            continue
        path = as_map(flt.body.get("path"))
        if path.get("type") != "ReplacePrefixMatch":
            continue
        rule = rules.get(("spec", "rules", flt.rule), {})
        for m, match in enumerate(matches_of(rule)):
            ptype = path_type(match)
            if ptype == "PathPrefix":
                continue
            why = ("the replaced prefix length is undefined for a regular expression"
                   if ptype == "RegularExpression" else "only a PathPrefix match has a prefix to replace")
            yield Finding(
                codes.PREFIX_REWRITE,
                f"ReplacePrefixMatch needs PathPrefix matches, but matches[{m}] is {quote(ptype)}: {why}",
                (*flt.body_path, "path", "replacePrefixMatch"),
            )


def redirect_codes(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 6: RequestRedirect statusCode is one HAProxy's redirect supports."""
    for flt in filters_of(obj):
        code = flt.body.get("statusCode") if flt.type == "RequestRedirect" else None
        if code is not None and code not in REDIRECT_CODES:
            yield Finding(
                codes.REDIRECT_STATUS,
                f"Unsupported value: {quote(code)}: supported values: "
                + ", ".join(str(c) for c in REDIRECT_CODES),
                (*flt.body_path, "statusCode"),
            )


def external_auth(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 9: ExternalAuth settings the SPOA plugin cannot enforce make the rule answer 500."""
    for flt in filters_of(obj):
        if flt.type != "ExternalAuth":
            continue
        if flt.backend is not None:
            yield _auth(f"ExternalAuth on a backendRef cannot be enforced; move it to the rule's filters; "
                        f"{_AUTH_500}", flt.path)
            continue
        yield from _auth_settings(flt)


def _auth(message: str, path: tuple[str | int, ...]) -> Finding:
    return Finding(codes.EXTERNAL_AUTH, message, path, Severity.WARN)


def _auth_settings(flt: FilterAt) -> Iterator[Finding]:
    body, at = flt.body, flt.body_path
    if body.get("protocol") == "GRPC":
        yield _auth(f"protocol \"GRPC\" is not supported; use an HTTP authorization service; {_AUTH_500}",
                    (*at, "protocol"))
    max_size = as_map(body.get("forwardBody")).get("maxSize")
    if isinstance(max_size, int) and max_size > 0:
        yield _auth(f"forwardBody.maxSize {max_size} cannot be honoured: request bodies are not forwarded; "
                    f"{_AUTH_500}", (*at, "forwardBody", "maxSize"))
    if body.get("protocol", "HTTP") != "HTTP":
        return
    http = as_map(body.get("http"))
    response_headers = as_list(http.get("allowedResponseHeaders"))
    if not response_headers:
        yield _auth("empty allowedResponseHeaders: HAProxy needs each header name to copy; list them; "
                    f"{_AUTH_500}", (*at, "http", "allowedResponseHeaders"))
    for field in ("allowedHeaders", "allowedResponseHeaders"):
        for k, name in enumerate(as_list(http.get(field))):
            yield from _auth_header(name, field, (*at, "http", field, k))


def _auth_header(name: Any, field: str, path: tuple[str | int, ...]) -> Iterator[Finding]:
    if not isinstance(name, str):
        return
    problem = token_problem(name, punctuation="-")
    if problem:
        yield _auth(f"{quote(name)} {problem}; allowed: letters, digits and -; {_AUTH_500}", path)
    elif field == "allowedResponseHeaders" and name.lower() in RESERVED_AUTH_HEADERS:
        yield _auth(f"{quote(name)} is a reserved header the gateway will not copy; remove it; {_AUTH_500}",
                    path)


def extension_refs(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 10: only HAProxyRoutePolicy and SSLPassthrough extensions exist; the rest is ignored."""
    for flt in filters_of(obj):
        if flt.type != "ExtensionRef" or flt.backend is not None:
            continue
        kind = flt.body.get("kind")
        if kind not in SUPPORTED_EXTENSIONS:
            yield Finding(
                codes.EXTENSION_REF,
                f"Unsupported value: {quote(kind)}: supported values: "
                + ", ".join(quote(k) for k in SUPPORTED_EXTENSIONS) + "; the filter is ignored",
                (*flt.body_path, "kind"),
                Severity.WARN,
            )


def backend_filters(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 10: RequestMirror and ExtensionRef apply at the rule level only."""
    for flt in filters_of(obj):
        if flt.backend is not None and flt.type in ("RequestMirror", "ExtensionRef"):
            yield Finding(
                codes.BACKEND_FILTER,
                f"{flt.type} on a backendRef is ignored; it applies at the rule level only; "
                "supported here: RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite",
                (*flt.path, "type"),
                Severity.WARN,
            )




def route_crd_headers(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 4 for the custom Route CRD (seed 000): ``spec.requestHeaders[].name`` are tokens.

    Values need no rule: the renderer URL-encodes them into the map (queryEscape).
    """
    for k, header in enumerate(as_list(as_map(obj.get("spec")).get("requestHeaders"))):
        yield from _header_name(as_map(header).get("name"), ("spec", "requestHeaders", k, "name"))


def match_names(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Header and query parameter names of matches become bare words (``req.hdr(<name>)``,
    ``urlp(<name>)``) in ACLs, so they are HTTP tokens too, as the schema wants (quoted where HAProxy
    needs it); a query parameter name is also refused what ``urlp()`` can never match."""
    for rule_path, rule in rules_of(obj):
        for m, match in enumerate(as_list(rule.get("matches"))):
            for field in ("headers", "queryParams"):
                for k, entry in enumerate(as_list(as_map(match).get(field))):
                    name = as_map(entry).get("name")
                    problem, allowed = _name_problem(name), True
                    if problem is None and field == "queryParams":
                        problem, allowed = _query_unmatchable(name), False
                    if problem is not None:
                        yield _header_name_finding(name, problem, (*rule_path, "matches", m, field, k, "name"),
                                                   allowed=allowed)
