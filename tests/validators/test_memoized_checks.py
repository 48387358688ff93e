"""The memoized cross-object checks and statuses (a route's attachments once per state version, the
attached-route counts patched per overlay, the rules' shared walks of one object) give what the
from-scratch path gives, on random clusters, on a review's overlay and on ``routegate check``'s stacks
(each input taken out of the combined state, then put back). The from-scratch path is the same call
through a ``Recording`` view, which no memo serves (its reads are what it is for)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook import deltastates
from validators import rules
from validators.changes import Change, Operation
from validators.contexts import Context
from validators.crossobject import backendrefs, crossobjects, statuses
from validators.objectrules import traversals
from validators.objects import REVIEWED_KINDS, Obj, kind_of
from validators.states import MemoryState, Overlay, State
from validators.views import attachments, indexes
from validators.views.reads import Recording


def judged(subject: Obj, state: State) -> tuple[Any, ...]:
    found = list(crossobjects.findings(subject, state))
    status = statuses.status_of(subject, state) if kind_of(subject) in statuses.STATUS_KINDS else None
    return found, status, attachments.attach(subject, state)


def cases(objects: list[Obj], change: Change) -> list[tuple[Obj, State]]:
    everything = MemoryState(objects, version="v1")
    out: list[tuple[Obj, State]] = [(change.subject, Overlay(everything, change))]
    for obj in objects:
        if kind_of(obj) in REVIEWED_KINDS:
            others = Overlay(everything, Change(Operation.DELETE, None, obj))
            out += [(obj, Overlay(others, Change(Operation.CREATE, obj))), (obj, everything)]
    return [*out, out[0]]  # the review again, its base's memo now filled by the others


@settings(max_examples=60, deadline=None)
@given(deltastates.cluster_and_change())
def test_memoized_cross_checks_and_statuses_agree(drawn: tuple[list[Obj], Change]) -> None:
    objects, change = drawn
    for subject, state in cases(objects, change):
        want = judged(subject, Recording(state))
        assert judged(subject, state) == want
        assert judged(subject, state) == want  # served from the memo this time
        for ports in ((80, 443), (8443,)):
            assert statuses._attached_counts(state, None, ports) == statuses.attached_counts_scan(
                Recording(state), ports)


@settings(max_examples=60, deadline=None)
@given(deltastates.cluster_and_change())
def test_shared_walks_change_no_rule(drawn: tuple[list[Obj], Change]) -> None:
    objects, change = drawn
    ctx = Context(state=MemoryState(objects))
    for obj in [*objects, change.subject]:
        chosen = rules.RULES.get(kind_of(obj), rules.COMMON)
        alone = [f for rule in chosen for f in rule(obj, ctx)]  # outside rules.run: every rule walks
        assert rules.run(obj, ctx) == alone
        with traversals.walking(obj):
            assert list(traversals.filters_of(obj)) == list(traversals._filters_of(obj))
            assert list(traversals.rules_of(obj)) == list(traversals._rules_of(obj))


_ODD = [None, "", True, 1, 0, 8080, 443, "gateway.networking.k8s.io", "Gateway", "ListenerSet", "Service",
        "http", "https", "web", "a", [], {}, 1.0, -3]


@st.composite
def _variant(draw: st.DrawFn, route: Obj) -> Obj:
    """A copy of ``route`` as the API server could store it (its defaults written out) or changed in the
    fields attachment and backend resolution read, with values of odd types among them."""
    out = copy.deepcopy(route)
    spec = out.get("spec", {})
    for p in spec.get("parentRefs", []):
        if draw(st.booleans()):
            p.setdefault("group", "gateway.networking.k8s.io")
            p.setdefault("kind", "Gateway")
        if draw(st.integers(0, 3)) == 0:
            p[draw(st.sampled_from(["group", "kind", "namespace", "name", "sectionName", "port"]))] = draw(
                st.sampled_from(_ODD))
    for rule in spec.get("rules", []):
        for b in rule.get("backendRefs", []) if isinstance(rule, dict) else []:
            if draw(st.booleans()):
                b.setdefault("group", "")
                b.setdefault("kind", "Service")
                b.setdefault("weight", 1)
            if draw(st.integers(0, 3)) == 0:
                b[draw(st.sampled_from(["group", "kind", "namespace", "name", "port", "weight"]))] = draw(
                    st.sampled_from(_ODD))
    if draw(st.integers(0, 4)) == 0:
        spec["hostnames"] = draw(st.sampled_from([[], ["a.example.com"], [1], ["*.example.com", "x.example.com"]]))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=deltastates.cluster_and_change(), data=st.data())
def test_a_copy_of_a_stored_route_is_judged_as_from_scratch(drawn: tuple[list[Obj], Change],
                                                            data: st.DataObject) -> None:
    """``routegate check`` judges the defaulted copy of each input against the state holding the stored
    one (``indexes.stored_twin``): the copy's attachments and backendRefs, memoized or taken from the
    stored route's, are what the from-scratch path gives the copy, whatever changed in it."""
    objects, _ = drawn
    everything = MemoryState(objects, version="v1")
    routes = [o for o in objects if kind_of(o) in attachments.ROUTE_KINDS]
    for route in routes[:4]:
        copied = data.draw(_variant(route))
        others = Overlay(everything, Change(Operation.DELETE, None, route))
        proposed = Overlay(others, Change(Operation.UPDATE, copied, route))
        want = (judged(copied, Recording(proposed)), backendrefs.backend_refs(copied, Recording(proposed)))
        for _ in range(2):  # computed, then from the memo; the stored route's own answers unchanged
            assert (judged(copied, proposed), backendrefs.backend_refs(copied, proposed)) == want
            assert attachments.attach(route, everything) == attachments.attach(route, Recording(everything))
            assert backendrefs.backend_refs(route, everything) == backendrefs.backend_refs(route, Recording(everything))


