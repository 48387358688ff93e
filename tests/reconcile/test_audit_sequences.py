"""Reconcile's audit and statuses are O(change) (``validators.views.dependents``): over random sequences
of changes to every reviewed kind and to the objects their rules read (Services, Secrets, Namespaces,
a Gateway changing class under a GatewayClass scope), after every step the incremental audit equals a
from-scratch ``audits.audit``, finding for finding, and the incremental statuses equal
``promotedstatuses.from_scratch``, key for key. Each step's state is handed over the three ways a
reconcile can get one: a watch snapshot linked to its predecessor (objects shared, the refs written
named), an Overlay of the change, and a re-read snapshot (equal content, new objects, no link). The
from-scratch answers come from a state that links to nothing, so that the per-object memos
``indexes.of_object`` carries along links (a route's attachments, backendRefs and findings) are
compared too, also route by route.

Derandomized (the same sequences on every run). The sabotage tests break one kind of dependency the
cache tracks and check that the differential then fails: the comparison is not one that cannot fail.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook import deltastates as ds
from validators.changes import Change, Operation
from validators.crossobject import backendrefs, crossobjects, statuses
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState, Overlay, State
from validators.views import attachments, dependents, indexes
from validators.views.scopes import Scope
from webhook.gate.gates import Gate
from webhook.reconcile import audits, promotedstatuses

SCOPED = Scope.of(classes=["haproxy"])
PORTS = tuple(attachments.DEFAULT_HTTP_PORTS)


class Linked(MemoryState):
    """A state as the cluster's watch stores hand one out: unchanged objects shared with the previous
    version, which it names with the refs written since (``ClusterSnapshot.prior``)."""

    def __init__(self, objects: dict[Ref, Obj], version: str, prior: tuple[State, frozenset[Ref]] | None) -> None:
        super().__init__(list(objects.values()), version=version)
        self._prior = prior

    def prior(self) -> tuple[State, frozenset[Ref]] | None:
        return self._prior


def _service(name: str, ns: str, port: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": "http", "port": port}]}}


def _namespace(name: str, team: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}}


@st.composite
def _step(draw: st.DrawFn, objects: dict[Ref, Obj], n: int) -> tuple[Ref, Obj | None]:
    """One change: (ref, the new object or None to delete it)."""
    gateways = [o for o in objects.values() if o["kind"] == "Gateway"]
    sources = [o for o in objects.values() if o["kind"] in ("Gateway", "ListenerSet")]
    what = draw(st.sampled_from(("create", "update", "update", "delete", "service", "namespace", "secret",
                                 "reclass")))
    reviewed = sorted((r for r in objects if r.kind in ds.CHANGE_KINDS), key=str)
    if what == "create" or (what in ("update", "delete") and not reviewed):
        kind = draw(st.sampled_from(ds.CHANGE_KINDS))
        obj = draw(ds.new_object(kind, f"n{n}", gateways, sources))
        return ref_of(obj), obj
    if what in ("update", "delete"):
        ref = draw(st.sampled_from(reviewed))
        if what == "delete":
            return ref, None
        old = objects[ref]
        obj = copy.deepcopy(draw(ds.new_object(ref.kind, ref.name, gateways, sources)))
        obj["metadata"]["namespace"] = old["metadata"].get("namespace", "")
        obj["metadata"]["creationTimestamp"] = old["metadata"].get("creationTimestamp")
        return ref_of(obj), obj
    ns = draw(st.sampled_from(ds.NAMESPACES))
    if what == "service":
        name = draw(st.sampled_from(ds.SERVICES))
        gone = draw(st.booleans())
        return Ref("Service", ns, name), None if gone else _service(name, ns, draw(st.sampled_from((8080, 8443))))
    if what == "namespace":
        return Ref("Namespace", "", ns), _namespace(ns, draw(st.sampled_from(("x", "y"))))
    if what == "secret":
        secret = draw(st.sampled_from([o for o in ds.secrets()]))
        ref = ref_of(secret)
        return ref, None if ref in objects else secret
    if not gateways:
        return Ref("Namespace", "", ns), _namespace(ns, "z")
    gateway = copy.deepcopy(draw(st.sampled_from(gateways)))
    gateway["spec"]["gatewayClassName"] = "other" if gateway["spec"]["gatewayClassName"] == "haproxy" else "haproxy"
    return ref_of(gateway), gateway


@st.composite
def sequences(draw: st.DrawFn) -> tuple[list[Obj], list[tuple[Ref, Obj | None]]]:
    objects, _ = draw(ds.cluster_and_change())
    objects = [*objects, *(_service(s, ns, 8080) for ns in ds.NAMESPACES for s in ds.SERVICES[:2]),
               *(_namespace(ns, "x") for ns in ds.NAMESPACES)]
    table = {ref_of(o): o for o in objects}
    steps = []
    for n in range(draw(st.integers(4, 8))):
        ref, obj = draw(_step(table, n))
        steps.append((ref, obj))
        if obj is None:
            table.pop(ref, None)
        else:
            table[ref] = obj
    return objects, steps


def _states(objects: list[Obj], steps: list[tuple[Ref, Obj | None]]
            ) -> Iterator[tuple[tuple[State, State, State], list[Obj]]]:
    """Each version of the sequence as (linked snapshot, Overlay on the previous version, re-read copy),
    with its objects."""
    table = {ref_of(o): o for o in objects}
    linked: State = Linked(table, "v0", None)
    yield (linked, MemoryState(list(table.values()), version="o0"),
           MemoryState(copy.deepcopy(objects), version="c0")), list(table.values())
    previous: State = MemoryState(list(table.values()), version="o0")
    for n, (ref, obj) in enumerate(steps, 1):
        old = table.get(ref)
        table = dict(table)
        if obj is None:
            table.pop(ref, None)
            change = Change(Operation.DELETE, None, old) if old is not None else None
        else:
            table[ref] = obj
            change = Change(Operation.UPDATE if old is not None else Operation.CREATE, obj, old)
        linked = Linked(table, f"v{n}", (linked, frozenset({ref})))
        overlaid = Overlay(previous, change) if change is not None else previous
        now = list(table.values())
        yield (linked, overlaid, MemoryState(copy.deepcopy(now), version=f"c{n}")), now
        previous = MemoryState(list(table.values()), version=f"o{n}")


def _mismatches(gate: Gate, case: tuple[list[Obj], list[tuple[Ref, Obj | None]]]) -> list[str]:
    """Every step at which an incremental result differs from the from-scratch one."""
    objects, steps = case
    found: list[str] = []
    for scope in (None, SCOPED):
        caches = [audits.AuditCache(gate.rules, scope) for _ in range(3)]
        status_caches = [promotedstatuses.PromotedStatuses(scope) for _ in range(3)]
        for n, (versions, now) in enumerate(_states(objects, steps)):
            # from scratch: a state of the same objects that links to nothing, so no memo of a state
            # before it (``indexes.of_object`` carries them along links) can serve it
            fresh: State = MemoryState(now, version=f"fresh{n}")
            fresh = SCOPED.view(fresh) if scope is not None else fresh
            expected_audit = audits.audit(gate.rules, fresh, scope)
            expected_statuses = promotedstatuses.from_scratch(fresh, fresh, scope)
            for how, state, cache, status_cache in zip(("linked", "overlay", "re-read"), versions, caches,
                                                       status_caches, strict=True):
                view = SCOPED.view(state) if scope is not None else state
                if cache.audit(view) != expected_audit:
                    found.append(f"audit, step {n} ({how}, scope {scope})")
                if how == "linked" and audits.audit(gate.rules, view, scope) != expected_audit:
                    found.append(f"one-shot audit over carried memos, step {n} (scope {scope})")
                if status_cache.of(view, view) != expected_statuses:
                    found.append(f"statuses, step {n} ({how}, scope {scope})")
                if how == "linked" and scope is None:
                    found += _route_answers(versions[0], MemoryState(now, version=f"bare{n}"), n)
                counts = statuses._attached_counts(state, None, PORTS)  # linked: patched from the predecessor's
                if how == "linked" and scope is None and dict(counts) != statuses.attached_counts_scan(state, PORTS):
                    found.append(f"attached counts, step {n}")
    return found


def _route_answers(linked: State, fresh: State, n: int) -> list[str]:
    """What ``indexes.of_object`` memoizes per route (its attachments, backendRefs, parent and backend
    findings), asked of the linked state (memos carried from its predecessors) and of a fresh one."""
    found = []
    for kind in sorted(backendrefs.BACKEND_ROUTE_KINDS):
        for route in linked.list(kind):
            ref = ref_of(route)
            fresh_route = fresh.get(ref.kind, ref.namespace, ref.name)
            assert fresh_route is not None
            for what, ask in (("attach", lambda r, s: attachments.attach(r, s)),
                              ("backend refs", backendrefs.backend_refs),
                              ("route findings", lambda r, s: list(crossobjects.route_findings(r, s))),
                              ("route findings about", lambda r, s: list(crossobjects.route_findings(
                                  r, s, about=ref_of(r))))):
                if ask(route, linked) != ask(fresh_route, fresh):
                    found.append(f"{what} of {ref}, step {n}")
    return found


def _differential(gate: Gate, examples: int, *, stop_at_first: bool = False) -> list[list[str]]:
    results: list[list[str]] = []

    @given(sequences())
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    def run(case: tuple[list[Obj], list[tuple[Ref, Obj | None]]]) -> None:
        if stop_at_first and any(results):
            return  # a sabotage test needs one mismatch, not all of them
        results.append(_mismatches(gate, case))

    run()
    return results


def test_incremental_audit_and_statuses_equal_from_scratch_after_every_step(gate: Gate) -> None:
    results = _differential(gate, 20)
    assert len(results) == 20
    assert all(not r for r in results), [r for r in results if r]


def _without(what: str) -> Callable[[dependents.Dependents[Any], Ref, Any, State], None]:
    """``Dependents._remember`` that forgets one kind of dependency (gets, lists or index lookups)."""
    remember = dependents.Dependents._remember

    def broken(self: dependents.Dependents[Any], ref: Ref, reads: Any, state: State) -> None:
        gets, lists, lookups = reads.gets, reads.lists, reads.lookups
        reads = type(reads)((), lists, lookups) if what == "gets" else \
            type(reads)(gets, (), lookups) if what == "lists" else type(reads)(gets, lists, ())
        remember(self, ref, reads, state)
    return broken


@pytest.mark.parametrize("dependency", ["gets", "lookups"])
def test_the_differential_fails_when_a_dependency_is_dropped(gate: Gate, dependency: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dependents.Dependents, "_remember", _without(dependency))
    results = _differential(gate, 12, stop_at_first=True)
    assert any(results), f"dropping {dependency} went unnoticed"


def test_changed_refs_that_miss_a_change_are_noticed(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """The changed refs are the other input: naming fewer refs than changed breaks the results."""
    changed = dependents.changed_refs

    def fewer(before: State, after: State, kinds: Any) -> set[Ref]:
        return {r for r in changed(before, after, kinds) if r.kind not in ("Service", "Namespace")}

    monkeypatch.setattr(dependents, "changed_refs", fewer)
    assert any(_differential(gate, 12, stop_at_first=True))


def test_memos_carried_over_a_change_they_read_are_noticed(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memos ``indexes.of_object`` carries from a linked state's predecessor are the third input: a carry
    that keeps every entry as it was, whatever changed (no check of what an entry read), breaks them."""

    def everything(name: str, reads: frozenset[str]) -> Callable[[State], dict[int, Any]]:
        def build(state: State) -> dict[int, Any]:
            link = indexes.prior_link(state)
            prior = indexes.peek(link[0], name) if link is not None else None
            return {k: (e[0], e[1], e[2], True) for k, e in prior.items()} if type(prior) is dict else {}
        return build

    monkeypatch.setattr(indexes, "_CARRIERS", {})
    monkeypatch.setattr(indexes, "_carrier", everything)
    assert any(_differential(gate, 12, stop_at_first=True))


def test_carried_entries_are_checked_by_what_they_read(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """A carried entry whose reads are not checked before use (``indexes._holds`` taking it as it is)
    breaks the results: the check is what keeps an entry that a change of a kind it reads affects."""

    def trusting(memo: dict[int, Any], key: int, hit: Any, state: State) -> bool:
        return hit[2] is not None

    monkeypatch.setattr(indexes, "_holds", trusting)
    assert any(_differential(gate, 12, stop_at_first=True))


def test_a_patched_lookup_that_hides_a_rekeyed_key_is_noticed(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Dependents`` compares only the keys a patched lookup re-keyed (``indexes.touched_since``): a
    patch that names fewer keys than it re-keyed breaks the results."""
    touched = indexes.touched_since

    def fewer(lookup: Any, prior: Any) -> frozenset[Any] | None:
        keys = touched(lookup, prior)
        return frozenset() if keys is not None else None

    monkeypatch.setattr(indexes, "touched_since", fewer)
    assert any(_differential(gate, 12, stop_at_first=True))
