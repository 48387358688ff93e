"""Shipped snippets written out in Python: the same bytes as their jinja2 template, without the sandbox's
cost per attribute and call (one backend section per (route, Service, port) makes ``600-http-backends``
one of the costliest steps of a large render).

A fast snippet stands in for a template only when the template jinja2 would render is the shipped file
itself, unchanged (its path is in ``templates/`` and its text has the digest the Python version was
written for): a user template that overrides it, or an edited shipped file, renders through jinja2 as
before. When the Python version raises, the render undoes what it recorded and runs the template,
so an error says what the template's error says (with the template line).
tests/render/test_fast_paths.py renders drawn states both ways and compares them byte for byte.

Some Python versions write only the common case: the snippets of TLS, TCP and custom Routes, SPOE and
resolvers render nothing for a state without such objects (most states, and nearly every review's
closure), yet each cost a sandboxed render (a new context, ~40-110 us) twice per review. Their Python
version returns "" when the template would write nothing, reading the same lazy models in the same
order (so the same models get built), and None otherwise: the template then renders as before.
Those marked ``records_nothing`` write no backend, profile or map before deciding, so the render
runs them without the snapshot ``Recorder.attempt`` takes to undo a failing snippet's records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from haproxy_check.render import fastfrontends

BUILTIN = Path(__file__).parent / "templates"

# The text the template would write, or None: "not written in Python for this input, render the template".
Snippet = Callable[[Mapping[str, Any]], str | None]

_TIMEOUT_PROFILE = ("http-request set-timeout server var(txn.gw_rule_id),map_str_int(maps/gw-timeouts.map) if "
                    "{ var(txn.gw_rule_id),map_str(maps/gw-timeouts.map) -m found }")


def _dictsort_key(item: tuple[Any, Any]) -> Any:
    """jinja2's ``dictsort`` (by key, case-insensitive)."""
    key = item[0]
    return key.lower() if isinstance(key, str) else key


def http_backends(context: Mapping[str, Any]) -> str:
    """``600-http-backends.cfg.j2``."""
    backend = context["Backend"]
    out: list[str] = []
    for name, be in sorted(context["http"].backends.items(), key=_dictsort_key):
        text = backend({"name": name, "mode": "http", "balance": "roundrobin",
                        "profile": [_TIMEOUT_PROFILE, *be.profile], "servers": be.servers,
                        "comments": be.comments})
        out.append(str(text).replace(f"backend {name} from", f"backend {name}{be.mark} from", -1))
        out.append("\n")
    return "".join(out)


def http_maps(context: Mapping[str, Any]) -> str:
    """``900-http-maps.cfg.j2``: every HTTP map registered (empty ones too), no text. Through jinja2 its
    36 sandboxed calls were about a seventh of a one-route closure's render, which a review does twice."""
    http, register = context["http"], context["RegisterMap"]
    for name in context["MAPS"]:
        register(name, http.map_entries(name), {"ordered": name in http.ordered})
    return ""


def _records_nothing(snippet: Snippet) -> Snippet:
    """Marks a snippet that records nothing before it returns or raises (``Recorder.attempt``)."""
    snippet.records_nothing = True  # type: ignore[attr-defined]
    return snippet


@_records_nothing
def tls_frontends(context: Mapping[str, Any]) -> str | None:
    """``450-tls-frontends.cfg.j2`` without TLS frontends."""
    return None if context["l4"].tls.frontends else ""


@_records_nothing
def tcp_frontends(context: Mapping[str, Any]) -> str | None:
    """``460-tcp-frontends.cfg.j2`` without TCP frontends."""
    return None if context["l4"].tcp.frontends else ""


@_records_nothing
def route_crd_frontends(context: Mapping[str, Any]) -> str | None:
    """``500-route-crd-frontends.cfg.j2`` without custom Routes (the template's ``and`` reads nothing more)."""
    return None if context["l4"].crd.routes else ""


@_records_nothing
def tls_backends(context: Mapping[str, Any]) -> str | None:
    """``650-tls-backends.cfg.j2`` without TLSRoute backends and hops (read in the template's order)."""
    tls = context["l4"].tls
    return None if tls.backends or tls.hops else ""


@_records_nothing
def tcp_backends(context: Mapping[str, Any]) -> str | None:
    """``660-tcp-backends.cfg.j2`` without TCPRoute backends."""
    return None if context["l4"].tcp.backends else ""


