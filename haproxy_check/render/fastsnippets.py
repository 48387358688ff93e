"""Shipped snippets written out in Python: the same bytes as their jinja2 template, without the sandbox's
cost per attribute and call (one backend section per (route, Service, port) makes ``600-http-backends``
one of the costliest steps of a large render).

A fast snippet stands in for a template only when the template jinja2 would render is the shipped file
itself, unchanged (its path is in ``templates/`` and its text has the digest the Python version was
written for): a user template that overrides it, or an edited shipped file, renders through jinja2 as
before. When the Python version raises, the render undoes what it recorded and runs the template,
so an error says what the template's error says (with the template line).
tests/render/test_fast_paths.py renders drawn states both ways and compares them byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

BUILTIN = Path(__file__).parent / "templates"

Snippet = Callable[[Mapping[str, Any]], str]

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


# template name -> (sha256 of the shipped text the Python version reproduces, the Python version)
SHIPPED: dict[str, tuple[str, Snippet]] = {
    "600-http-backends.cfg.j2": ("b2d31650014ef7672ef51ac35b60097f738f59dc8d0790db2763d7823b8a826e", http_backends),
    "900-http-maps.cfg.j2": ("59b069765790fe8d79c7f22f37775a2d043ffddf8a0eb6b607b6eab06f8b78d1", http_maps),
}

_checked: dict[tuple[str, str, int], bool] = {}


def for_template(name: str, filename: str | None) -> Snippet | None:
    """The Python version of the template jinja2 loaded from ``filename``, when that is the shipped file
    as it was written for; None otherwise."""
    known = SHIPPED.get(name)
    if known is None or filename is None:
        return None
    path = Path(filename)
    if path.parent != BUILTIN or path.name != name:
        return None
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    key = (name, filename, mtime)
    same = _checked.get(key)
    if same is None:
        same = _checked[key] = hashlib.sha256(path.read_bytes()).hexdigest() == known[0]
    return known[1] if same else None
