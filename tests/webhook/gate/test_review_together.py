"""Concurrent reviews judged together equal the same reviews judged one by one: on random clusters and
random batches of changes (new routes of every kind, updates, deletes, a Gateway now and then, two
changes of one object, competing hostnames, values that break HAProxy), ``Gate.review_together``
gives every change the verdict ``Gate.review`` gives it alone against the same state: same decision,
findings (code, severity, field path, message), alerts, warnings (reload notes included) and status,
on every haproxy binary."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.check import binaries
from tests.webhook import deltastates as ds
from tests.webhook.conftest import STATE_DIR, load_objects
from tests.webhook.gate.test_gates import CountingRenderer, many_shops, named, state_with
from validators.changes import Change, Operation
from validators.objects import Obj, ref_of
from validators.schema.crds import SchemaSet
from validators.states import MemoryState
from webhook.gate import assembly, batching
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision, Verdict

pytestmark = pytest.mark.haproxy
EXAMPLES = 15  # per binary: about 30 s each alone on the 2-core machine
NOTE_BUDGET = 60.0  # seconds for a reload note or a traffic diff before it is skipped (see _differential_of)


@st.composite
def cluster_and_changes(draw: st.DrawFn) -> tuple[list[Obj], list[Change]]:
    if draw(st.integers(0, 2)) == 0:
        # A cluster without broken objects and a burst of new routes with hosts of their own (the common
        # case, and the one the combined check settles), one of them now and then broken.
        changes = [Change(Operation.CREATE, shop) for shop in many_shops(draw(st.integers(2, 6)))]
        if draw(st.booleans()):
            changes.insert(draw(st.integers(0, len(changes))), Change(Operation.CREATE, named("broken")))
        return load_objects(STATE_DIR), changes
    gateways = [draw(ds.gateway(f"gw{i}")) for i in range(draw(st.integers(1, 2)))]
    sources: list[Obj] = list(gateways)
    objects: list[Obj] = [*gateways, *ds.secrets(), *ds.endpoint_slices()]
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(ds.ROUTE_KINDS))
        objects.append(draw(ds.route(kind, f"r{i}", draw(st.sampled_from(ds.NAMESPACES)), sources)))
    for i in range(draw(st.integers(0, 1))):
        objects.append(draw(ds.backend_tls_policy(f"btls{i}")))
    routes = [o for o in objects if o["kind"] in ds.ROUTE_KINDS]
    changes: list[Change] = []
    for k in range(draw(st.integers(2, 6))):
        what = draw(st.sampled_from(("create", "create", "create", "create", "update", "update", "delete", "gateway")))
        if what == "gateway":
            old = draw(st.sampled_from(gateways))
            obj = copy.deepcopy(draw(ds.gateway(old["metadata"]["name"])))
            changes.append(Change(Operation.UPDATE, obj, old))
        elif what == "create" or not routes:
            kind = draw(st.sampled_from(("HTTPRoute", "HTTPRoute", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute")))
            obj = draw(ds.route(kind, f"new{k}", draw(st.sampled_from(ds.NAMESPACES)), sources))
            if kind != "TCPRoute" and draw(st.integers(0, 3)) > 0:
                # A host of its own on a Gateway (the usual burst: independent routes), else drawn as is
                # (competing hosts, unattached routes).
                obj["spec"]["hostnames"] = [f"new{k}.example.com"]
                gw = draw(st.sampled_from(gateways))["metadata"]
                obj["spec"]["parentRefs"] = [{"name": gw["name"], "namespace": gw["namespace"]}]
            changes.append(Change(Operation.CREATE, obj))
        else:
            old = draw(st.sampled_from(routes))
            if what == "delete":
                changes.append(Change(Operation.DELETE, None, old))
                continue
            obj = copy.deepcopy(draw(ds.route(old["kind"], old["metadata"]["name"], old["metadata"]["namespace"],
                                              sources)))
            obj["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            assert ref_of(obj) == ref_of(old)
            changes.append(Change(Operation.UPDATE, obj, old))
    return objects, changes


def _outcome(verdict: Verdict) -> dict[str, Any]:
    return {"decision": str(verdict.decision), "findings": verdict.findings,
            "alerts": [(a.message, a.origin) for a in verdict.alerts], "warnings": verdict.warnings,
            "status": verdict.status, "error": verdict.error, "handled": verdict.handled}


def _state(objects: list[Obj]) -> MemoryState:
    digest = hashlib.sha256(json.dumps(objects, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return MemoryState(objects, version=digest)


async def _both(gate: Gate, changes: list[Change], state: MemoryState) -> tuple[list[Verdict], list[Verdict]]:
    together = await gate.review_together(changes, state=state)
    alone = [await gate.review(change, state=state) for change in changes]
    return together, alone


def _differential(gate: Gate, shared: list[int]) -> Any:
    @given(cluster_and_changes())
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], list[Change]]) -> None:
        objects, changes = case
        state = _state(objects)
        together, alone = asyncio.run(_both(gate, changes, state))
        assert len(together) == len(changes)
        for change, got, want in zip(changes, together, alone, strict=True):
            assert _outcome(got) == _outcome(want), (
                f"{change.operation} {change.ref} among {[f'{c.operation} {c.ref}' for c in changes]} on haproxy "
                f"{gate.binary.version}:\ntogether: {got.message} {got.warnings}\n"
                f"alone: {want.message} {want.warnings}")

    return run


def _counting(settle: Any, shared: list[int]) -> Any:
    """``Gate._check_together`` recording how many verdicts each combined check settled."""

    async def counted(*args: Any) -> dict[int, Verdict]:
        settled: dict[int, Verdict] = await settle(*args)
        shared.append(len(settled))
        return settled

    return counted


def test_verdicts_judged_together_equal_verdicts_judged_alone(haproxy_paths: list[str],
                                                               schemas: SchemaSet | None) -> None:
    for path in haproxy_paths:
        binary = asyncio.run(binaries.detect(path))
        gate = assembly.build_gate(binary, assembly.GateSettings(), schemas=schemas)
        shared: list[int] = []
        gate._check_together = _counting(gate._check_together, shared)  # type: ignore[method-assign]
        _differential(gate, shared)()
        assert sum(shared) >= 2, "the examples exercise the shared check, not only the fallbacks"


def _judged(verdicts: list[Verdict]) -> list[dict[str, Any]]:
    return [{"ref": v.ref, **_outcome(v)} for v in verdicts]


async def _together_and_alone(gate: Gate, changes: list[Change], state: MemoryState,
                              ) -> tuple[list[Verdict], list[Verdict], int]:
    counting = CountingRenderer(gate.renderer)
    counted = Gate(rules=gate.rules, renderer=counting, checker=gate.checker)
    together = await counted.review_together(changes, state=state, notes_for=0.0)
    alone = [await gate.review(change, state=state, reload_note=False) for change in changes]
    return together, alone, counting.baselines


RELOAD_NOTES = ("reload classification skipped", "needs a reload", "applies at runtime", "unknown: ")


def _without_reload_notes(verdicts: list[Verdict]) -> list[Verdict]:
    return [replace(v, notes=tuple(n for n in v.notes if not n.startswith(RELOAD_NOTES))) for v in verdicts]


async def test_independent_routes_share_one_render_and_one_check(gate: Gate) -> None:
    shops = many_shops(6)
    together, alone, renders = await _together_and_alone(gate, [Change(Operation.CREATE, s) for s in shops],
                                                         state_with(version="together-1"))
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 6
    # (and one of them without the changes: the traffic diff of the group, split by change)
    assert renders == 2, "one render of the united closures serves every change"
    assert all(any("checked together with 5 other" in n for n in v.notes) for v in together), \
        "without time for them, the reload notes say they were skipped"


async def test_a_failing_batch_isolates_the_broken_route_with_its_own_verdict(gate: Gate) -> None:
    shops = many_shops(15)
    changes = [Change(Operation.CREATE, o) for o in (*shops[:11], named("broken"), *shops[11:])]
    together, alone, renders = await _together_and_alone(gate, changes, state_with(version="together-2"))
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together].count(Decision.DENY) == 1 and together[11].decision is Decision.DENY
    assert [f.field for f in together[11].denials] == ["spec.rules[1].matches[0].path.value"]
    # The combined check, the state outside the batch, a bisection of 16 and the state without the
    # culprit (the culprit's own review renders with a subject): not 16 reviews.
    assert renders <= 12, renders


async def test_routes_claiming_one_host_or_one_object_twice_are_not_judged_together(gate: Gate) -> None:
    first, second, third = many_shops(3)
    second["spec"]["hostnames"] = list(first["spec"]["hostnames"])  # competes with the first for its host
    again = copy.deepcopy(third)
    again["spec"]["rules"][0]["backendRefs"][0]["port"] = 9090
    state = state_with(third, version="together-3")
    changes = [Change(Operation.CREATE, first), Change(Operation.CREATE, second),
               Change(Operation.UPDATE, again, third), Change(Operation.DELETE, None, third)]
    claims = [batching.claim_of(c, state) for c in changes[:3]]
    assert batching.groups(claims) == [[0, 2], [1]]
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))


@st.composite
def cluster_and_deletes(draw: st.DrawFn) -> tuple[list[Obj], list[Change]]:
    """A random cluster and a burst that deletes several of its routes (a GitOps prune), with new routes
    and updates among them: routes with hosts and ports drawn from the shared pools, so that deletes often
    compete with each other and with the other changes."""
    gateways = [draw(ds.gateway(f"gw{i}")) for i in range(draw(st.integers(1, 2)))]
    sources: list[Obj] = list(gateways)
    objects: list[Obj] = [*gateways, *ds.secrets(), *ds.endpoint_slices()]
    for i in range(draw(st.integers(3, 8))):
        kind = draw(st.sampled_from(ds.ROUTE_KINDS))
        objects.append(draw(ds.route(kind, f"r{i}", draw(st.sampled_from(ds.NAMESPACES)), sources)))
    routes = [o for o in objects if o["kind"] in batching.ROUTE_KINDS]
    deleted = draw(st.lists(st.sampled_from(routes), min_size=min(2, len(routes)), max_size=len(routes),
                            unique_by=lambda o: str(ref_of(o)))) if routes else []
    changes = [Change(Operation.DELETE, None, old) for old in deleted]
    for k in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute")))
        obj = draw(ds.route(kind, f"new{k}", draw(st.sampled_from(ds.NAMESPACES)), sources))
        if kind != "TCPRoute" and draw(st.booleans()):
            obj["spec"]["hostnames"] = [f"new{k}.example.com"]
        changes.insert(draw(st.integers(0, len(changes))), Change(Operation.CREATE, obj))
    return objects, changes


def _counting_settled(check: Any, settled: list[int], counts: Any) -> Any:
    """``Gate._check_together`` recording how many of the changes it settled ``counts(change)`` holds for."""

    async def counted(members: Any, *args: Any) -> dict[int, Verdict]:
        got: dict[int, Verdict] = await check(members, *args)
        settled.append(sum(bool(counts(members[j].change)) for j in got))
        return got

    return counted


def _burst_differential(gate: Gate, cases: Any) -> Any:
    @given(cases)
    # Derandomized: the guard that shared checks settled at least two changes must not depend on the draw
    # (a random run settled one delete and failed); the same examples run on every binary.
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], list[Change]]) -> None:
        objects, changes = case
        together, alone = asyncio.run(_both(gate, changes, _state(objects)))
        for change, got, want in zip(changes, together, alone, strict=True):
            assert _outcome(got) == _outcome(want), (
                f"{change.operation} {change.ref} among {[f'{c.operation} {c.ref}' for c in changes]} on "
                f"haproxy {gate.binary.version}:\ntogether: {got.message} {got.warnings}\n"
                f"alone: {want.message} {want.warnings}")

    return run


def _differential_of(cases: Any, counts: Any, what: str, haproxy_paths: list[str],
                     schemas: SchemaSet | None) -> None:
    """On every binary: each change of each drawn burst gets the same verdict together as alone, and the
    shared checks settle at least two changes ``counts(change)`` holds for (not only lone fallbacks)."""
    for path in haproxy_paths:
        binary = asyncio.run(binaries.detect(path))
        gate = assembly.build_gate(binary, assembly.GateSettings(), schemas=schemas)
        # The reload note is skipped when a render takes longer than the budget: on a loaded machine (load
        # 12 on 2 cores) a lone render of these small states passed 1 s in one path and not in the other,
        # so the verdicts differed by timing only (the traffic diff has a budget too). The differential compares
        # judgements, not timings.
        gate.note_budget = gate.traffic_budget = NOTE_BUDGET
        settled: list[int] = []
        gate._check_together = _counting_settled(gate._check_together, settled, counts)  # type: ignore[method-assign]

        _burst_differential(gate, cases)()
        assert sum(settled) >= 2, f"the examples settle {what} by the shared check, not only by lone reviews"


def test_deletes_judged_together_equal_deletes_judged_alone(haproxy_paths: list[str],
                                                           schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_deletes(), lambda c: c.operation is Operation.DELETE, "deletes",
                     haproxy_paths, schemas)


async def test_independent_deletes_share_one_render_and_a_competing_one_does_not(gate: Gate) -> None:
    shops = many_shops(5)
    rival = copy.deepcopy(shops[0])
    rival["metadata"]["name"] = "rival"  # claims shop-0's host: not judged with shop-0's delete
    state = state_with(*shops, version="together-deletes")
    changes = [*(Change(Operation.DELETE, None, s) for s in shops), Change(Operation.CREATE, rival)]
    claims = [batching.claim_of(c, state) for c in changes]
    assert batching.groups(claims) == [[0, 1, 2, 3, 4], [5]]
    together, alone, renders = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 6
    # The united closures with the deletes and without them (the traffic diff), and the rival's own
    # review's render without it (its reload note): not one review per delete.
    assert renders == 3, renders
    assert all(any("checked together with 4 other" in n for n in v.notes) for v in together[:5])


@st.composite
def cluster_and_custom_routes(draw: st.DrawFn) -> tuple[list[Obj], list[Change]]:
    """A random cluster with custom Routes and a burst of new and changed custom Routes among new
    HTTPRoutes: hosts of their own or from the shared pool (one host competes), request header names from
    a pool with several spellings of one name, addresses and header names that are not rendered."""
    gateways = [draw(ds.gateway(f"gw{i}")) for i in range(draw(st.integers(1, 2)))]
    sources: list[Obj] = list(gateways)
    objects: list[Obj] = [*gateways, *ds.secrets(), *ds.endpoint_slices()]
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(("Route", "Route", "HTTPRoute", "TCPRoute")))
        objects.append(draw(ds.route(kind, f"r{i}", draw(st.sampled_from(ds.NAMESPACES)), sources)))
    stored = [o for o in objects if o["kind"] == "Route"]
    changes: list[Change] = []
    for k in range(draw(st.integers(2, 6))):
        what = draw(st.sampled_from(("create", "create", "create", "update", "httproute")))
        if what == "httproute":
            obj = draw(ds.route("HTTPRoute", f"new{k}", draw(st.sampled_from(ds.NAMESPACES)), sources))
            obj["spec"]["hostnames"] = [f"new{k}.example.com"]
            changes.append(Change(Operation.CREATE, obj))
            continue
        old = draw(st.sampled_from(stored)) if what == "update" and stored else None
        ns = old["metadata"]["namespace"] if old is not None else draw(st.sampled_from(ds.NAMESPACES))
        obj = draw(ds.route("Route", old["metadata"]["name"] if old is not None else f"new{k}", ns, sources))
        if draw(st.integers(0, 2)) > 0:
            obj["spec"]["hostnames"] = [f"custom{k}.example.com"]
        if old is not None:
            obj["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        changes.append(Change(Operation.UPDATE, obj, old) if old is not None else Change(Operation.CREATE, obj))
    return objects, changes


def test_custom_routes_judged_together_equal_custom_routes_judged_alone(haproxy_paths: list[str],
                                                                       schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_custom_routes(), lambda c: c.ref.kind == "Route", "custom Routes",
                     haproxy_paths, schemas)


async def test_custom_routes_setting_one_header_are_not_judged_together(gate: Gate) -> None:
    def custom(name: str, header: str) -> Obj:
        return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route",
                "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"hostnames": [f"{name}.example.com"], "backend": {"address": "10.0.0.1", "port": 8080},
                         "requestHeaders": [{"name": header, "value": "v"}]}}

    changes = [Change(Operation.CREATE, custom(name, header))
               for name, header in (("one", "X-Team"), ("two", "x-team"), ("three", "X-Other"))]
    state = state_with(version="together-custom")
    claims = [batching.claim_of(c, state) for c in changes]
    assert batching.groups(claims) == [[0, 2], [1]], "one header name spelled two ways: apart"
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 3
    assert any("checked together with 1 other" in n for n in together[0].notes)


@st.composite
def cluster_and_custom_deletes(draw: st.DrawFn) -> tuple[list[Obj], list[Change]]:
    """A random cluster with stored custom Routes (hosts of their own, from the shared pool, or none: the
    any-host ``*``; header names spelled several ways, addresses that are not rendered) and a burst that
    deletes several of them, with new and changed custom Routes and new HTTPRoutes among the deletes."""
    gateways = [draw(ds.gateway(f"gw{i}")) for i in range(draw(st.integers(1, 2)))]
    sources: list[Obj] = list(gateways)
    objects: list[Obj] = [*gateways, *ds.secrets(), *ds.endpoint_slices()]
    for i in range(draw(st.integers(3, 7))):
        obj = draw(ds.route("Route", f"r{i}", draw(st.sampled_from(ds.NAMESPACES)), sources))
        if draw(st.integers(0, 2)) > 0:
            obj["spec"]["hostnames"] = [f"custom{i}.example.com"]
        objects.append(obj)
    for i in range(draw(st.integers(0, 2))):
        objects.append(draw(ds.route(draw(st.sampled_from(("HTTPRoute", "TCPRoute"))), f"h{i}",
                                     draw(st.sampled_from(ds.NAMESPACES)), sources)))
    stored = [o for o in objects if o["kind"] == "Route"]
    deleted = draw(st.lists(st.sampled_from(stored), min_size=2, max_size=len(stored),
                            unique_by=lambda o: str(ref_of(o))))
    changes = [Change(Operation.DELETE, None, old) for old in deleted]
    for k in range(draw(st.integers(0, 2))):
        what = draw(st.sampled_from(("create", "update", "httproute")))
        if what == "httproute":
            obj = draw(ds.route("HTTPRoute", f"new{k}", draw(st.sampled_from(ds.NAMESPACES)), sources))
            obj["spec"]["hostnames"] = [f"new{k}.example.com"]
            change = Change(Operation.CREATE, obj)
        elif what == "update":
            old = draw(st.sampled_from(stored))
            obj = draw(ds.route("Route", old["metadata"]["name"], old["metadata"]["namespace"], sources))
            obj["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            change = Change(Operation.UPDATE, obj, old)
        else:
            obj = draw(ds.route("Route", f"new{k}", draw(st.sampled_from(ds.NAMESPACES)), sources))
            if draw(st.booleans()):
                obj["spec"]["hostnames"] = [f"fresh{k}.example.com"]
            change = Change(Operation.CREATE, obj)
        changes.insert(draw(st.integers(0, len(changes))), change)
    return objects, changes


def test_custom_route_deletes_judged_together_equal_custom_route_deletes_judged_alone(
        haproxy_paths: list[str], schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_custom_deletes(),
                     lambda c: c.ref.kind == "Route" and c.operation is Operation.DELETE,
                     "custom Route deletes", haproxy_paths, schemas)


async def test_custom_route_deletes_share_one_check_unless_one_claims_any_host(gate: Gate) -> None:
    def custom(name: str, hosts: list[str], header: str = "X-Team") -> Obj:
        return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route",
                "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"hostnames": hosts, "backend": {"address": "10.0.0.1", "port": 8080},
                         "requestHeaders": [{"name": header, "value": "v"}]}}

    stored = [custom("one", ["one.example.com"], "X-One"), custom("two", ["two.example.com"], "X-Two"),
              custom("three", ["three.example.com"], "x-one"), custom("any", [], "X-Any")]
    state = state_with(*stored, version="together-custom-deletes")
    changes = [Change(Operation.DELETE, None, o) for o in stored]
    claims = [batching.claim_of(c, state) for c in changes]
    # three spells one's header name another way; any claims the any-host ``*``: alone
    assert batching.groups(claims) == [[0, 1], [2], [3]]
    assert claims[3].sort == "alone"
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 4
    assert all(any("checked together with 1 other" in n for n in v.notes) for v in together[:2])
    for verdict, host in zip(together[:2], ("one", "two"), strict=True):  # each delete's own host moves
        assert verdict.traffic is not None and verdict.traffic.moves
        assert {m.before.rule.partition(" rule ")[0] for m in verdict.traffic.moves} == {f"Route default/{host}"}


def test_a_custom_route_delete_without_an_http_gateway_in_its_closure_goes_alone() -> None:
    """Custom Routes get a frontend of their own when no Gateway serves HTTP: without the deleted one the
    closure may bind nothing, and the whole state decides its lone review (DELTA-CHECK.md, rule 11)."""
    def custom(name: str) -> Obj:
        return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route",
                "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"hostnames": [f"{name}.example.com"], "backend": {"address": "10.0.0.1", "port": 8080}}}

    stored = [custom("one"), custom("two")]
    changes = [Change(Operation.DELETE, None, o) for o in stored]
    bare = MemoryState([*ds.secrets(), *stored], version="custom-deletes-bare")
    assert [batching.claim_of(c, bare).sort for c in changes] == ["alone", "alone"]
    served = state_with(*stored, version="custom-deletes-served")
    assert [batching.claim_of(c, served).sort for c in changes] == ["custom", "custom"]
