"""The Gateway API statuses of what reconcile promotes, recomputed only for the objects whose inputs changed.

``statuses.all_statuses(view)`` computes every route's, Gateway's, ListenerSet's and BackendTLSPolicy's
status on every run: O(state). ``PromotedStatuses`` keeps each object's status with everything it
read (``validators.views.dependents``), and whether the object is ours (a GatewayClass scope: another
controller's route or policy is not ours to describe) with what that read, and computes again only the
objects whose status inputs or scope changed since the previous run. The table it returns equals
``Reconciler``'s from-scratch ``all_statuses`` filtered by scope, key for key
(tests/reconcile/test_promoted_statuses.py); ``changed`` says which keys differ from the previous run's
table, so a consumer can look at those only.
"""

from __future__ import annotations

import threading
from typing import Any

from validators.crossobject import statuses
from validators.objects import Obj, Ref
from validators.states import State
from validators.views.dependents import Dependents
from validators.views.scopes import Scope
from webhook.reconcile import audits


class PromotedStatuses:
    """One per reconciler (its scope); ``of`` calls are serialized by a lock."""

    def __init__(self, scope: Scope | None) -> None:
        self.scope = scope
        self._status: Dependents[dict[str, Any] | None] = Dependents(
            lambda obj, view: statuses.status_of(obj, view), statuses.STATUS_KINDS)
        self._ours: Dependents[bool] | None = None
        if scope is not None and not scope.everything:
            self._ours = Dependents(self._is_ours, statuses.STATUS_KINDS)
        self._table: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.changed: set[str] = set()  # keys whose status differs from the previous run's table
        self.computed = 0  # statuses computed (not reused) by the last run

    def of(self, view: State, state: State) -> dict[str, Any]:
        """The statuses of ``view`` (what is promoted), of our objects in ``state`` (the scoped state):
        a new table each run (the previous one may still be remembered for an older version)."""
        with self._lock:
            touched = self._status.update(view)
            if self._ours is not None:
                touched |= self._ours.update(state)
            self.computed = self._status.computed
            self.changed = set()
            for ref in touched:
                key = str(ref)
                status = self._status.results.get(ref)
                if status is not None and self._ours is not None:
                    if ref in self._ours.results:
                        mine = self._ours.results[ref]
                    else:  # not in ``state``: the from-scratch filter keeps what it cannot look up
                        mine = state.get(ref.kind, ref.namespace, ref.name) is None
                    if not mine:
                        status = None
                if status is None:
                    if self._table.pop(key, None) is not None:
                        self.changed.add(key)
                elif self._table.get(key) != status:
                    self._table[key] = status
                    self.changed.add(key)
            return dict(self._table)

    def _is_ours(self, obj: Obj, state: State) -> bool:
        ours = audits.ours_in(self.scope, state)
        return ours is None or ours(obj)


def from_scratch(view: State, state: State, scope: Scope | None) -> dict[str, Any]:
    """What ``PromotedStatuses.of`` must equal: every status of ``view``, of our objects of ``state``."""
    found = statuses.all_statuses(view)
    ours = audits.ours_in(scope, state)
    if ours is None:
        return found
    kept: dict[str, Any] = {}
    for key, status in found.items():
        ref: Ref | None = audits.parse_ref(key)
        obj = state.get(ref.kind, ref.namespace, ref.name) if ref is not None else None
        if obj is None or ours(obj):
            kept[key] = status
    return kept
