"""A rule with a RequestMirror HAProxy cannot honour (validators.objectrules.unhonoured) serves without the
mirror, and the route's status says so: PartiallyInvalid=True/UnsupportedValue with a message that starts
"Fall Back" (no rule is dropped), naming the rule and the filter; Accepted stays True."""

from __future__ import annotations

from typing import Any

from tests.attachments.gwbuilders import gateway, listener, parent, route, service
from validators.crossobject import statuses
from validators.states import MemoryState

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
                             ("PartiallyInvalid", "True", "UnsupportedValue")]
    assert kinds(got[1]) == [("Accepted", "False", "NoMatchingParent"), ("ResolvedRefs", "True", "ResolvedRefs")]
    message = got[0][2]["message"]
    assert message.startswith("Fall Back: spec.rules[1].filters[1].type: RequestMirror is not supported")
    assert "rule 1 serves without the mirror" in message and "Dropped" not in message


def test_a_route_whose_every_rule_is_mirrored_stays_accepted() -> None:
    (got,) = parents({**SERVED, "filters": [MIRROR]}, {**SERVED, "filters": [MIRROR, MIRROR]}, refs=("gw",))
    assert kinds(got) == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs"),
                          ("PartiallyInvalid", "True", "UnsupportedValue")]
    said = got[2]["message"]
    assert said.startswith("Fall Back: spec.rules[0].filters[0].type: ")
    assert "; spec.rules[1].filters[0].type: " in said and said.count("RequestMirror is not supported") == 2


def test_a_route_without_mirrors_is_unchanged() -> None:
    assert kinds(parents(SERVED)[0]) == [("Accepted", "True", "Accepted"), ("ResolvedRefs", "True", "ResolvedRefs")]
