"""The Kubernetes CEL libraries, written once in Python and declared for whichever engine runs them.

The API server adds libraries (IP/CIDR, URL, format, lists, sets, regex) to cel-go that the CEL
runtimes' Python bindings lack. The binding accepts Python callables as overloads, so each function
is a plain Python implementation plus an engine-neutral declaration (:class:`Fn`). Values the API
server keeps opaque (``net.IP``, ``net.CIDR``, ``URL``) are carried as their canonical strings: the
rules only compare them and call their accessors, which are declared on ``string`` receivers.

``format.<name>().validate(x)`` returns an ``optional`` in Kubernetes; a Python callable cannot
return one, so :func:`rewrite_formats` turns the call into ``__formatErrors('<name>', x)`` wrapped in
``optional.of``/``optional.none()`` (see ``docs/CEL.md``).
"""

from __future__ import annotations

import ipaddress
import itertools
import re
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type stubs

__all__ = ["FORMATS", "FUNCTIONS", "Fn", "rewrite_formats", "strip_strings"]


@dataclass(frozen=True, slots=True)
class Fn:
    """One overload: ``params`` and ``result`` are ``bool|int|string|list|map|dyn`` names."""

    name: str
    overload: str
    params: tuple[str, ...]
    result: str
    impl: Callable[..., Any]
    member: bool = False


# --- IP and CIDR (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go) ---------------------------------


def _ip(text: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if not isinstance(text, str) or "%" in text:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string")
    addr = ipaddress.ip_address(text)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return addr


def _net(text: Any) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if not isinstance(text, str) or "/" not in text:
        raise ValueError(f"network address {text!r} parse error during conversion from string")
    iface = ipaddress.ip_interface(text)
    _ip(str(iface.ip))
    return iface


def _is(parse: Callable[[Any], Any]) -> Callable[[Any], bool]:
    def check(text: Any) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _ip_canonical(text: Any) -> bool:
    return bool(str(_ip(text)) == text)


def _contains_ip(cidr: str, ip: str) -> bool:
    return _ip(ip) in _net(cidr).network


def _contains_cidr(cidr: str, other: str) -> bool:
    inner, outer = _net(other).network, _net(cidr).network
    return inner.version == outer.version and bool(inner.subnet_of(outer))  # type: ignore[arg-type]


def _masked(cidr: str) -> str:
    return str(_net(cidr).network)


# --- URL (library/urls.go: Go's url.ParseRequestURI) -----------------------------------------------


def _url(text: Any) -> str:
    if not isinstance(text, str) or not text or any(c.isspace() or ord(c) < 0x20 for c in text):
        raise ValueError(f"URL {text!r} parse error during conversion from string")
    parts = urllib.parse.urlsplit(text)
    if not (parts.scheme or text.startswith("/")) or parts.fragment:
        raise ValueError(f"URL {text!r} parse error during conversion from string: invalid URI for request")
    return text


def _host(text: str) -> str:
    return urllib.parse.urlsplit(_url(text)).netloc.rpartition("@")[2]


def _hostname(text: str) -> str:
    host = _host(text)
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.rpartition(":")[0] if ":" in host else host


def _port(text: str) -> str:
    host = _host(text)
    tail = host[host.find("]") + 1 :] if host.startswith("[") else host
    return tail.rpartition(":")[2] if ":" in tail else ""


def _query(text: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(_url(text)).query, keep_blank_values=True)


# --- format (library/format.go; messages as apimachinery's validation package writes them) ---------

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"


def _regex_check(pattern: str, max_len: int, what: str, examples: str) -> Callable[[str], list[str]]:
    compiled = re.compile(rf"^{pattern}$")

    def check(value: str) -> list[str]:
        errs = []
        if len(value) > max_len:
            errs.append(f"must be no more than {max_len} characters")
        if not compiled.match(value):
            errs.append(f"{what} (e.g. {examples}, regex used for validation is '{pattern}')")
        return errs

    return check


_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
              "must start and end with an alphanumeric character")
