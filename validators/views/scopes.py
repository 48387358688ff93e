"""Which Gateways are ours: the GatewayClass scope (``--gateway-class``, ``--controller-name``).

A cluster may run several Gateway API implementations. Only Gateways whose class is one of ours are
rendered and judged; everything else is another controller's business. The scope is one State view
(:class:`ScopedState`) applied where the Gate gets its state, so the rules, the delta closure and the
renderer all see the same objects:

- a foreign Gateway, and a ListenerSet of one, is not listed; ``get`` returns a :class:`Foreign`
  stub without listeners, so a route's parentRef to it resolves to "another controller's parent"
  (``attachments.FOREIGN_PARENT``: no finding, no status) instead of "does not exist";
- every other kind passes through untouched (the Route CRD is rendered into our frontends only,
  because only our Gateways are listed).

Whether a Gateway is ours is a lookup of its GatewayClass by name (O(1) per Gateway); the filtered
Gateway list is kept per state version. Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from validators.changes import Change, Operation
from validators.objects import Obj, Ref, as_list, dig, kind_of, name_of, namespace_of
from validators.states import Overlay, State, Without
from validators.views import attachments, closures
from validators.views.foreign import Foreign, is_foreign

SOURCE_KINDS = frozenset({"Gateway", "ListenerSet"})


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Scope:
    """Our GatewayClasses, by name and/or by ``spec.controllerName``; both empty: every class."""

    classes: frozenset[str] = frozenset()
    controllers: frozenset[str] = frozenset()

    @classmethod
    def of(cls, classes: Iterable[str] = (), controllers: Iterable[str] = ()) -> Scope:
        return cls(frozenset(c for c in classes if c), frozenset(c for c in controllers if c))

    @property
    def everything(self) -> bool:
        return not self.classes and not self.controllers

    def describe(self) -> str:
        if self.everything:
            return ("every GatewayClass (no --gateway-class or --controller-name set, nor gatewayClasses or "
                    "controllerNames in --config)")
        parts = [f"GatewayClass {', '.join(sorted(self.classes))}" if self.classes else "",
                 f"controllerName {', '.join(sorted(self.controllers))}" if self.controllers else ""]
        return " or ".join(p for p in parts if p)

    def owns_class(self, class_name: str, state: State) -> bool:
        if self.everything or class_name in self.classes:
            return True
        if not self.controllers:
            return False
        gateway_class = state.get("GatewayClass", "", class_name)
        return _str(dig(gateway_class, "spec", "controllerName")) in self.controllers

    def owns_gateway(self, gateway: Obj, state: State) -> bool:
        return self.owns_class(_str(dig(gateway, "spec", "gatewayClassName")), state)

    def owns_source(self, obj: Obj, state: State) -> bool:
        """A Gateway of our class, or a ListenerSet whose parent Gateway is one (a ListenerSet whose
        parent does not exist counts as ours: the rules report the missing parent)."""
        if kind_of(obj) == "Gateway":
            return self.owns_gateway(obj, state)
        parent = attachments.listener_set_parent(obj)
        if parent is None:
            return True
        gateway = state.get("Gateway", parent.namespace, parent.name)
        return gateway is None or self.owns_gateway(gateway, state)

    def view(self, state: State) -> State:
        """``state`` seen through this scope (``state`` itself when the scope is every class)."""
        if self.everything or isinstance(state, ScopedState):
            return state
        return _views(self).view(state)

    def out_of_scope(self, change: Change, state: State) -> str:
        """Why the change's subject is another controller's ("" = ours, or cannot tell: judge it).

        ``state`` is the scoped view (the subject's own parents and classes are read from it)."""
        if self.everything:
            return ""
        obj = change.subject
        kind = kind_of(obj)
        if kind in SOURCE_KINDS:
            if kind == "Gateway" and not self.owns_gateway(obj, state):
                return (f"Gateway class {_str(dig(obj, 'spec', 'gatewayClassName'))!r} is not "
                        f"one of ours ({self.describe()})")
            if kind == "ListenerSet" and not self.owns_source(obj, state):
                return f"its parent Gateway belongs to another controller (ours: {self.describe()})"
            return ""
        if kind in attachments.ROUTE_KINDS:
            parents = _parents(obj)
            if parents and all(is_foreign(state.get(p.kind, p.namespace, p.name)) for p in parents):
                return f"every parentRef names another controller's Gateway (ours: {self.describe()})"
            return ""
        if kind == "BackendTLSPolicy":
            return "" if _policy_is_ours(obj, state) else (
                f"no route of our Gateways ({self.describe()}) uses a Service it targets")
        return ""


def _parents(route: Obj) -> list[Ref]:
    return closures.parent_refs(route)


def _policy_is_ours(policy: Obj, state: State) -> bool:
    """A BackendTLSPolicy is ours when a route attached to one of our Gateways names a Service it
    targets (the closure index's Service -> routes table: no scan of the routes)."""
    index = closures.index_of(state)
    namespace = namespace_of(policy)
    for target in as_list(dig(policy, "spec", "targetRefs")):
        if _str(dig(target, "group")) != "" or (_str(dig(target, "kind")) or "Service") != "Service":
            continue
        for route_ref in index.users.get((namespace, _str(dig(target, "name"))), ()):
            route = state.get(route_ref.kind, route_ref.namespace, route_ref.name)
            if route is None:
                continue
            for parent in _parents(route):
                got = state.get(parent.kind, parent.namespace, parent.name)
                if got is not None and not is_foreign(got):
                    return True
    return False


class ScopedState:
    """``base`` without other controllers' Gateways and ListenerSets (see the module docstring)."""

    def __init__(self, base: State, scope: Scope) -> None:
        self._base = base
        self._scope = scope
        self._lists: dict[str, tuple[str, Sequence[Obj]]] = {}

    @property
    def base(self) -> State:
        return self._base

    @property
    def version(self) -> str:
        return f"{self._base.version}@scoped"

    def _ours(self, obj: Obj) -> bool:
        return self._scope.owns_source(obj, self._base)

    def list(self, kind: str) -> Sequence[Obj]:
        if kind not in SOURCE_KINDS:
            return self._base.list(kind)
        version = self._base.version
        hit = self._lists.get(kind)
        if hit is None or hit[0] != version:
            # Gateways and ListenerSets are few (one per tenant or app, not per route).
            hit = (version, [o for o in self._base.list(kind) if self._ours(o)])
            self._lists[kind] = hit
        return hit[1]

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        obj = self._base.get(kind, namespace, name)
        if obj is None or kind not in SOURCE_KINDS or self._ours(obj):
            return obj
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k in ("name", "namespace")}
        return Foreign(apiVersion=obj.get("apiVersion"), kind=kind, metadata=meta or
                       {"name": name_of(obj), "namespace": namespace_of(obj)})


