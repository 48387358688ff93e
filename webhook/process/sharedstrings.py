"""One string object per distinct string value in a loaded state.

A decoded manifest holds a separate ``str`` for every occurrence of a value: each route's
``"gateway.networking.k8s.io/v1"``, ``"HTTPRoute"``, its namespace, ``"PathPrefix"``, every
``creationTimestamp`` written by one controller run. At 10,000 routes that is ~420,000 strings of which
~110,000 are distinct: ~17 MiB that a server holding the state for its lifetime need not keep. Strings
are immutable, so pointing every occurrence at one of them changes no value anybody reads. (Mapping
keys are left alone: ``json`` already shares them within a file.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def share_strings(objects: Iterable[Any]) -> None:
    """Replace, in place, every string value under ``objects`` (plain dicts and lists, as decoded
    from JSON or YAML) by the first equal string seen. Other containers are left as they are."""
    seen: dict[str, str] = {}
    keep = seen.setdefault
    stack: list[Any] = [o for o in objects if type(o) in (dict, list)]
    pop, push = stack.pop, stack.append
    while stack:  # iterative: a deep document cannot exhaust the recursion limit
        node = pop()
        items = node.items() if type(node) is dict else enumerate(node)
        for key, value in items:
            kind = type(value)
            if kind is str:
                node[key] = keep(value, value)  # the same key: the mapping's size does not change
            elif kind is dict or kind is list:
                push(value)
