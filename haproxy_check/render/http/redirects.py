"""RequestRedirect and URLRewrite as map entries (gw-redirect.map, gw-rewrite.map), read by one shared
block of frontend lines: a new or changed redirect/rewrite is a map update, not a reload (seed 004).

Entry values (``|``-separated, user text URL-encoded so it can neither split the line nor be read as a
log-format expression):

* gw-redirect.map ``<key> <code>|<scheme or ->|<host or ->|<port or ->|<mode>|<path>``
* gw-rewrite.map  ``<key> <host or ->|<mode>|<path>``

``<key>`` is the rule id (rule-level filter, takes precedence) or ``<rule>~<backend>`` (backendRef level).
``<mode>`` is ``full``, ``prefix`` or ``-``. ReplacePrefixMatch keeps the path after the matched prefix:
HAProxy 2.8's ``bytes`` needs a literal offset, so the frontend has one line per distinct prefix length in
use (``HttpModel.redirect_plens`` / ``rewrite_plens``), shared by every route with that length.
"""

from __future__ import annotations

from typing import Any

from haproxy_check import escaping
from haproxy_check.escaping import FieldError, guard
from haproxy_check.render.http.httpmodels import HttpModel
from validators.findings import PathPart
from validators.objects import dig

CODES = (301, 302, 303, 307, 308)


def _path(spec: Any, at: tuple[PathPart, ...], plens: set[int]) -> tuple[str, str]:
    """(mode, URL-encoded path) of a filter's ``path`` modifier."""
    ptype = dig(spec, "path", "type")
    if ptype == "ReplaceFullPath":
        value = dig(spec, "path", "replaceFullPath", default="/")
        return "full", escaping.url_value(guard((*at, "path", "replaceFullPath"), escaping.path, value))
    if ptype == "ReplacePrefixMatch":
        field = (*at, "path", "replacePrefixMatch")
        if not plens:
            raise FieldError("ReplacePrefixMatch needs a PathPrefix match", field)
        value = guard(field, escaping.path, dig(spec, "path", "replacePrefixMatch", default="/"))
        return "prefix", escaping.url_value(value.rstrip("/"))
    if ptype is not None:
        raise FieldError(f"path type {ptype!r} is not ReplaceFullPath or ReplacePrefixMatch", (*at, "path", "type"))
    return "-", ""


def redirect(model: HttpModel, key: str, spec: Any, at: tuple[PathPart, ...], plens: set[int], mark: str) -> None:
    code = dig(spec, "statusCode", default=302)
    if code not in CODES:
        raise FieldError(f"redirect statusCode {code!r} is not 301, 302, 303, 307 or 308", (*at, "statusCode"))
    scheme = dig(spec, "scheme", default="-")
    if scheme not in ("http", "https", "-"):
        raise FieldError(f"redirect scheme {scheme!r} is not http or https", (*at, "scheme"))
    host = dig(spec, "hostname")
    host = guard((*at, "hostname"), escaping.hostname, host) if host is not None else "-"
    port = dig(spec, "port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536):
        raise FieldError(f"redirect port {port!r} is not a port number", (*at, "port"))
    mode, value = _path(spec, at, plens)
    if mode == "prefix":
        model.redirect_plens |= plens
    model.add("gw-redirect.map", f"{key} {code}|{scheme}|{host}|{port if port else '-'}|{mode}|{value}{mark}")
    model.uses.add("redirect")


def rewrite(model: HttpModel, key: str, spec: Any, at: tuple[PathPart, ...], plens: set[int], mark: str) -> None:
    host = dig(spec, "hostname")
    host = guard((*at, "hostname"), escaping.hostname, host) if host is not None else "-"
    mode, value = _path(spec, at, plens)
    if mode == "prefix":
        model.rewrite_plens |= plens
    model.add("gw-rewrite.map", f"{key} {host}|{mode}|{value}{mark}")
    model.uses.add("rewrite")
