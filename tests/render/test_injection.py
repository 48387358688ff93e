"""Injection safety (issue 2 section 5): arbitrary strings in any user field never change the structure of
haproxy.cfg (section headers, directive keywords, words per line), never split a map line, and what reaches
haproxy -c is either accepted or refused for the value itself (a regex PCRE rejects), never a new directive.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from haproxy_check.results import RenderResult
from tests.render.conftest import Check, render
from validators.objects import Obj, Ref

GW = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "edge", "namespace": "ns"},
      "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
SUBJECT = Ref("HTTPRoute", "ns", "r")


def benign_route() -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["a.example.com"], "rules": [
                {"matches": [{"path": {"type": "Exact", "value": "/exact"},
                              "headers": [{"name": "X-H", "value": "hv"}],
                              "queryParams": [{"name": "q", "value": "qv"}]},
                             {"path": {"type": "PathPrefix", "value": "/prefix"}},
                             {"path": {"type": "RegularExpression", "value": "/re.*"},
                              "headers": [{"name": "X-R", "type": "RegularExpression", "value": "r.*"}]}],
                 "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                     "set": [{"name": "X-Set", "value": "sv"}], "remove": ["X-Del"]}},
                     {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                         "add": [{"name": "X-Add", "value": "av"}]}}],
                 "backendRefs": [{"name": "svc", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/r"}}],
                 "filters": [{"type": "RequestRedirect", "requestRedirect": {
                     "hostname": "to.example.com",
                     "path": {"type": "ReplaceFullPath", "replaceFullPath": "/full"}}}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/rw"},
                              "queryParams": [{"name": "v", "type": "RegularExpression", "value": "v[0-9]+"}]}],
                 "filters": [{"type": "URLRewrite", "urlRewrite": {
                     "hostname": "rw.example.com",
                     "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}},
                     {"type": "CORS", "cors": {"allowOrigins": ["https://o.example.com", "https://*.w.example.com"],
                                               "allowHeaders": ["X-Allow"], "exposeHeaders": ["X-Expose"]}}],
                 "backendRefs": [{"name": "svc", "port": 80}]}]}}


def _set(*path: Any) -> Callable[[dict[str, Any], str], None]:
    def apply(obj: dict[str, Any], value: str) -> None:
        cur: Any = obj
        for key in path[:-1]:
            cur = cur[key]
        cur[path[-1]] = value
    return apply


def _prefixed(prefix: str, setter: Callable[[dict[str, Any], str], None]) -> Callable[[dict[str, Any], str], None]:
    return lambda obj, value: setter(obj, prefix + value)


R0 = ("spec", "rules", 0)
FIELDS = {
    "hostname": _set("spec", "hostnames", 0),
    "exact path": _set(*R0, "matches", 0, "path", "value"),
    "prefix path": _set(*R0, "matches", 1, "path", "value"),
    "regex path": _set(*R0, "matches", 2, "path", "value"),
    "header name": _set(*R0, "matches", 0, "headers", 0, "name"),
    "header value": _set(*R0, "matches", 0, "headers", 0, "value"),
    "header regex": _set(*R0, "matches", 2, "headers", 0, "value"),
    "query name": _set(*R0, "matches", 0, "queryParams", 0, "name"),
    "query value": _set(*R0, "matches", 0, "queryParams", 0, "value"),
    "set header name": _set(*R0, "filters", 0, "requestHeaderModifier", "set", 0, "name"),
    "set header value": _set(*R0, "filters", 0, "requestHeaderModifier", "set", 0, "value"),
    "response header value": _set(*R0, "filters", 1, "responseHeaderModifier", "add", 0, "value"),
    "removed header": _set(*R0, "filters", 0, "requestHeaderModifier", "remove", 0),
    "service name": _set(*R0, "backendRefs", 0, "name"),
    "redirect path": _set("spec", "rules", 1, "filters", 0, "requestRedirect", "path", "replaceFullPath"),
    "redirect hostname": _set("spec", "rules", 1, "filters", 0, "requestRedirect", "hostname"),
    "query regex": _set("spec", "rules", 2, "matches", 0, "queryParams", 0, "value"),
    "rewrite hostname": _set("spec", "rules", 2, "filters", 0, "urlRewrite", "hostname"),
    "rewrite prefix": _set("spec", "rules", 2, "filters", 0, "urlRewrite", "path", "replacePrefixMatch"),
    # origins keep their kind (exact / wildcard): which list an origin joins is decided by its shape
    "cors origin": _prefixed("https://x", _set("spec", "rules", 2, "filters", 1, "cors", "allowOrigins", 0)),
    "cors wildcard origin": _prefixed("https://*.", _set("spec", "rules", 2, "filters", 1, "cors", "allowOrigins", 1)),
    "cors allowed header": _set("spec", "rules", 2, "filters", 1, "cors", "allowHeaders", 0),
    "cors exposed header": _set("spec", "rules", 2, "filters", 1, "cors", "exposeHeaders", 0),
}
# Hostile strings: config syntax, regex syntax that moves a group's end (quoting, comments, options,
# verbs, backreferences), IPv6 zones, URL userinfo and authority tricks, and very long values.
REGEX_TRICKS = [r"\Q[\E)|.*(\Q]\E?", r"(?#(()x)|.*(", r"(?x) )|.*( ", r"(*ACCEPT)", r"(a)\1", r"\c)", r"\x{29}|.*",
                r"[\Q]\E)|.*(]", r"(?<=a)", r"a{,3}", r"[]a]", r")|(", r"(?i)", "\\", r"\K", r"(?|a)"]
ZONES = ["fe80::1%eth0", "fe80::1%eth0 weight 100 backup", "::1%${HOME}", "fe80::1%'x'"]
URL_TRICKS = ["user:pass@evil.example", "@evil.example/x", "//evil.example/", "https://evil.example@x/",
              ".evil.example", ":1@evil/", "\\evil.example"]
LONG = ["a" * 5000, "%" * 400, "/" + "a/" * 2000, "x " * 100, "'" * 300, "(" * 100 + ")" * 100]
NASTY = [*REGEX_TRICKS, *ZONES, *URL_TRICKS, *LONG,
         "\n    daemon", "a\r\nb", "' } { always_true", "%[req.hdr(cookie)]", "# x", "a b", "\\", "$HOME", '"',
         "x'\\''y", "\x00", "} || { always_true", "/a\n#", "\u2028", "%", "-m", "--", "a|set|b", "*.x", ")"]


def words(line: str) -> list[str]:
    """HAProxy's tokenizer, enough to count words: '...' literal, "..." with \\ escapes, # comment."""
    out: list[str] = []
    cur, quote, esc, started = "", "", False, False
    for ch in line:
        if esc:
            cur, esc, started = cur + ch, False, True
        elif quote == "'":
            quote = "" if ch == "'" else quote
            cur += ch if quote else ""
        elif ch == "\\":
            esc = True
        elif quote == '"':
            quote = "" if ch == '"' else quote
            cur += ch if quote else ""
        elif ch in "'\"":
            quote, started = ch, True
        elif ch == "#" and not started and not cur:
            break
        elif ch.isspace():
            if started:
                out.append(cur)
            cur, started = "", False
        else:
            cur, started = cur + ch, True
    if started:
        out.append(cur)
    return out