class _Views:
    """One ScopedState per base state object, so the per-state indexes (validators.views.indexes) built
    on a view are reused by every review of that state version, not rebuilt per review."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope
        self._cache: weakref.WeakKeyDictionary[Any, ScopedState] = weakref.WeakKeyDictionary()

    def view(self, state: State) -> State:
        # Push the scope under the overlays ``routegate check`` and the Gate stack on a base (each
        # input against all the others), so they keep sharing the base's indexes. A change that adds
        # or alters a Gateway, ListenerSet or GatewayClass must be seen through the scope itself.
        if isinstance(state, Overlay):
            change = state.change
            if change.operation is Operation.DELETE or change.ref.kind not in {*SOURCE_KINDS, "GatewayClass"}:
                return Overlay(self.view(state.base), change)
        if isinstance(state, Without):
            return Without(self.view(state.base), state.hidden)
        try:
            hit = self._cache.get(state)
        except TypeError:
            return ScopedState(state, self._scope)
        if hit is None:
            hit = ScopedState(state, self._scope)
            with contextlib.suppress(TypeError):
                self._cache[state] = hit
        return hit


_VIEWS: dict[Scope, _Views] = {}


def _views(scope: Scope) -> _Views:
    views = _VIEWS.get(scope)
    if views is None:
        views = _VIEWS[scope] = _Views(scope)
    return views
