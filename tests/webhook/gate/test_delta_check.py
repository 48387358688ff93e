"""The delta check against the full check: on random clusters and random single changes of every
reviewed kind (many of them breaking the configuration), a review of the change's closure
(``Gate(delta=True)``) reaches the verdict a review of the whole state reaches, denies with the same
findings (object and field path), and reports the same subject status, on every haproxy binary."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from haproxy_check.check import binaries
from tests.webhook.deltastates import cluster_and_change
from validators.changes import Change, Operation
from validators.objects import Obj
from validators.schema.crds import SchemaSet
from validators.states import MemoryState
from validators.views.closures import Closure, closure
from webhook.gate import assembly
from webhook.gate.alertkeys import LINE_NUMBERS as _LINE_NUMBERS
from webhook.gate.alertkeys import alert_key as _alert_key
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Verdict

pytestmark = pytest.mark.haproxy
EXAMPLES = 40  # per binary: about 10 s each alone on the 2-core machine


def _gates(path: str, schemas: SchemaSet | None) -> tuple[Gate, Gate]:
    binary = asyncio.run(binaries.detect(path))
    delta = assembly.build_gate(binary, assembly.GateSettings(), schemas=schemas)
    full = Gate(rules=delta.rules, renderer=delta.renderer, checker=delta.checker, delta=False)
    assert delta.delta and not full.delta
    return delta, full


def _outcome(verdict: Verdict) -> dict[str, Any]:
    """What must agree: the decision, every finding about the subject (code, severity, field, and the
    message without line numbers, which differ between the two configurations), the alerts' origins
    and the subject's status."""
    findings = sorted((f.code, str(f.severity), f.field, _LINE_NUMBERS.sub("", f.message)) for f in verdict.findings)
    return {"decision": str(verdict.decision), "findings": findings,
            "alerts": sorted({_alert_key(a) for a in verdict.alerts}), "status": verdict.status,
            "error": bool(verdict.error)}


def _state(objects: list[Obj]) -> MemoryState:
    digest = hashlib.sha256(json.dumps(objects, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return MemoryState(objects, version=digest)


async def _both(delta: Gate, full: Gate, change: Change, state: MemoryState) -> tuple[Verdict, Verdict]:
    got = await delta.review(change, state=state, reload_note=False)
    want = await full.review(change, state=state, reload_note=False)
    return got, want


def test_the_closure_is_a_strict_subset_that_lists_only_members() -> None:
    """A sanity check of the view itself, on one drawn example: lists are sorted and limited."""

    @given(cluster_and_change())
    @settings(max_examples=20, deadline=None, database=None)
    def run(case: tuple[list[Obj], Change]) -> None:
        objects, change = case
        state = _state(objects)
        view = closure(state, change)
        assert isinstance(view, Closure) and change.ref in view.members
        for kind in ("HTTPRoute", "Gateway", "EndpointSlice"):
            listed = view.list(kind)
            assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed] == sorted(
                (o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed)
            assert len(listed) <= len(state.list(kind))

    run()


def _differential(delta: Gate, full: Gate, examples: int) -> Any:
    @given(cluster_and_change())
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    def run(case: tuple[list[Obj], Change]) -> None:
        objects, change = case
        state = _state(objects)
        got, want = asyncio.run(_both(delta, full, change, state))
        assert _outcome(got) == _outcome(want), (
            f"{change.operation} {change.ref} on haproxy {delta.binary.version}:\n"
            f"delta: {got.message}\nfull: {want.message}")

    return run


def test_delta_verdicts_equal_full_verdicts(haproxy_paths: list[str], schemas: SchemaSet | None) -> None:
    for path in haproxy_paths:
        delta, full = _gates(path, schemas)
        _differential(delta, full, EXAMPLES)()


def _route(name: str, match: dict[str, Any]) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "gw0"}],
                     "rules": [{"matches": [match], "backendRefs": [{"name": "web", "port": 8080}]}]}}


def test_deleting_a_broken_route_is_not_blamed_for_an_older_error_it_hid(
        haproxy_paths: list[str], schemas: SchemaSet | None) -> None:
    """r4's bad regex and r6's (the same one, as a header match) break the configuration; HAProxy
    reports one of them, so the full configuration without r4 shows r6's error for the first time.
    Deleting r4 adds nothing: both gates allow it (found by the differential test with random seeds)."""
    objects: list[Obj] = [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "gw0", "namespace": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"gatewayClassName": "haproxy",
                  "listeners": [{"name": "l0", "port": 80, "protocol": "HTTP"}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "a"},
         "spec": {"ports": [{"port": 8080}]}},
        _route("r4", {"path": {"type": "RegularExpression", "value": "/a{2,1}"}}),
        _route("r6", {"path": {"type": "PathPrefix", "value": "/"},
                      "headers": [{"name": "X-Team", "type": "RegularExpression", "value": "/a{2,1}"}]}),
    ]
    change = Change(Operation.DELETE, None, objects[2])
    for path in haproxy_paths:
        delta, full = _gates(path, schemas)
        got, want = asyncio.run(_both(delta, full, change, _state(objects)))
        assert _outcome(got) == _outcome(want), (got.message, want.message)
        assert str(want.decision) == "allow", want.message