def test_a_twin_needs_exactly_equal_keys() -> None:
    """``1`` equals ``True`` and a ``str`` subclass equals its text, but a message prints them apart:
    such keys never make a twin."""

    class Text(str):
        pass

    assert indexes.exact_key(("a", 1, None, ("b", 2)))
    assert not indexes.exact_key(("a", True))
    assert not indexes.exact_key((Text("a"),))
    assert not indexes.exact_key((1.0,))
    assert not indexes.exact_key(([],))


@st.composite
def _gateway_variant(draw: st.DrawFn, gateway: Obj) -> Obj:
    """A copy of ``gateway`` with its defaults written out, its labels or status changed, or a field
    that attachment reads changed (listeners, allowedListeners, its class)."""
    out = copy.deepcopy(gateway)
    spec = out.setdefault("spec", {})
    for lst in spec.get("listeners", []):
        if draw(st.booleans()):
            lst.setdefault("allowedRoutes", {}).setdefault("namespaces", {}).setdefault("from", "Same")
        if draw(st.integers(0, 4)) == 0:
            lst[draw(st.sampled_from(["name", "port", "hostname", "protocol"]))] = draw(st.sampled_from(
                ["web", "https", 80, 443, 8443, "*.example.com", "HTTP", "HTTPS", "TLS", None]))
        if draw(st.integers(0, 5)) == 0:
            lst["allowedRoutes"] = {"namespaces": {"from": draw(st.sampled_from(["All", "Same", "Selector"]))}}
    change = draw(st.sampled_from(["labels", "status", "allowedListeners", "class", "none"]))
    if change == "labels":
        out.setdefault("metadata", {})["labels"] = {"a": "b"}
    elif change == "status":
        out["status"] = {"conditions": [{"type": "Accepted", "status": "Unknown"}]}
    elif change == "allowedListeners":
        spec["allowedListeners"] = {"namespaces": {"from": draw(st.sampled_from(["All", "Same", "None", "Selector"]))}}
    elif change == "class":
        spec["gatewayClassName"] = "other"
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=deltastates.cluster_and_change(), data=st.data())
def test_routes_under_a_changed_gateway_are_judged_as_from_scratch(drawn: tuple[list[Obj], Change],
                                                                    data: st.DataObject) -> None:
    """Under a copy of a stored Gateway whose listeners read as the stored one's, routes attach as in
    the state below (``attachments._same_listeners_below``): every route's attachments, and the copy's
    own findings and status (which walk the routes naming it), are what the from-scratch path gives."""
    objects, _ = drawn
    everything = MemoryState(objects, version="v1")
    routes = [o for o in objects if kind_of(o) in attachments.ROUTE_KINDS]
    for gateway in [o for o in objects if kind_of(o) == "Gateway"][:2]:
        copied = data.draw(_gateway_variant(gateway))
        others = Overlay(everything, Change(Operation.DELETE, None, gateway))
        for proposed in (Overlay(others, Change(Operation.UPDATE, copied, gateway)),
                         Overlay(everything, Change(Operation.UPDATE, copied, gateway))):
            want = judged(copied, Recording(proposed))
            for _ in range(2):
                assert judged(copied, proposed) == want
                for route in routes:
                    assert attachments.attach(route, proposed) == attachments.attach(route, Recording(proposed))


def test_a_listener_set_without_listeners_still_sees_its_parents_admission() -> None:
    """A ListenerSet with no listeners adds none to the listener tables whether its parent admits it or
    not; only its status says which, so a Gateway copy that changes spec.allowedListeners is no twin."""
    gw = "gateway.networking.k8s.io/v1"
    gateway = {"apiVersion": gw, "kind": "Gateway", "metadata": {"name": "g", "namespace": "a"},
               "spec": {"gatewayClassName": "haproxy", "allowedListeners": {"namespaces": {"from": "All"}},
                        "listeners": [{"name": "web", "port": 80, "protocol": "HTTP"}]}}
    listener_set = {"apiVersion": gw, "kind": "ListenerSet", "metadata": {"name": "ls", "namespace": "b"},
                    "spec": {"parentRef": {"name": "g", "namespace": "a"}, "listeners": []}}
    route = {"apiVersion": gw, "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "b"},
             "spec": {"parentRefs": [{"kind": "ListenerSet", "name": "ls"}]}}
    everything = MemoryState([gateway, listener_set, route], version="v1")
    attachments.attach(route, everything)
    copied = copy.deepcopy(gateway)
    copied["spec"]["allowedListeners"] = {"namespaces": {"from": "None"}}
    proposed = Overlay(everything, Change(Operation.UPDATE, copied, gateway))
    want = attachments.attach(route, Recording(proposed))
    assert want != attachments.attach(route, everything)
    assert attachments.attach(route, proposed) == want
