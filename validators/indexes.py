"""Lookup indexes over a State, built once per state version and shared by every caller.

Rendering asks "which ReferenceGrants are in namespace X", "which BackendTLSPolicies target Service Y",
"which EndpointSlices belong to Service Z" once per backendRef; scanning the whole kind each time makes
a render quadratic. ``index(state, name, build)`` builds ``build(state)`` on first use and keeps it
while ``state.version`` is unchanged (weakly keyed: a State's indexes go away with it). Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from validators.states import State

T = TypeVar("T")

_CACHE: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, Any]]] = weakref.WeakKeyDictionary()


def index(state: State, name: str, build: Callable[[State], T]) -> T:
    """``build(state)``, cached per (state object, ``name``) until ``state.version`` changes."""
    recorded = getattr(state, "recorded_index", None)
    if recorded is not None:  # a validators.reads.Recording view: the base's index, its lookups logged
        return recorded(name, build)  # type: ignore[no-any-return]
    try:
        per_state = _CACHE.get(state)
    except TypeError:  # a State that cannot be weakly referenced: build every time
        return build(state)
    version = state.version
    if per_state is not None:
        hit = per_state.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]  # type: ignore[no-any-return]
    value = build(state)
    if per_state is None:
        per_state = {}
        with contextlib.suppress(TypeError):
            _CACHE[state] = per_state
    per_state[name] = (version, value)
    return value