_SUB_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character")
_1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
             "alphabetic character, and end with an alphanumeric character")

_dns1123_label = _regex_check(_DNS1123_LABEL, 63, _LABEL_MSG, "'my-name',  or '123-abc'")
_dns1123_subdomain = _regex_check(_DNS1123_SUBDOMAIN, 253, _SUB_MSG, "'example.com'")
_dns1035_label = _regex_check(_DNS1035_LABEL, 63, _1035_MSG, "'my-name',  or 'abc-123'")


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A name prefix may end in '-' (a generateName); validate it with a character appended."""
    return lambda value: check(value[:-1] + "a" if value.endswith("-") else value)


def _qualified_name(value: str) -> list[str]:
    prefix, slash, name = value.rpartition("/")
    errs = []
    if slash and not prefix:
        errs.append("prefix part must be non-empty")
    elif slash:
        errs.extend("prefix part " + e for e in _dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not re.fullmatch(_QUALIFIED_NAME, name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                    f"end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                    f"used for validation is '{_QUALIFIED_NAME}')")
    return errs


def _label_value(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not re.fullmatch(_LABEL_VALUE, value):
        errs.append("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                    "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                    f"'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE}')")
    return errs


def _parses(parse: Callable[[str], Any], what: str) -> Callable[[str], list[str]]:
    def check(value: str) -> list[str]:
        try:
            parse(value)
        except (ValueError, TypeError):
            return [f"invalid {what}"]
        return []

    return check


def _b64(value: str) -> None:
    import base64

    base64.b64decode(value, validate=True)


def _rfc3339(value: str) -> None:
    datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))


FORMATS: Mapping[str, Callable[[str], list[str]]] = {
    "dns1123Label": _dns1123_label,
    "dns1123Subdomain": _dns1123_subdomain,
    "dns1035Label": _dns1035_label,
    "qualifiedName": _qualified_name,
    "dns1123LabelPrefix": _prefix(_dns1123_label),
    "dns1123SubdomainPrefix": _prefix(_dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(_dns1035_label),
    "labelValue": _label_value,
    "uri": _parses(_url, "URI"),
    "uuid": _parses(uuid.UUID, "UUID"),
    "byte": _parses(_b64, "base64"),
    "date": _parses(date.fromisoformat, "date"),
    "datetime": _parses(_rfc3339, "datetime"),
}


def _format_errors(name: str, value: Any) -> list[str]:
    check = FORMATS.get(name)
    if check is None:
        raise ValueError(f"unknown format: {name}")
    if not isinstance(value, str):
        raise ValueError("format validation needs a string")
    return check(value)


_FORMAT_CALL = re.compile(r"format\.([A-Za-z0-9]+)\(\)\s*\.\s*validate\(")


def strip_strings(expr: str) -> str:
    """The expression with every string literal's body blanked: for scanning identifiers safely."""
    out, i, n = [], 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "'\"":
            raw = i > 0 and expr[i - 1] in "rR"
            quote = expr[i : i + 3] if expr[i : i + 3] in ("'''", '"""') else c
            j = i + len(quote)
            while j < n and not expr.startswith(quote, j):
                j += 2 if expr[j] == "\\" and not raw else 1
            end = min(n, j + len(quote))
            out.append(quote + " " * max(0, end - i - 2 * len(quote)) + quote if end - i >= 2 * len(quote)
                       else " " * (end - i))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


_MATCHES_CALL = re.compile(r"\.\s*matches\s*\(")
MATCHES = "__matchesRe2"