def skeleton(result: RenderResult) -> list[tuple[str, int]]:
    """(keyword, number of words) per config line: section headers and directives."""
    out = []
    for line in result.config.splitlines():
        w = words(line)
        if w:
            out.append((w[0] if not line[0].isspace() else "  " + w[0], len(w)))
    return out


def map_shape(result: RenderResult) -> dict[str, int]:
    shape = {}
    for path, data in result.files.items():
        if path.startswith("maps/"):
            text = data.decode()
            for line in text.splitlines():
                assert len(line.split()) == 2, f"{path}: {line!r} is not one key and one value"
                assert not line.startswith("#")
            shape[path] = len(text.splitlines())
    return shape


def state(route: Obj) -> list[Obj]:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"},
           "spec": {"ports": [{"port": 80}]}}
    return [GW, svc, route]


BENIGN = render(state(benign_route()), subject=SUBJECT)
# A field whose plain values change the shape on their own: another Service name is one more backend
# (without servers while that Service does not exist), so its values are compared with a plain other name.
PLAIN = {"service name": "other"}


def _baseline(field: str) -> RenderResult:
    if field not in PLAIN:
        return BENIGN
    route = copy.deepcopy(benign_route())
    FIELDS[field](route, PLAIN[field])
    return render(state(route), subject=SUBJECT)


WITHOUT = render(state({**benign_route(), "spec": {**benign_route()["spec"], "parentRefs": [{"name": "none"}]}}))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(sorted(FIELDS)),
       value=st.one_of(st.sampled_from(NASTY), st.text(min_size=1, max_size=24),
                       st.lists(st.sampled_from(NASTY), min_size=2, max_size=4).map("".join)))
@example(field="header value", value="' } { always_true")
@example(field="service name", value="a" * 5000)
@example(field="set header value", value="%[req.hdr(cookie)]\n    daemon")
def test_arbitrary_values_never_change_the_config_structure(field: str, value: str, haproxy_check: Check) -> None:
    route = copy.deepcopy(benign_route())
    FIELDS[field](route, value)
    result = render(state(route), subject=SUBJECT)
    refused = [f for f in result.findings if f.severity == "deny" and f.about == str(SUBJECT)]
    if refused:
        assert refused[0].path[: 1] == ("spec",), refused
        assert "ns_r_" not in result.files["maps/rule-backend.map"].decode()
        return
    baseline = _baseline(field)
    assert skeleton(result) == skeleton(baseline), f"{field}={value!r} changed the config structure"
    # same number of map lines in total (a wildcard hostname moves its entry to host-wildcard.map)
    assert sum(map_shape(result).values()) == sum(map_shape(baseline).values())
    proc = haproxy_check(result)
    if proc.returncode != 0:  # only a regex PCRE refuses may fail the check, never a keyword
        assert field in ("regex path", "header regex", "query regex"), proc.stderr
        assert "regex" in proc.stderr or "reg" in proc.stderr, proc.stderr


def test_the_benign_route_renders_and_the_skeleton_counts_words() -> None:
    assert not [f for f in BENIGN.findings if f.severity == "deny"]
    assert words("  http-request set-header X 'a b'\\ c \"d\\\"e\" # note") == \
        ["http-request", "set-header", "X", "a b c", 'd"e']
    assert ("  use_backend", 8) in skeleton(BENIGN)
    assert len(skeleton(WITHOUT)) < len(skeleton(BENIGN))
