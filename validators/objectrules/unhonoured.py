"""What the Gateway API lets a user write and HAProxy cannot honour here: said, never silently ignored.

One source of truth for the rules (admission warnings), the renderer (what it leaves out or fails) and
the route statuses (``validators.crossobject.statuses``):

- ``RequestMirror`` (RG0123). HAProxy sends no copy of a request by itself; mirroring needs an SPOE
  agent (spoa-mirror or a SPOA hub mirror plugin) that routegate does not configure. Dropping the rule (the
  Gateway API's "Dropped Rule") would take the rule's live traffic down on upgrade for want of a copy, so
  the rule serves exactly as it would without its mirrors (its other filters apply), and the route's
  status says so: ``routegate.io/NotApplied`` (``validators.crossobject.statuses.NOT_APPLIED``: the
  Gateway API's PartiallyInvalid means a dropped rule or the last known good route, neither of which
  this is).
- ``ExtensionRef`` to ``HAProxyRoutePolicy`` (RG0124). routegate renders no HAProxyRoutePolicy; the
  Gateway API says a custom filter is never skipped: the requests it would process get an HTTP error.
  The rule answers 500.
- ``spec.listeners[].tls.options`` (RG0125, GEP-2907): only the keys in ``TLS_OPTIONS`` are rendered, on
  HTTPS listeners that terminate TLS, as bind keywords of the listener's frontend when every listener
  sharing that frontend asks for the same ones (``haproxy_check.render.http.frontends``); any other key,
  value or listener is reported and not applied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from validators import codes
from validators.contexts import Context
from validators.findings import Finding, PathPart, Severity
from validators.objectrules.traversals import filters_of
from validators.objects import Obj, as_list, as_map
from validators.texts import quote

ROUTE_POLICY = "HAProxyRoutePolicy"
_TLS_VERSIONS = ("TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3")
_CIPHERS = re.compile(r"[A-Za-z0-9_:+!@=.-]{1,2048}")
# GEP-2907 option keys that become bind keywords of the listener's frontend, with the values HAProxy takes
TLS_OPTIONS: Mapping[str, tuple[str, str]] = {
    "routegate.io/ssl-min-ver": ("ssl-min-ver", "one of " + ", ".join(_TLS_VERSIONS)),
    "routegate.io/ssl-max-ver": ("ssl-max-ver", "one of " + ", ".join(_TLS_VERSIONS)),
    "routegate.io/ciphers": ("ciphers", "an OpenSSL cipher list (letters, digits and _:+!@=.-)"),
    "routegate.io/ciphersuites": ("ciphersuites", "an OpenSSL TLSv1.3 ciphersuite list (letters, digits and _:)"),
}


@dataclass(frozen=True, slots=True)
class Unhonoured:
    rule: int
    path: tuple[PathPart, ...]
    message: str


def mirrored_rules(route: Obj) -> list[Unhonoured]:
    """The rules served without their rule-level RequestMirror filters (the first one of each rule)."""
    out: dict[int, Unhonoured] = {}
    for flt in filters_of(route):
        if flt.type == "RequestMirror" and flt.backend is None and flt.rule not in out:
            out[flt.rule] = Unhonoured(flt.rule, (*flt.path, "type"), (
                "RequestMirror is not supported: HAProxy sends no copy of a request without an SPOE mirror "
                f"agent, which routegate does not configure; rule {flt.rule} serves without the mirror (as it would "
                "without its RequestMirror filters: its other filters and backends apply)"))
    return list(out.values())


def route_policy_rules(route: Obj) -> list[Unhonoured]:
    """The rules that answer 500 for an ExtensionRef to a HAProxyRoutePolicy (the first one of each rule)."""
    out: dict[int, Unhonoured] = {}
    for flt in filters_of(route):
        if (flt.type == "ExtensionRef" and flt.backend is None and flt.body.get("kind") == ROUTE_POLICY
                and flt.rule not in out):
            out[flt.rule] = Unhonoured(flt.rule, (*flt.path, "extensionRef"), (
                f"ExtensionRef {ROUTE_POLICY} {quote(flt.body.get('name'))} cannot be applied: routegate renders "
                f"no {ROUTE_POLICY}, and a custom filter is never skipped; rule {flt.rule} answers 500"))
    return list(out.values())


def tls_option_words(key: str, value: Any) -> tuple[str, ...] | str:
    """The bind keywords for one ``tls.options`` entry, or why it is not applied."""
    known = TLS_OPTIONS.get(key)
    if known is None:
        return (f"option {quote(key)} is not applied: routegate knows "
                + ", ".join(quote(k) for k in TLS_OPTIONS) + "; the listener uses the global TLS settings")
    keyword, allowed = known
    text = value if isinstance(value, str) else ""
    ok = text in _TLS_VERSIONS if keyword.startswith("ssl-m") else bool(_CIPHERS.fullmatch(text))
    if keyword == "ciphersuites":
        ok = ok and re.fullmatch(r"[A-Za-z0-9_:]+", text) is not None
    if not ok:
        return f"option {quote(key)}: {quote(value)} is not {allowed}; it is not applied"
    return (keyword, text)


def tls_options(listener: Mapping[str, Any]) -> Iterator[tuple[str, tuple[str, ...] | str]]:
    """Each ``tls.options`` entry of a listener (sorted by key) with its bind words or why not."""
    options = as_map(as_map(listener.get("tls")).get("options"))
    for key in sorted(options, key=str):
        yield str(key), tls_option_words(str(key), options[key])


# ---------------------------------------------------------------- the rules


def request_mirrors(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """RG0123: a rule with a RequestMirror filter serves without the mirror."""
    for item in mirrored_rules(obj):
        yield Finding(codes.REQUEST_MIRROR, item.message, item.path, Severity.WARN)


def route_policies(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """RG0124: a rule with an ExtensionRef to a HAProxyRoutePolicy answers 500."""
    for item in route_policy_rules(obj):
        yield Finding(codes.ROUTE_POLICY, item.message, item.path, Severity.WARN)


def listener_tls_options(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """RG0125: ``tls.options`` entries that are not applied."""
    for i, listener in enumerate(as_list(as_map(obj.get("spec")).get("listeners"))):
        if not isinstance(listener, Mapping):
            continue
        tls = as_map(listener.get("tls"))
        terminated = listener.get("protocol") == "HTTPS" and tls.get("mode", "Terminate") == "Terminate"
        for key, words in tls_options(listener):
            if isinstance(words, str):
                message = words
            elif not terminated:
                message = (f"option {quote(key)} is not applied: routegate applies tls.options on HTTPS listeners "
                           "that terminate TLS only")
            else:
                continue
            yield Finding(codes.TLS_OPTION, message, ("spec", "listeners", i, "tls", "options", key), Severity.WARN)