def route_crd_backends(context: Mapping[str, Any]) -> str | None:
    """``670-route-crd-backends.cfg.j2`` without custom Routes: no backend, the three maps registered as the
    template registers them (it registers them whatever they hold)."""
    crd = context["l4"].crd
    if crd.routes:
        return None
    register = context["RegisterMap"]
    register("route-reqhdr.map", crd.header_entries, {"ordered": False})
    register("route-crd-exact.map", crd.exact_entries, {"ordered": False})
    register("route-crd-prefix.map", crd.prefix_entries, {"ordered": True})
    return ""


@_records_nothing
def spoa_backends(context: Mapping[str, Any]) -> str | None:
    """``680-spoa-backends.cfg.j2`` when no rule uses ExternalAuth."""
    return None if "auth" in context["http"].uses else ""


@_records_nothing
def resolvers(context: Mapping[str, Any]) -> str | None:
    """``990-resolvers.cfg.j2`` when no backend rendered so far resolves a name at run time."""
    return None if context["uses_resolvers"]() else ""


# template name -> (sha256 of the shipped text the Python version reproduces, the Python version)
SHIPPED: dict[str, tuple[str, Snippet]] = {
    "600-http-backends.cfg.j2": ("b2d31650014ef7672ef51ac35b60097f738f59dc8d0790db2763d7823b8a826e", http_backends),
    "900-http-maps.cfg.j2": ("59b069765790fe8d79c7f22f37775a2d043ffddf8a0eb6b607b6eab06f8b78d1", http_maps),
    "450-tls-frontends.cfg.j2": ("cc4b5360aeb95e1025e91e5a8c947e93ed729fbac957f013e9cc679021f4f2f7", tls_frontends),
    "460-tcp-frontends.cfg.j2": ("c57eb97d1691db90265b03fa776d7526d593760460ebb24bb493e6430c3e98da", tcp_frontends),
    "500-route-crd-frontends.cfg.j2": ("e1109d52dcab0f0a4b22f08b5c6f9ccad7855279c8174bca6b609d54ef1b1dd6",
                                       route_crd_frontends),
    "650-tls-backends.cfg.j2": ("eb31f07046038a82bf1480bc19a616dabefb2097ad62c4e57ec9d18921377a0e", tls_backends),
    "660-tcp-backends.cfg.j2": ("3fed9481f5668d902cd2e361b1331256270be573723d4e1ae92e0df4d4eb76f0", tcp_backends),
    "670-route-crd-backends.cfg.j2": ("2f4449ec445aa7b40c7f4ad68e884629afedff82f780c12e00d25b6f206c4e2e",
                                      route_crd_backends),
    "680-spoa-backends.cfg.j2": ("c79a451d8a26bb513525a319b59f2fd06aecf1d2df5cabdad989361dc57bc684", spoa_backends),
    "990-resolvers.cfg.j2": ("7bfacedaa3fb7d8df073c9e364544f255455ce8bce674f7f6bda6f4afc113b8e", resolvers),
    "400-http-frontends.cfg.j2": ("fea221a420b03e0bd6301707cf8cb19081214a61231cf098c54feaef55f9dd5d",
                                  _records_nothing(fastfrontends.http_frontends)),
}

# template name -> {included snippet name: sha256 of its shipped text}: a Python version that writes
# what those snippets write too stands in only while each is the shipped file
INCLUDES: dict[str, dict[str, str]] = {"400-http-frontends.cfg.j2": fastfrontends.INCLUDED}

_checked: dict[tuple[str, str, int], bool] = {}


def _shipped(name: str, filename: str | None, digest: str) -> bool:
    """``filename`` is the shipped file ``name`` with the text of ``digest``."""
    if filename is None:
        return False
    path = Path(filename)
    if path != BUILTIN / name:
        return False
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return False
    key = (name, filename, mtime)
    same = _checked.get(key)
    if same is None:
        same = _checked[key] = hashlib.sha256(path.read_bytes()).hexdigest() == digest
    return same


def for_template(name: str, filename: str | None,
                 file_of: Callable[[str], str | None] | None = None) -> Snippet | None:
    """The Python version of the template jinja2 loaded from ``filename``, when that is the shipped file
    as it was written for (and, for one that writes its included snippets too, each of those as
    ``file_of`` resolves it, the renderer's loader order); None otherwise."""
    known = SHIPPED.get(name)
    if known is None or not _shipped(name, filename, known[0]):
        return None
    included = INCLUDES.get(name, {})
    if included and (file_of is None or not all(_shipped(inc, file_of(inc), digest)
                                                for inc, digest in included.items())):
        return None
    return known[1]
