"""HTTPRoute/GRPCRoute filters and rule policies -> map entries, static per-rule lines and profile lines.

Map-driven (a changed value is a map update): request/response header modifiers (gw-reqhdr.map,
gw-reshdr.map, values URL-encoded), timeouts (gw-timeouts.map), external auth
targets (gw-extauth.map). Static per-rule lines (structural, as seed 004 lists them): redirects,
rewrites (HAProxy 2.8 has no variable offset for ``bytes``), CORS. Retry and session persistence are in
``rulepolicies``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from haproxy_check import escaping
from haproxy_check.escaping import FieldError, guard
from haproxy_check.render.http import redirects
from haproxy_check.render.http.httpmodels import FAIL, Cors, HttpModel, RuleModel
from validators.crossobject.backendrefs import INVALID_KIND, REF_NOT_PERMITTED, BackendRef
from validators.findings import Finding, PathPart, Severity
from validators.objectrules import unhonoured
from validators.objects import Obj, Ref, as_list, dig, ref_of

if TYPE_CHECKING:  # rendering imports this module: the settings type is for the checker only
    from haproxy_check.render.rendersettings import RenderSettings

Mark = Callable[[Ref, Sequence[PathPart]], str]

REQUEST_TIMEOUT, EXTERNAL_AUTH, EXTENSION_REF = "RG0113", "RG0114", "RG0115"
AUTH_FORBIDDEN = frozenset(h.lower() for h in (
    "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "TE", "Trailer", "Upgrade",
    "Proxy-Connection", "Allowed", "Status-Code", "Redirect-URL", "Error"))
_DURATION = re.compile(r"^(?:(\d{1,5})(h|ms|m|s))+$")
_DURATION_PART = re.compile(r"(\d{1,5})(h|ms|m|s)")
_AUTH_HEADER = re.compile(r"[A-Za-z0-9-]+\Z")
MAX_TIMEOUT_MS = 2147483647


def duration_ms(text: Any) -> int | None:
    if not isinstance(text, str) or not _DURATION.match(text):
        return None
    unit = {"h": 3600000, "m": 60000, "s": 1000, "ms": 1}
    return sum(int(n) * unit[u] for n, u in _DURATION_PART.findall(text))


def _warn(findings: list[Finding], ref: Ref, code: str, message: str, path: tuple[PathPart, ...],
          *, local: bool = False) -> None:
    """Record a render-time warning. ``local`` ones depend on the object alone: the validators
    (validators.objectrules.filters / validators.objectrules.policies) already report those for the object
    under review, so the render only applies their effect and does not repeat the message."""
    if local:
        return
    findings.append(Finding(code, message, path, Severity.WARN, subject=True, about=str(ref)))


# ---------------------------------------------------------------- filters


def _header_mods(model: HttpModel, key: str, spec: Any, path: tuple[PathPart, ...], response: bool,
                 backend_level: bool, mark: str) -> None:
    mapname = "gw-reshdr.map" if response else "gw-reqhdr.map"
    ops = (model.headers.response_be if backend_level else model.headers.response) if response else (
        model.headers.request_be if backend_level else model.headers.request)
    for op in ("set", "add"):
        for k, item in enumerate(as_list(dig(spec, op))):
            # ``guard``, inline, the field paths made only for an error: one pair per header of every filter
            try:
                lname = escaping.http_token(str(dig(item, "name", default=""))).lower()
            except escaping.Unsafe as exc:
                raise FieldError(str(exc), (*path, op, k, "name")) from None
            try:
                value = escaping.url_value(str(dig(item, "value", default="")))
            except escaping.Unsafe as exc:
                raise FieldError(str(exc), (*path, op, k, "value")) from None
            model.add(mapname, f"{key}|{op}|{escaping.header_key(lname)} {value}{mark}")
            ops.add((op, lname))
    for k, item in enumerate(as_list(dig(spec, "remove"))):
        lname = guard((*path, "remove", k), escaping.http_token, str(item)).lower()
        model.add(mapname, f"{key}|remove|{escaping.header_key(lname)} 1{mark}")
        ops.add(("remove", lname))


def _token_list(items: Any, path: tuple[PathPart, ...]) -> str:
    names = [guard((*path, k), escaping.header_name if n != "*" else escaping.map_value, str(n))
             for k, n in enumerate(as_list(items)) for n in [str(n)]]
    return escaping.lf_quote(", ".join(names)) if names else ""


def _cors(spec: Any, path: tuple[PathPart, ...], mark: str) -> Cors:
    exact: list[str] = []
    regexes: list[str] = []
    any_origin = False
    for k, origin in enumerate(as_list(dig(spec, "allowOrigins"))):
        o = guard((*path, "allowOrigins", k), escaping.map_key, str(origin))
        if o == "*":
            any_origin = True
        elif "://*." in o or o.startswith("*."):
            scheme, _, rest = o.rpartition("*.")
            regexes.append(escaping.quote("^" + re.escape(scheme) + r"[^/]+\." + re.escape(rest) + "$"))
        else:
            exact.append(escaping.quote(o))
    max_age = dig(spec, "maxAge")
    return Cors(tuple(exact), tuple(regexes), any_origin,
                _token_list(dig(spec, "allowMethods"), (*path, "allowMethods")),
                _token_list(dig(spec, "allowHeaders"), (*path, "allowHeaders")),
                _token_list(dig(spec, "exposeHeaders"), (*path, "exposeHeaders")),
                dig(spec, "allowCredentials") is True, max_age if isinstance(max_age, int) else None, mark)


def _external_auth(model: HttpModel, rm: RuleModel, route: Obj, spec: Any, path: tuple[PathPart, ...],
                   findings: list[Finding], mark: str, backend_ref: Callable[[Any, tuple[PathPart, ...]], BackendRef],
                   settings: RenderSettings | None) -> None:
    ref = ref_of(route)
    problem, local = "", True  # local: the object alone shows it (validators.objectrules.filters reports it)
    if dig(spec, "protocol") != "HTTP":
        problem = f"protocol {dig(spec, 'protocol')!r} is not supported; use HTTP"
    elif (dig(spec, "forwardBody", "maxSize") or 0) > 0:
        problem = "forwardBody is not supported"
    elif not as_list(dig(spec, "http", "allowedResponseHeaders")):
        problem = "http.allowedResponseHeaders is empty; list the headers to copy"
    headers: list[str] = []
    if not problem:
        for k, h in enumerate(as_list(dig(spec, "http", "allowedResponseHeaders"))):
            if not isinstance(h, str) or not _AUTH_HEADER.match(h):
                problem = f"allowedResponseHeaders[{k}] {h!r} has characters other than letters, digits and -"
            elif h.lower() in AUTH_FORBIDDEN:
                problem = f"allowedResponseHeaders[{k}] {h!r} cannot be copied"
            else:
                headers.append(h.lower())
    # resolved by validators.crossobject.backendrefs, as the rules resolve it
    bref = backend_ref(dig(spec, "backendRef"), (*path, "backendRef"))
    svc_ns, svc, port, service = bref.namespace, bref.name, bref.port, bref.service
    if not problem:
        local = False
        if settings is not None and not settings.external_auth:
            problem = "the external-auth plugin is disabled (enable spoaHub.plugins.external-auth)"
        elif bref.reason == INVALID_KIND:
            problem = f"{bref.message} ({INVALID_KIND})"
        elif bref.reason == REF_NOT_PERMITTED:
            problem = f"no ReferenceGrant permits the reference to Service {svc_ns}/{svc} (RefNotPermitted)"
        elif service is None:
            problem = f"Service {svc_ns}/{svc} does not exist (BackendNotFound)"
        elif port is None:
            problem = "backendRef.port is required"
    model.uses.add("auth")
    if problem:
        _warn(findings, ref, EXTERNAL_AUTH, f"ExternalAuth cannot be enforced: {problem}; the rule answers 500",
              path, local=local)
        model.add("gw-extauth.map", f"{rm.rid} {FAIL}{mark}")
        return
    https = any(dig(p, "port") == port and dig(p, "appProtocol") == "https"
                for p in as_list(dig(service, "spec", "ports")))
    if not https and settings is not None and not settings.external_auth_plaintext:
        _warn(findings, ref, EXTERNAL_AUTH, "ExternalAuth cannot be enforced: plain-HTTP authorization Service "
              "without allow_plaintext; the rule answers 500", path)
        model.add("gw-extauth.map", f"{rm.rid} {FAIL}{mark}")
        return
    auth_path = dig(spec, "http", "path") or ""
    if auth_path:  # "@evil.example/x" or ".evil.example" after the port would move the URL to another host
        guard((*path, "http", "path"), escaping.path, auth_path)
    url = f"{'https' if https else 'http'}://{svc}.{svc_ns}.svc.cluster.local:{port}{auth_path}"
    model.add("gw-extauth.map", f"{rm.rid} {guard((*path, 'http', 'path'), escaping.url_value, url)}{mark}")
    allowed = [guard((*path, "http", "allowedHeaders", k), escaping.header_name, str(h)).lower()
               for k, h in enumerate(as_list(dig(spec, "http", "allowedHeaders")))]
    forwarded = escaping.url_value(",".join(["host", "authorization", *allowed]))
    model.add("gw-extauth-headers.map", f"{rm.rid} {forwarded}{mark}")
    model.auth_headers.update(headers)


# ---------------------------------------------------------------- per rule / per backendRef


def _map_filter(fn: Callable[..., None], model: HttpModel, key: str, f: Any, field: str,
                path: tuple[PathPart, ...], plens: set[int], mark: str) -> None:
    fn(model, key, dig(f, field), (*path, field), plens, mark)


class Resolver:
    """What filters need from the route compiler: backends of auth targets and state lookups."""

    def __init__(self, *, backend_ref: Callable[[Any, tuple[PathPart, ...]], BackendRef],
                 settings: RenderSettings | None) -> None:
        self.backend_ref, self.settings = backend_ref, settings


def rule_filters(model: HttpModel, rm: RuleModel, route: Obj, rule: Any, i: int, plens: set[int],
                 findings: list[Finding], mark: Mark, res: Resolver, *, ref: Ref | None = None) -> None:
    """``ref``: the route's (``ref_of(route)``), when the caller has it already."""
    ref = ref if ref is not None else ref_of(route)
    base: tuple[PathPart, ...] = ("spec", "rules", i)
    for k, f in enumerate(as_list(dig(rule, "filters"))):
        path = (*base, "filters", k)
        ftype = dig(f, "type")
        if ftype == "RequestMirror":
            continue  # the rule serves as it would without it (validators.objectrules.unhonoured.mirrored_rules)
        m = mark(ref, path)
        rm.first_filter = rm.first_filter or str(ftype)
        if ftype == "RequestHeaderModifier":
            _header_mods(model, rm.rid, dig(f, "requestHeaderModifier"), (*path, "requestHeaderModifier"), False,
                         False, m)
        elif ftype == "ResponseHeaderModifier":
            _header_mods(model, rm.rid, dig(f, "responseHeaderModifier"), (*path, "responseHeaderModifier"), True,
                         False, m)
        elif ftype == "RequestRedirect" and ref.kind == "HTTPRoute":
            _map_filter(redirects.redirect, model, rm.rid, f, "requestRedirect", path, plens, m)
        elif ftype == "URLRewrite" and ref.kind == "HTTPRoute":
            _map_filter(redirects.rewrite, model, rm.rid, f, "urlRewrite", path, plens, m)
        elif ftype == "CORS" and ref.kind == "HTTPRoute":
            rm.cors = _cors(dig(f, "cors"), (*path, "cors"), m)
            model.uses.add("cors")
        elif ftype == "ExternalAuth" and ref.kind == "HTTPRoute":
            _external_auth(model, rm, route, dig(f, "externalAuth"), (*path, "externalAuth"), findings, m,
                           res.backend_ref, res.settings)
        elif ftype == "ExtensionRef":
            kind = dig(f, "extensionRef", "kind")
            if kind == unhonoured.ROUTE_POLICY:
                continue  # the rule answers 500 (stage_route; validators.objectrules.unhonoured.route_policy_rules)
            _warn(findings, ref, EXTENSION_REF, f"ExtensionRef kind {kind!r} is not supported here; the filter "
                  "is ignored", (*path, "extensionRef"), local=True)
        else:
            _warn(findings, ref, EXTENSION_REF, f"filter type {ftype!r} is not supported on {ref.kind}; it is "
                  "ignored", (*path, "type"), local=True)
    timeouts = dig(rule, "timeouts")
    if isinstance(timeouts, dict):
        if "request" in timeouts:
            _warn(findings, ref, REQUEST_TIMEOUT, "timeouts.request is ignored: HAProxy has no overall request "
                  "deadline; only backendRequest is applied", (*base, "timeouts", "request"), local=True)
        br = duration_ms(timeouts.get("backendRequest"))
        if br is not None:
            # 0 and anything longer than HAProxy can count (RG0122) are its longest timeout
            value = min(br, MAX_TIMEOUT_MS) if br else MAX_TIMEOUT_MS
            model.add("gw-timeouts.map", f"{rm.rid} {value}{mark(ref, (*base, 'timeouts'))}")


