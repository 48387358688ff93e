"""A rule with a RequestMirror HAProxy cannot honour (validators.objectrules.unhonoured) serves without the
mirror, and the route's status says so: routegate.io/NotApplied=True/UnsupportedValue naming the rule and the
filter; Accepted stays True. Not PartiallyInvalid: its messages must say "Dropped Rule" or "Fall Back" (to the
route's last known good state), and neither is what is served."""

from __future__ import annotations

from typing import Any

from tests.attachments.gwbuilders import gateway, listener, parent, route, service
from validators.crossobject import statuses
from validators.objects import Ref
from validators.states import MemoryState
from validators.views.scopes import Scope
from webhook.reconcile import statusshapes

MIRROR = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "svc", "port": 80}}}
SERVED = {"backendRefs": [{"name": "svc", "port": 80}]}
HEADER = {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-A", "value": "1"}]}}


def parents(*rules: dict[str, Any], refs: tuple[str, ...] = ("gw", "nope")) -> list[list[dict[str, str]]]:
    r = route("HTTPRoute", "r", *(parent(p) for p in refs), rules=list(rules))
    state = MemoryState([gateway("gw", listener("http", 80)), service("svc"), r])
    return [p["conditions"] for p in statuses.route_status(r, state)["parents"]]


def kinds(conditions: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in conditions]


def test_a_mirrored_rule_falls_back_to_serving_without_the_mirror() -> None:
    got = parents(SERVED, {**SERVED, "filters": [HEADER, MIRROR]})
    assert kinds(got[0]) == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs"),
                             ("routegate.io/NotApplied", "True", "UnsupportedValue")]
    assert kinds(got[1]) == [("Accepted", "False", "NoMatchingParent"), ("ResolvedRefs", "True", "ResolvedRefs")]
    message = got[0][2]["message"]
    assert message.startswith("spec.rules[1].filters[1].type: RequestMirror is not supported")
    assert "rule 1 serves without the mirror" in message and "Dropped" not in message and "Fall Back" not in message
    assert not [c for p in got for c in p if c["type"] == "PartiallyInvalid"]


def test_a_route_whose_every_rule_is_mirrored_stays_accepted() -> None:
    (got,) = parents({**SERVED, "filters": [MIRROR]}, {**SERVED, "filters": [MIRROR, MIRROR]}, refs=("gw",))
    assert kinds(got) == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs"),
                          ("routegate.io/NotApplied", "True", "UnsupportedValue")]
    said = got[2]["message"]
    assert said.startswith("spec.rules[0].filters[0].type: ")
    assert "; spec.rules[1].filters[0].type: " in said and said.count("RequestMirror is not supported") == 2


def test_a_route_without_mirrors_is_unchanged() -> None:
    assert kinds(parents(SERVED)[0]) == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]


def test_a_mirror_and_a_part_reconcile_leaves_out_share_one_not_applied_condition() -> None:
    """A route whose rule is mirrored and whose session persistence reconcile leaves out (seed 004) has one
    routegate.io/NotApplied condition saying both (one condition per type in a parent's list)."""
    r = route("HTTPRoute", "r", parent("gw"), rules=[{**SERVED, "filters": [MIRROR]}])
    gateway_class = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                     "metadata": {"name": "haptic"}, "spec": {"controllerName": "example.net/routegate"}}
    state = MemoryState([gateway_class, gateway("gw", listener("http", 80)), service("svc"), r])
    facts = statusshapes.Facts(partial={Ref("HTTPRoute", "default", "r"): "no session persistence on spec.rules[0]"})
    [target] = statusshapes.targets(state, statuses.all_statuses(state), facts, Scope(),
                                    only=[Ref("HTTPRoute", "default", "r")])
    [entry] = target.status["parents"]
    [not_applied] = [c for c in entry["conditions"] if c["type"] == "routegate.io/NotApplied"]
    assert not_applied["message"].startswith("served with no session persistence on spec.rules[0]; "
                                             "spec.rules[0].filters[0].type: RequestMirror is not supported")
