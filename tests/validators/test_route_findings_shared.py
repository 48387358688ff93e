"""A route's parent and backend findings are worked out once per state version for both their readings:
the route's own (its review, ``routegate check``'s defaulted copy of it through ``indexes.stored_twin``)
and about the route (a Gateway's review walking the routes naming it). Differential against the
from-scratch path (the same calls through a ``Recording`` view, which no memo serves); a key that misses
a field the findings read (sabotage) is caught by it. tests/validators/test_memoized_checks.py draws the
general cases."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from validators.changes import Change, Operation
from validators.crossobject import crossobjects
from validators.objects import Obj
from validators.states import MemoryState, Overlay, State
from validators.views import attachments
from validators.views.reads import Recording

GW = "gateway.networking.k8s.io/v1"


def _cluster(routes: int) -> list[Obj]:
    gateway = {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "infra"},
               "spec": {"gatewayClassName": "haproxy", "listeners": [
                   {"name": "web", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]}}
    out: list[Obj] = [gateway]
    for n in range(routes):
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"app{n}", "namespace": "team"},
                    "spec": {"ports": [{"port": 80}]}})
        backends = [{"name": f"app{n}", "port": 80}]
        if n % 3 == 1:
            backends.append({"name": f"missing{n}", "port": 80})  # a finding: BackendNotFound
        if n % 3 == 2:
            backends.append({"name": f"app{n}", "port": 9999})  # a finding: not a port of the Service
        out.append({"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": f"r{n}", "namespace": "team"},
                    "spec": {"parentRefs": [{"name": "edge", "namespace": "infra"}],
                             "hostnames": [f"r{n}.example.com"], "rules": [{"backendRefs": backends}]}})
    return out


def _defaulted(obj: Obj) -> Obj:
    """The copy ``routegate check`` judges: its defaults written out, as the schema step does."""
    out = copy.deepcopy(obj)
    for parent in out.get("spec", {}).get("parentRefs", []):
        parent.setdefault("group", "gateway.networking.k8s.io")
        parent.setdefault("kind", "Gateway")
    for rule in out.get("spec", {}).get("rules", []):
        for ref in rule.get("backendRefs", []):
            ref.setdefault("group", "")
            ref.setdefault("kind", "Service")
            ref.setdefault("weight", 1)
    return out


def _proposed(everything: State, stored: Obj, copied: Obj) -> State:
    """``routegate check``'s state for one input: the combined state without it, the copy put back."""
    others = Overlay(everything, Change(Operation.DELETE, None, stored))
    return Overlay(others, Change(Operation.CREATE, copied))


def _judged_as_check_judges(objects: list[Obj]) -> tuple[list[Any], list[Any]]:
    """Every input's cross-object findings against its ``routegate check`` state, memoized and from scratch."""
    everything = MemoryState(objects, version="v1")
    got, want = [], []
    for stored in objects:
        if stored["kind"] not in ("Gateway", "HTTPRoute"):
            continue
        copied = _defaulted(stored)
        proposed = _proposed(everything, stored, copied)
        got.append(list(crossobjects.findings(copied, proposed)))
        want.append(list(crossobjects.findings(copied, Recording(proposed))))
    return got, want


def test_each_route_is_worked_out_once_for_the_gateway_and_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = _cluster(12)
    computed: list[str] = []
    inner = crossobjects._route_findings

    def counted(route: Obj, *args: Any) -> Any:
        computed.append(route["metadata"]["name"])
        return inner(route, *args)

    monkeypatch.setattr(crossobjects, "_route_findings", counted)
    everything = MemoryState(objects, version="v1")
    gateway = objects[0]
    copied_gateway = _defaulted(gateway)
    # the Gateway's review first: its findings about every route naming it
    about = list(crossobjects.findings(copied_gateway, _proposed(everything, gateway, copied_gateway)))
    assert {f.about for f in about} >= {f"HTTPRoute team/r{n}" for n in (1, 2)}
    for stored in objects[1:]:
        if stored["kind"] == "HTTPRoute":
            copied = _defaulted(stored)
            list(crossobjects.findings(copied, _proposed(everything, stored, copied)))
    routes = [o["metadata"]["name"] for o in objects if o["kind"] == "HTTPRoute"]
    assert sorted(computed) == sorted(routes)  # once each, not once for the Gateway and once for the route


def test_findings_equal_the_from_scratch_path() -> None:
    objects = _cluster(12)
    got, want = _judged_as_check_judges(objects)
    assert got == want
    codes = {f.code for found in got for f in found}
    assert {"RG0501", "RG0516"} <= codes  # findings about routes, on the Gateway's and on their own
    assert any(f.about for found in got for f in found) and any(f.subject for found in got for f in found)


def test_a_key_missing_a_field_the_findings_read_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a twin key without the backendRefs makes a copy whose backendRef differs from the stored
    one's take the stored route's answer, which the comparison with the from-scratch path catches."""
    objects = _cluster(3)
    stored = objects[2]  # r0: its one backend resolves
    everything = MemoryState(objects, version="v1")
    copied = _defaulted(stored)
    copied["spec"]["rules"][0]["backendRefs"][0]["name"] = "gone"
    monkeypatch.setattr(crossobjects, "_route_key", attachments._attach_key)
    list(crossobjects.findings(stored, everything))  # the stored route's answer, memoized
    proposed = _proposed(everything, stored, copied)
    assert list(crossobjects.findings(copied, proposed)) != list(crossobjects.findings(copied, Recording(proposed)))