def precompiled_regexes(expr: str) -> str:
    """``x.matches(p)`` -> ``x.__matchesRe2(p)``: the same RE2 partial match, with ``p`` compiled once
    per process instead of on every evaluation (cel-expr-python does not precompile constant patterns,
    and compiling a long one costs more than the rest of a rule). Used only where a true result alone
    is trusted (the one-call conjunction of a node's rules); the rules' own programs keep ``matches``."""
    blank = strip_strings(expr)
    out, pos = [], 0
    for match in _MATCHES_CALL.finditer(blank):
        out.append(expr[pos : match.start()])
        out.append(f".{MATCHES}(")
        pos = match.end()
    out.append(expr[pos:])
    return "".join(out)


def rewrite_formats(expr: str) -> str:
    """``format.X().validate(v)`` -> an optional list built from ``__formatErrors('X', v)``."""
    for _ in range(64):  # one call per pass; nested calls are rewritten on later passes
        blank = strip_strings(expr)
        match = _FORMAT_CALL.search(blank)
        if match is None:
            return expr
        depth, end = 1, match.end()
        while end < len(blank) and depth:
            depth += {"(": 1, ")": -1}.get(blank[end], 0)
            end += 1
        if depth:
            return expr  # unbalanced: leave it for the compiler to report
        arg = expr[match.end() : end - 1]
        expr = (f"{expr[: match.start()]}cel.bind(__fmtErrs, __formatErrors('{match.group(1)}', {arg}), "
                f"__fmtErrs.size() == 0 ? optional.none() : optional.of(__fmtErrs)){expr[end:]}")
    return expr


# --- lists and sets (library/lists.go, sets.go) ----------------------------------------------------


