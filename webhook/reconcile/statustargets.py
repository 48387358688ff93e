"""The status targets of a promoted version, built again only for the objects whose inputs changed.

``statusshapes.targets`` turns every object of ours into the status it should carry (``Target``), from
the scoped state, the computed statuses and the run's facts: O(state) per run, and the writer then
fingerprints every one. ``StatusTargets`` keeps each object's Target (``validators.views.dependents``:
with what it read of the state) and builds again only those whose object or state reads changed,
whose computed status is another one (``webhook.reconcile.promotedstatuses`` hands the same status object for
an unchanged status, so this is an identity check per key), or whose facts (held back, served in
part, a custom Route's findings) differ; a change to what every Target reads (the data plane's
addresses, whether it loaded the version, the CRD bundle version, our controllers) builds them all.
An unchanged Target is the very object handed before, so the writer's fingerprint of it is reused.
The list equals ``statusshapes.targets`` on the same inputs, Target for Target
(tests/reconcile/test_status_targets.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from validators.objects import KINDS, Obj, Ref, kind_of
from validators.states import State
from validators.views.dependents import Dependents
from validators.views.scopes import Scope
from webhook.reconcile import audits, statusshapes


class StatusTargets:
    """One per status hook (its scope); ``of`` calls are serialized by a lock."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        kinds = [k for k in statusshapes.WRITTEN_KINDS if KINDS.get(k) is not None]
        self._targets: Dependents[statusshapes.Target | None] = Dependents(self._target, kinds)
        self._computed: Mapping[str, Any] = {}
        self._facts = statusshapes.Facts()
        self._controllers: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self.built = 0  # Targets built (not reused) by the last call

    def of(self, scoped: State, computed: Mapping[str, Any], facts: statusshapes.Facts) -> list[statusshapes.Target]:
        """``statusshapes.targets(scoped, computed, facts, scope)``, built again only where inputs changed."""
        with self._lock:
            controllers = statusshapes.our_controllers(scoped, self.scope)
            everything = (controllers != self._controllers or _shared(facts) != _shared(self._facts))
            also: set[Ref] = set()
            if not everything:
                keys = [k for k, v in computed.items() if self._computed.get(k) is not v]
                keys += [k for k in self._computed if k not in computed]
                for key in keys:
                    ref = audits.parse_ref(key)
                    if ref is not None:
                        also.add(ref)
                for table, before in ((facts.held, self._facts.held), (facts.partial, self._facts.partial),
                                      (facts.routes, self._facts.routes)):
                    also.update(r for r in table.keys() | before.keys() if table.get(r) != before.get(r))
                if any(r.kind == "ListenerSet" for r in also):  # a Gateway counts its ListenerSets' statuses
                    also.update(ref for ref in self._targets.results if ref.kind == "Gateway")
            self._computed, self._facts, self._controllers = computed, facts, controllers
            self._targets.update(scoped, also, everything=everything)
            self.built = self._targets.computed
            return [t for t in self._targets.results.values() if t is not None]

    def _target(self, obj: Obj, state: State) -> statusshapes.Target | None:
        info = KINDS[kind_of(obj)]
        return statusshapes.target_of(obj, info.plural, state, self._computed, self._facts, self.scope,
                                      self._controllers)


def _shared(facts: statusshapes.Facts) -> tuple[Any, ...]:
    """What of the facts every Target may read (the version only in the message of a data plane that
    has not loaded it)."""
    return facts.dataplane, facts.version if not facts.dataplane else "", facts.addresses, facts.bundle_version
