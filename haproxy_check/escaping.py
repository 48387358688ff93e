"""The one module through which every user-supplied value reaches haproxy.cfg or a map file.

HAProxy reads haproxy.cfg word by word (quotes, backslashes, ``$VAR`` expansion inside double quotes,
``#`` comments) and some words a second time as log-format strings (``%[...]`` runs sample
expressions). A map line is ``<key><whitespace><value>`` with ``#`` lines as comments. So a value goes
out in exactly one of these forms:

* ``quote``: a single-quoted config word (no expansion at all; ``'`` itself is written ``'\\''``);
* ``lf_quote``: the same for a word HAProxy later parses as log-format (``%`` doubled first);
* ``map_key`` / ``map_value``: checked for whitespace and line breaks, never escaped;
* ``url_value``: URL-encoded so any printable text fits one map value (decoded with ``url_dec``);
* ``ident`` / ``header_name``: a bare word from a small safe alphabet (names, header names inside
  sample-fetch arguments), refused otherwise.

Anything that cannot be represented (control characters, whitespace in a key, ...) raises ``Unsafe``;
the renderer turns it into a deny finding that names the field. The predicate is shared with the
validators (``validators.safety.unsafe_reason``) so admission and rendering agree.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from validators import pcre, safety
from validators.findings import PathPart


class Unsafe(ValueError):
    """A value that cannot be written into the configuration safely."""


class FieldError(Exception):
    """A field of a route cannot be rendered: the route is left out and a deny finding names ``path``."""

    def __init__(self, message: str, path: tuple[PathPart, ...]) -> None:
        super().__init__(message)
        self.path = path


def guard(path: tuple[PathPart, ...], fn: Callable[..., str], *args: Any, **kw: Any) -> str:
    """Run an escaping function for the field at ``path``: an Unsafe value becomes a FieldError there."""
    try:
        return fn(*args, **kw)
    except Unsafe as exc:
        raise FieldError(str(exc), path) from None


_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# The header-name alphabet of seed 004 (RFC 9110 token characters minus # % ' ` and the map-key separator |).
# `$` and `&` are literal in a bare config word (HAProxy expands "$VAR" only inside double quotes, and
# header names are never written inside double quotes; checked live on 2.8 and 3.2).
_HEADER = re.compile(r"[A-Za-z0-9!$&*+.^_~-]+\Z")
_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\Z")
_METHOD = re.compile(r"[A-Z]{1,20}\Z")


_PLAIN_KEY = re.compile(r"[\x21-\x7e]*\Z")
_PLAIN_VALUE = re.compile(r"[\x20-\x7e]*\Z")


def check(value: str, *, key: bool, what: str = "value") -> str:
    """Return ``value`` unchanged, or raise Unsafe when it cannot be represented."""
    if not isinstance(value, str):
        raise Unsafe(f"{what} must be a string")
    if (_PLAIN_KEY if key else _PLAIN_VALUE).match(value):
        return value  # printable ASCII (no whitespace for keys): the common case, no per-character scan
    reason = safety.unsafe_reason(value, key=key)
    if reason is not None:
        raise Unsafe(f"{what} cannot be rendered safely: {reason}")
    return value


def quote(value: str) -> str:
    """A single-quoted config word: HAProxy does no escaping or expansion inside '...'."""
    check(value, key=False)
    return "'" + value.replace("'", "'\\''") + "'"


# a '...' span (or one left open to the end): literal, one piece of a word whatever it holds
_SINGLE_QUOTED = re.compile(r"'[^']*(?:'|\Z)")


def word_count(text: str) -> int:
    """How many words HAProxy's line parser makes of ``text``: blanks separate words outside quotes,
    '...' is literal, "..." and bare text take backslash escapes, and ``#`` outside quotes ends the line.
    A word quoted by :func:`quote` is one word however many spaces it holds."""
    if '"' not in text and "\\" not in text and "#" not in text:
        # only blanks and '...' spans matter: each span stands for one word character
        bare = _SINGLE_QUOTED.sub("x", text) if "'" in text else text
        pieces = bare.replace("\t", " ").split(" ")
        return len(pieces) - pieces.count("")
    return _word_count(text)


def _word_count(text: str) -> int:
    """``word_count`` character by character (double quotes, backslashes, comments)."""
    count, quote_char, escaped, in_word = 0, "", False, False
    for ch in text:
        if escaped:
            escaped = False
        elif quote_char == "'":
            quote_char = "" if ch == "'" else quote_char
        elif ch == "\\":
            escaped = True
        elif quote_char == '"':
            quote_char = "" if ch == '"' else quote_char
        elif ch in "'\"":
            quote_char = ch
        elif ch in " \t":
            in_word = False
            continue
        elif ch == "#":
            break
        if not in_word:
            count, in_word = count + 1, True
    return count


def lf_escape(value: str) -> str:
    """Literal text for a log-format string: ``%`` doubled so it can never start ``%[...]``."""
    check(value, key=False)
    return value.replace("%", "%%")


def lf_quote(value: str) -> str:
    """A quoted config word that HAProxy parses again as log-format."""
    return quote(lf_escape(value))


def map_key(value: str) -> str:
    """A map key: one word, no whitespace, and never a comment line."""
    check(value, key=True, what="map key")
    if not value:
        raise Unsafe("map key must not be empty")
    if value.startswith("#"):
        raise Unsafe("map key must not start with '#' (HAProxy would read a comment)")
    return value


# One map line in the common case: a printable key not starting with '#', optionally one space and a
# printable value without surrounding whitespace. Lines that do not match take the slow, explaining path.
_PLAIN_ENTRY = re.compile(r"[\x21-\x22\x24-\x7e][\x21-\x7e]*(?: [\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?\Z")


def map_entry(entry: str) -> str:
    """A whole ``key value`` map line (the 100-slot weight maps make this the hottest check)."""
    if _PLAIN_ENTRY.match(entry):
        return entry
    key, _, value = entry.partition(" ")
    map_key(key)
    if value:
        map_value(value)
    return entry


def map_value(value: str) -> str:
    """A map value (the rest of the line): no line breaks; surrounding spaces would be lost."""
    check(value, key=False, what="map value")
    if value != value.strip():
        raise Unsafe("map value must not start or end with whitespace")
    return value


# what urllib.parse.quote never encodes (its always-safe set): such a value is its own URL encoding
_URL_PLAIN = re.compile(r"[A-Za-z0-9_.~-]*\Z")


def url_value(value: str) -> str:
    """Any printable text as one map value: URL-encoded (decoded at request time with url_dec)."""
    if type(value) is str and _URL_PLAIN.match(value):
        return value  # printable ASCII, nothing to encode: what check and quote give back
    check(value, key=False)
    return urllib.parse.quote(value, safe="")


def ident(value: str, *, what: str = "name") -> str:
    """A bare identifier used in section names, variable keys and map values."""
    if type(value) is str and _IDENT.match(value):
        return value  # printable ASCII without whitespace: ``check`` would pass it
    check(value, key=True, what=what)
    if not _IDENT.match(value):
        raise Unsafe(f"{what} {value!r} may only contain letters, digits, '.', '_' and '-'")
    return value


def header_name(value: str) -> str:
    """A header name written bare into the config (inside sample-fetch arguments too)."""
    if type(value) is str and _HEADER.match(value):
        return value  # printable ASCII without whitespace: ``check`` would pass it
    check(value, key=True, what="header name")
    if not _HEADER.match(value):
        raise Unsafe(f"header name {value!r} may only contain letters, digits and !$&*+.^_~-")
    return value


# RFC 9110 ``tchar``: every character HTTP allows in a header name, and what the Gateway API CRDs' own
# pattern for header and query parameter names accepts (^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$).
_TCHAR = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+\Z")
_KEY_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!$&*+.^_~-")


def http_token(value: str, *, what: str = "header name") -> str:
    """A name HTTP allows (an RFC 9110 token), unchanged; Unsafe otherwise."""
    if type(value) is str and _HEADER.match(value):
        return value
    check(value, key=True, what=what)
    if not _TCHAR.match(value):
        raise Unsafe(f"{what} {value!r} is not an HTTP token: only letters, digits and !#$%&'*+.^_`|~-")
    return value


def header_word(value: str) -> str:
    """A header name as one config word (``set-header NAME``, ``del-header NAME``): bare when it holds
    nothing the config parser reads (``#`` starts a comment, ``'`` a quote), else single-quoted, which
    HAProxy takes literally. Checked live on 2.8 and 3.2 (tests/render/test_header_tokens.py)."""
    http_token(value)
    return value if _HEADER.match(value) else quote(value)


def header_fetch(fetch: str, value: str) -> str:
    """``fetch(NAME)`` (``req.hdr``, ``urlp``) as one config word. A name beyond the bare alphabet goes in
    double quotes inside the argument (HAProxy's argument parser takes ``"..."`` literally, and no token
    holds ``"`` or a backslash), and the whole word in single quotes for the line parser."""
    http_token(value, what="query parameter name" if fetch == "urlp" else "header name")
    if _HEADER.match(value):
        return f"{fetch}({value})"
    return quote(f'{fetch}("{value}")')


def bare_text(value: str) -> str:
    """``value`` for a free-text description (a debug header): characters beyond the bare header alphabet
    as ``?``."""
    return "".join(ch if ch in _KEY_SAFE else "?" for ch in value)


def header_key(value: str) -> str:
    """A header name inside a map key and in the ``concat()`` argument that builds the same key at request
    time: a name of the bare alphabet as it is, any other character as ``=XX`` (its hex code). ``=`` is no
    token character, so no name is read as another's encoding; the key needs no quoting anywhere."""
    http_token(value)
    if _HEADER.match(value):
        return value
    return "".join(ch if ch in _KEY_SAFE else f"={ord(ch):02X}" for ch in value)


# The GRPCRoute CRD's own patterns for an Exact method match (its x-kubernetes-validations): a service is a
# (fully qualified, optionally dot-led) protobuf name, a method an identifier. Both become literal map-key
# paths ``/service/method`` (and the method a PCRE-escaped regex when alone), which any of them can be.
_GRPC = {"service": re.compile(r"\.?[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*\Z"),
         "method": re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")}


def grpc_name(value: str, part: str) -> str:
    """A gRPC service or method name of an Exact match, as the CRD allows it."""
    check(value, key=True, what=f"gRPC {part}")
    if not _GRPC[part].match(value):
        allowed = ("a protobuf name: letters, digits and _ in dot-separated parts, none starting with a digit, "
                   "optionally led by a dot") if part == "service" else \
            "letters, digits and _, not starting with a digit"
        raise Unsafe(f"gRPC {part} {value!r} must be {allowed}")
    return value


def hostname(value: str) -> str:
    """A lowercase DNS name, optionally with a leading ``*.`` wildcard label."""
    if type(value) is str and _HOST.match(value):
        return value  # printable ASCII without whitespace: ``check`` would pass it
    check(value, key=True, what="hostname")
    if not _HOST.match(value):
        raise Unsafe(f"hostname {value!r} is not a lowercase DNS name (optionally starting with '*.')")
    return value


def method(value: str) -> str:
    check(value, key=True, what="method")
    if not _METHOD.match(value):
        raise Unsafe(f"method {value!r} must be upper-case letters")
    return value


def path(value: str) -> str:
    """A request path used as (part of) a map key."""
    check(value, key=True, what="path")
    if not value.startswith("/"):
        raise Unsafe(f"path {value!r} must start with '/'")
    return value


# A dotted quad as ipaddress reads it (ASCII digits, no leading zero; each part is checked to be at most
# 255): an IPv4 address that is its own canonical text.
DOTTED_QUAD = re.compile(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\Z")


def dotted_quad(value: str) -> tuple[int, int, int, int] | None:
    """The four parts of ``value`` when it is a plain IPv4 address (``DOTTED_QUAD``), else None: read
    without ipaddress, which takes ten times as long (most endpoints are one)."""
    found = DOTTED_QUAD.match(value)
    if found is None:
        return None
    a, b, c, d = (int(part) for part in found.groups())
    return (a, b, c, d) if a < 256 and b < 256 and c < 256 and d < 256 else None


def server_address(value: str, *, what: str = "server address") -> str:
    """The address word of a ``server`` line (without the port): an IP literal or a DNS name.

    Python's ``ipaddress`` accepts an IPv6 zone of any characters (``fe80::1%eth0 weight 9``, ``%${X}``);
    HAProxy would read the rest of the zone as more words of the line, so a zone is refused. IPv6
    addresses come back bracketed, ready to take a ``:port``.
    """
    check(value, key=True, what=what)
    if dotted_quad(value) is not None:
        return value  # its own canonical text, as str(ipaddress.ip_address(value)) says
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return ident(value, what=what)  # a DNS name: a plain word
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is not None:
        raise Unsafe(f"{what} {value!r} has an IPv6 zone ('%...'); a server address cannot carry one")
    return f"[{ip}]" if ip.version == 6 else str(ip)


@functools.lru_cache(maxsize=1 << 16)
def server_address_and_port(address: str, port: int) -> str:
    """A server's address as its haproxy.cfg line and a runtime ``add server`` say it: ``ip:port``,
    ``[ip6]:port`` or ``name:port``. Remembered, since the same endpoints come back in every render and
    parsing an address costs more than the rest of the server line."""
    return f"{server_address(address)}:{port}"


def regex(value: str) -> str:
    """A PCRE pattern for a map key or an ACL word: inside the allow-listed subset (``validators.pcre``),
    so the group the renderer wraps it in closes where the renderer closes it."""
    check(value, key=True, what="regular expression")
    problem = pcre.problem(value, top_level_alternation=True)
    if problem is not None:
        raise Unsafe(f"regular expression {value!r} is refused: {problem}")
    return value


def value_regex(value: str) -> str:
    """A regex matched against a header or query value: the same subset, literal spaces allowed."""
    check(value, key=False, what="regular expression")
    problem = pcre.problem(value, top_level_alternation=True, spaces=True)
    if problem is not None:
        raise Unsafe(f"regular expression {value!r} is refused: {problem}")
    return value