def _sorted(items: Sequence[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _sum(items: Sequence[Any]) -> Any:
    return sum(items) if items else 0


def _min(items: Sequence[Any]) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    return min(items)


def _max(items: Sequence[Any]) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    return max(items)


def _index_of(items: Sequence[Any], item: Any) -> int:
    return next((i for i, x in enumerate(items) if x == item), -1)


def _last_index_of(items: Sequence[Any], item: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if items[i] == item), -1)


# --- regex (library/regex.go: RE2, as the API server; linear time on any value) --------------------


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # reported as a CEL evaluation error, not logged to stderr by C++


def _re2(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)  # compiled patterns are cached by the wrapper
    except re2.error as e:
        raise ValueError(f"invalid RE2 pattern {pattern!r}: {e}") from None


_compiled: dict[str, tuple[Any, Any]] = {}
# RE2's own match, as the wrapper's search() calls it on the UTF-8 of a str: a yes/no answer needs no
# character offsets, which the wrapper maps back from byte offsets through a generator (most of a
# match's cost). None on another wrapper version: then its public search().
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
_NO_MATCH = (-1, -1)


def _matches(text: str, pattern: str) -> bool:
    compiled = _compiled.get(pattern)
    if compiled is None:
        regex = _re2(pattern)  # an invalid pattern raises: the conjunction then proves nothing
        match = getattr(getattr(regex, "_regexp", None), "Match", None) if _UNANCHORED is not None else None
        compiled = (regex, match)
        if len(_compiled) < 1024:  # patterns come from rule texts, but a rule may build one from a value
            _compiled[pattern] = compiled
    regex, match = compiled
    if match is None or type(text) is not str:
        return regex.search(text) is not None
    data = text.encode("utf-8")  # as the wrapper encodes it: a lone surrogate raises the same error
    return bool(match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)


def _find(text: str, pattern: str) -> str:
    match = _re2(pattern).search(text)
    return str(match.group(0)) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [str(m.group(0)) for m in _re2(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _fns() -> tuple[Fn, ...]:
    s, b, i, ls, d = "string", "bool", "int", "list", "dyn"
    ip_preds = {
        "isUnspecified": lambda a: a.is_unspecified,
        "isLoopback": lambda a: a.is_loopback,
        "isLinkLocalMulticast": lambda a: a.is_multicast and (
            a in ipaddress.ip_network("224.0.0.0/24") or a in ipaddress.ip_network("ff02::/16")),
        "isLinkLocalUnicast": lambda a: a.is_link_local and not a.is_multicast,
        "isGlobalUnicast": lambda a: not (a.is_unspecified or a.is_loopback or a.is_multicast
                                          or a.is_link_local or a == ipaddress.ip_address("255.255.255.255")),
    }
    out = [
        Fn("isIP", "k8s_isIP_string", (s,), b, _is(_ip)),
        Fn("ip", "k8s_ip_string", (s,), s, lambda t: str(_ip(t))),
        Fn("ip.isCanonical", "k8s_ip_isCanonical_string", (s,), b, _ip_canonical),
        Fn("family", "k8s_ip_family", (s,), i, lambda t: _ip(t).version, member=True),
        Fn("isCIDR", "k8s_isCIDR_string", (s,), b, _is(_net)),
        Fn("cidr", "k8s_cidr_string", (s,), s, lambda t: str(_net(t))),
        Fn("containsIP", "k8s_cidr_containsIP", (s, s), b, _contains_ip, member=True),
        Fn("containsCIDR", "k8s_cidr_containsCIDR", (s, s), b, _contains_cidr, member=True),
        Fn("masked", "k8s_cidr_masked", (s,), s, _masked, member=True),
        Fn("prefixLength", "k8s_cidr_prefixLength", (s,), i, lambda t: _net(t).network.prefixlen,
           member=True),
        Fn("isURL", "k8s_isURL_string", (s,), b, _is(_url)),
        Fn("url", "k8s_url_string", (s,), s, _url),
        Fn("getScheme", "k8s_url_getScheme", (s,), s, lambda t: urllib.parse.urlsplit(_url(t)).scheme,
           member=True),
        Fn("getHost", "k8s_url_getHost", (s,), s, _host, member=True),
        Fn("getHostname", "k8s_url_getHostname", (s,), s, _hostname, member=True),
        Fn("getPort", "k8s_url_getPort", (s,), s, _port, member=True),
        Fn("getEscapedPath", "k8s_url_getEscapedPath", (s,), s, lambda t: urllib.parse.urlsplit(_url(t)).path,
           member=True),
        Fn("getQuery", "k8s_url_getQuery", (s,), "map", _query, member=True),
        Fn("__formatErrors", "k8s_format_errors", (s, d), "list_string", _format_errors),
        Fn("isSorted", "k8s_list_isSorted", (ls,), b, _sorted, member=True),
        Fn("sum", "k8s_list_sum", (ls,), d, _sum, member=True),
        Fn("min", "k8s_list_min", (ls,), d, _min, member=True),
        Fn("max", "k8s_list_max", (ls,), d, _max, member=True),
        Fn("indexOf", "k8s_list_indexOf", (ls, d), i, _index_of, member=True),
        Fn("lastIndexOf", "k8s_list_lastIndexOf", (ls, d), i, _last_index_of, member=True),
        Fn("sets.contains", "k8s_sets_contains", (ls, ls), b, lambda a, c: all(x in a for x in c)),
        Fn("sets.equivalent", "k8s_sets_equivalent", (ls, ls), b,
           lambda a, c: all(x in a for x in c) and all(x in c for x in a)),
        Fn("sets.intersects", "k8s_sets_intersects", (ls, ls), b, lambda a, c: any(x in a for x in c)),
        Fn("find", "k8s_regex_find", (s, s), s, _find, member=True),
        Fn(MATCHES, "k8s_regex_matches_precompiled", (s, s), b, _matches, member=True),
        Fn("findAll", "k8s_regex_findAll", (s, s), "list_string", _find_all, member=True),
        Fn("findAll", "k8s_regex_findAll_limit", (s, s, i), "list_string", _find_all, member=True),
    ]
    for name, pred in ip_preds.items():
        out.append(Fn(name, f"k8s_ip_{name}", (s,), b, lambda t, p=pred: bool(p(_ip(t))), member=True))
    return tuple(out)


FUNCTIONS: tuple[Fn, ...] = _fns()