def backend_filters(model: HttpModel, rm: RuleModel, route: Obj, i: int, j: int, be: str, plens: set[int],
                    findings: list[Finding], mark: Mark) -> None:
    """backendRefs[j].filters: run after the rule's filters and win for the same header."""
    rule = dig(route, "spec", "rules", i)
    filters = as_list(dig(rule, "backendRefs", j, "filters"))
    if not filters:  # most backendRefs
        return
    ref = ref_of(route)
    key = f"{rm.rid}~{be}"
    for k, f in enumerate(filters):
        path: tuple[PathPart, ...] = ("spec", "rules", i, "backendRefs", j, "filters", k)
        ftype = dig(f, "type")
        m = mark(ref, path)
        if ftype == "RequestHeaderModifier":
            _header_mods(model, key, dig(f, "requestHeaderModifier"), (*path, "requestHeaderModifier"), False, True, m)
        elif ftype == "ResponseHeaderModifier":
            _header_mods(model, key, dig(f, "responseHeaderModifier"), (*path, "responseHeaderModifier"), True,
                         True, m)
        elif ftype == "RequestRedirect" and ref.kind == "HTTPRoute":
            _map_filter(redirects.redirect, model, key, f, "requestRedirect", path, plens, m)
        elif ftype == "URLRewrite" and ref.kind == "HTTPRoute":
            _map_filter(redirects.rewrite, model, key, f, "urlRewrite", path, plens, m)
        elif ftype == "ExternalAuth":
            _warn(findings, ref, EXTERNAL_AUTH, "ExternalAuth on a backendRef cannot be enforced; move it to the "
                  "rule's filters. The rule answers 500", path, local=True)
            model.add("gw-extauth.map", f"{rm.rid} {FAIL}{m}")
            model.uses.add("auth")
        else:
            _warn(findings, ref, EXTENSION_REF, f"filter type {ftype!r} is not supported on a backendRef; it is "
                  "ignored", (*path, "type"), local=True)
