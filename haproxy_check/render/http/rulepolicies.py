"""Rule policies that shape a rule's own backend profile: retry (GEP-1731) and sessionPersistence
(GEP-1619). A rule with either gets its own backend ``..._r<ruleIndex>`` so the policy applies to it only;
the lines go into the backend's named defaults profile (seed 004/000).
"""

from __future__ import annotations

from typing import Any

from haproxy_check import escaping
from haproxy_check.escaping import FieldError, guard
from haproxy_check.render.http.httpfilters import _warn, duration_ms
from validators import dataplanes
from validators.findings import Finding, PathPart
from validators.objects import Ref, as_list, dig

RETRY_CODE, RETRY_BACKOFF = "RG0111", "RG0112"
IDEMPOTENT = "GET HEAD OPTIONS TRACE PUT DELETE"  # RFC 9110 section 9.2.2


def backend_profile(rule: Any, i: int, *, grpc: bool, findings: list[Finding], ref: Ref,
                    haproxy_version: tuple[int, ...] = (2, 8), cookie_key: str = "",
                    retry_non_idempotent: bool = False) -> tuple[str, ...]:
    lines: list[str] = []
    base: tuple[PathPart, ...] = ("spec", "rules", i)
    if grpc:
        lines.append("default-server proto h2")
    retry = dig(rule, "retry")
    if isinstance(retry, dict):
        attempts = dig(retry, "attempts")
        attempts = attempts if isinstance(attempts, int) and attempts >= 0 else 3
        allowed = dataplanes.retry_codes(haproxy_version)  # what the checker and the data plane accept
        codes: list[int] = []
        for k, code in enumerate(as_list(dig(retry, "codes"))):
            if isinstance(code, int) and not isinstance(code, bool) and code in allowed:
                codes.append(code)
            else:
                _warn(findings, ref, RETRY_CODE,
                      f"RetryCodeUnsupported: HAProxy cannot retry on status {code!r}; it is dropped",
                      (*base, "retry", "codes", k), local=True)
        if not as_list(dig(retry, "codes")):
            codes = [500, 502, 503, 504]
        backoff = duration_ms(dig(retry, "backoff"))
        if backoff:
            _warn(findings, ref, RETRY_BACKOFF, "RetryBackoffUnsupported: HAProxy retries without waiting; "
                  "the backoff is not applied", (*base, "retry", "backoff"), local=True)
        lines.append(f"retries {attempts}")
        lines.append("retry-on conn-failure empty-response response-timeout"
                     + "".join(f" {c}" for c in sorted(set(codes))))
        if not retry_non_idempotent:
            # HAProxy replays any method on a status, an empty response or a timeout; only the
            # idempotent ones are safe to send twice (seed 004: retryNonIdempotent turns this off)
            lines.append(f"http-request disable-l7-retry if !{{ method {IDEMPOTENT} }}")
    sp = dig(rule, "sessionPersistence")
    if isinstance(sp, dict):
        lines.extend(_persistence(sp, (*base, "sessionPersistence"), cookie_key))
    return tuple(lines)


def _persistence(sp: Any, path: tuple[PathPart, ...], cookie_key: str) -> list[str]:
    kind = dig(sp, "type", default="Cookie")
    default = "X-Session" if kind == "Header" else "SESSION"
    name = dig(sp, "cookie", "name") if kind == "Cookie" else dig(sp, "header", "name")
    name_path = (*path, "cookie" if kind == "Cookie" else "header", "name")
    if not name:
        name, name_path = dig(sp, "sessionName"), (*path, "sessionName")
    name = name or default
    try:
        escaping.header_name(name)  # the one token check (a cookie name has the header-name alphabet)
    except escaping.Unsafe:
        raise FieldError(f"session name {name!r} may only contain letters, digits and !$&*+.^_~-",
                          name_path) from None
    absolute = duration_ms(dig(sp, "absoluteTimeout"))
    idle = duration_ms(dig(sp, "idleTimeout"))
    cookie = name if kind == "Cookie" else "SESSION"
    opts = ""
    if idle:
        opts += f" maxidle {max(idle // 1000, 1)}s"
    if absolute:
        opts += f" maxlife {max(absolute // 1000, 1)}s"
    if kind == "Header":
        opts += ' attr "Max-Age=0"'
    elif absolute and dig(sp, "cookieConfig", "lifetimeType") == "Permanent":
        opts += f' attr "Max-Age={max(absolute // 1000, 1)}"'
    lines = [f"cookie {escaping.quote(cookie)} insert indirect nocache dynamic{opts}",
             f"dynamic-cookie-key {escaping.quote(cookie_key or 'routegate')}"]
    if kind == "Header":
        # a bare word: inside double quotes HAProxy would expand a `$` of the (user) header name
        lines.append(f"http-request add-header Cookie {cookie}=%[req.hdr({name})] if {{ req.hdr({name}) -m found }}")
    return lines


def session_header(rule: Any, i: int) -> str | None:
    """The lower-cased header of a type: Header sessionPersistence (the frontend copies the session cookie
    into it: the backend's own response rules run before HAProxy inserts the cookie)."""
    sp = dig(rule, "sessionPersistence")
    if not isinstance(sp, dict) or dig(sp, "type") != "Header":
        return None
    path: tuple[PathPart, ...] = ("spec", "rules", i, "sessionPersistence", "header", "name")
    name = dig(sp, "header", "name")
    if not name:
        name, path = dig(sp, "sessionName"), ("spec", "rules", i, "sessionPersistence", "sessionName")
    return guard(path, escaping.header_name, str(name or "X-Session")).lower()
