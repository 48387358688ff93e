"""A rule HAProxy cannot honour (RequestMirror: validators.objectrules.unhonoured) is dropped, and the route's
status says so as the Gateway API prescribes: PartiallyInvalid=True/UnsupportedValue "Dropped Rule ..." with
Accepted=True while other rules are served, Accepted=False/UnsupportedValue when no rule is left."""

from __future__ import annotations

from typing import Any

from tests.attachments.gwbuilders import gateway, listener, parent, route, service
from validators.crossobject import statuses
from validators.states import MemoryState

MIRROR = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "svc", "port": 80}}}
SERVED = {"backendRefs": [{"name": "svc", "port": 80}]}


def conditions(*rules: dict[str, Any]) -> list[list[tuple[str, str, str]]]:
    r = route("HTTPRoute", "r", parent("gw"), parent("nope"), rules=list(rules))
    state = MemoryState([gateway("gw", listener("http", 80)), service("svc"), r])
    return [[(c["type"], c["status"], c["reason"]) for c in p["conditions"]]
            for p in statuses.route_status(r, state)["parents"]]


def test_a_mirrored_rule_among_served_ones_is_partially_invalid() -> None:
    got = conditions(SERVED, {**SERVED, "filters": [MIRROR]})
    assert got[0] == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs"),
                      ("PartiallyInvalid", "True", "UnsupportedValue")]
    assert got[1] == [("Accepted", "False", "NoMatchingParent"), ("ResolvedRefs", "True", "ResolvedRefs")]
    r = route("HTTPRoute", "r", parent("gw"), rules=[SERVED, {**SERVED, "filters": [MIRROR]}])
    state = MemoryState([gateway("gw", listener("http", 80)), service("svc"), r])
    message = statuses.route_status(r, state)["parents"][0]["conditions"][2]["message"]
    assert message.startswith("Dropped Rule 1: spec.rules[1].filters[0].type: RequestMirror is not supported")


def test_a_route_whose_every_rule_is_dropped_is_not_accepted() -> None:
    got = conditions({**SERVED, "filters": [MIRROR]})
    assert got[0] == [("Accepted", "False", "UnsupportedValue"), ("ResolvedRefs", "True", "ResolvedRefs")]


def test_a_route_without_mirrors_is_unchanged() -> None:
    assert conditions(SERVED)[0] == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]
