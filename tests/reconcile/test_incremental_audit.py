"""The reconcile loop's audit is incremental (``audits.AuditCache``): across state versions it judges
again only objects whose content or reads changed, and its result equals a full ``audits.audit`` of
the same state, on random clusters and random single changes of every reviewed kind."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings

from tests.reconcile.test_audits import GATEWAY, SERVICE, _route
from tests.webhook.deltastates import cluster_and_change
from validators.changes import Change, Operation
from validators.objects import Obj, ref_of
from validators.states import MemoryState, Overlay
from webhook.gate.gates import Gate
from webhook.reconcile import audits


def _applied(objects: list[Obj], change: Change) -> list[Obj]:
    ref = change.ref
    kept = [o for o in objects if ref_of(o) != ref]
    return kept if change.operation is Operation.DELETE or change.obj is None else [*kept, change.obj]


def test_incremental_audit_equals_a_full_audit(gate: Gate) -> None:
    @given(cluster_and_change(), cluster_and_change())
    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], Change], other: tuple[list[Obj], Change]) -> None:
        objects, change = case
        cache = audits.AuditCache(gate.rules)
        before = MemoryState(objects, version="v1")
        assert cache.audit(before) == audits.audit(gate.rules, before)
        # the next version as a watch store hands it out (unchanged objects shared) ...
        shared = Overlay(before, change)
        assert cache.audit(shared) == audits.audit(gate.rules, shared)
        # ... and re-read from a snapshot (equal content, new objects), then an unrelated cluster
        reread = MemoryState(copy.deepcopy(_applied(objects, change)), version="v3")
        assert cache.audit(reread) == audits.audit(gate.rules, reread)
        unrelated = MemoryState(other[0], version="v4")
        assert cache.audit(unrelated) == audits.audit(gate.rules, unrelated)

    run()


def test_only_what_changed_is_judged_again(gate: Gate) -> None:
    routes = [_route(f"r{i}", f"h{i}.example.com") for i in range(20)]
    cache = audits.AuditCache(gate.rules)
    first = MemoryState([GATEWAY, SERVICE, *routes], version="v1")
    cache.audit(first)
    assert cache.judged == 21 and cache.reused == 0  # 20 routes and the Gateway (Services are not reviewed)
    cache.audit(MemoryState([GATEWAY, SERVICE, *routes], version="v2"))
    assert cache.judged == 0 and cache.reused == 21
    sticky = _route("r3", "h3.example.com", sessionPersistence={"sessionName": "a b"})
    changed = MemoryState([GATEWAY, SERVICE, *routes[:3], sticky, *routes[4:]], version="v3")
    found = cache.audit(changed)
    assert cache.judged < 21, (cache.judged, cache.reused)
    assert found == audits.audit(gate.rules, changed)
    assert any(ref.name == "r3" and any(f.code == "RG0101" for f in fs) for ref, fs in found)
