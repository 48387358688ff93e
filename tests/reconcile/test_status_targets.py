"""The status hook builds Targets O(change) (``webhook.reconcile.statustargets``): over the derandomized change
sequences of test_audit_sequences, with facts that change along (objects held back and served in part,
the data plane loading the version or not), after every step the Targets equal a from-scratch
``statusshapes.targets``, Target for Target; and the writer fingerprints only Targets it was not
handed before. Sabotage: ignoring a changed computed status makes the differential fail."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.reconcile.test_audit_sequences import SCOPED, _states, sequences
from validators.objects import Obj, Ref
from validators.states import State
from validators.views.scopes import Scope
from webhook.reconcile import promotedstatuses, statusshapes, statustargets


def _facts(n: int, state: State) -> statusshapes.Facts:
    routes = [r for kind in ("HTTPRoute", "GRPCRoute", "TLSRoute") for r in state.list(kind)]
    held: dict[Ref, str] = {}
    partial: dict[Ref, str] = {}
    if routes and n % 2:
        from validators.objects import ref_of

        held[ref_of(routes[n % len(routes)])] = "spec.rules[0]: HAProxy refused it"
        partial[ref_of(routes[0])] = "no session persistence on spec.rules[0]"
    return statusshapes.Facts(held=held, partial=partial, dataplane=n % 3 != 2, version=f"v{n // 3}",
                              addresses=("10.0.0.1",))


def _mismatches(case: tuple[list[Obj], list[tuple[Ref, Obj | None]]]) -> list[str]:
    objects, steps = case
    found = []
    for scope in (Scope(), SCOPED):
        targets = statustargets.StatusTargets(scope)
        computing = promotedstatuses.PromotedStatuses(scope)
        for n, ((linked, _, _), _) in enumerate(_states(objects, steps)):
            scoped = scope.view(linked)
            computed = computing.of(scoped, scoped)
            facts = _facts(n, scoped)
            got = {t.ref: t for t in targets.of(scoped, computed, facts)}
            want = {t.ref: t for t in statusshapes.targets(scoped, computed, facts, scope)}
            if got != want:
                found.append(f"step {n}, scope {scope}: {sorted(set(got) ^ set(want))} "
                             f"{[r for r in got if r in want and got[r] != want[r]]}")
    return found


def _differential(examples: int, *, stop_at_first: bool = False) -> list[list[str]]:
    results: list[list[str]] = []

    @given(sequences())
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    def run(case: tuple[list[Obj], list[tuple[Ref, Obj | None]]]) -> None:
        if stop_at_first and any(results):
            return  # a sabotage test needs one mismatch, not all of them
        results.append(_mismatches(case))

    run()
    return results


def test_targets_built_incrementally_equal_the_full_build_after_every_step() -> None:
    results = _differential(20)
    assert all(not r for r in results), [r for r in results if r]


def test_the_differential_fails_when_a_changed_status_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    update = statustargets.Dependents.update

    def blind(self: Any, state: State, also: Any = (), *, everything: bool = False) -> set[Ref]:
        return update(self, state, (), everything=everything)  # no computed status or fact seen to change

    monkeypatch.setattr(statustargets.Dependents, "update", blind)
    assert any(_differential(12, stop_at_first=True))


async def test_an_unchanged_target_is_not_fingerprinted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer reuses the fingerprint of a Target object it was handed before."""
    from webhook.reconcile.statuswriter import StatusWriter

    printed: list[Ref] = []
    fingerprint = statusshapes.Target.fingerprint

    def counted(self: statusshapes.Target) -> str:
        printed.append(self.ref)
        return fingerprint(self)

    monkeypatch.setattr(statusshapes.Target, "fingerprint", counted)
    writer = StatusWriter(None)
    a = statusshapes.Target(Ref("HTTPRoute", "a", "one"), "gateway.networking.k8s.io/v1", "httproutes", 1, {})
    b = statusshapes.Target(Ref("HTTPRoute", "a", "two"), "gateway.networking.k8s.io/v1", "httproutes", 1, {})
    writer.submit([a, b], complete=True)
    writer._done = {t.ref: (writer._fingerprint(t), writer._clock()) for t in (a, b)}
    printed.clear()
    changed = statusshapes.Target(b.ref, b.api_version, b.plural, 2, {})
    assert writer.submit([a, changed], complete=True) == 1
    assert printed == [b.ref]
