"""Route status (validators.crossobject.statuses): Accepted and ResolvedRefs conditions per parentRef."""

from __future__ import annotations

import json

from tests.attachments.gwbuilders import gateway, listener, parent, route, service
from validators.crossobject import statuses
from validators.states import MemoryState


def test_status_per_parent_with_resolved_refs() -> None:
    r = route("HTTPRoute", "r", parent("gw"), parent("nope"),
              rules=[{"backendRefs": [{"name": "svc", "port": 80}, {"name": "gone", "port": 80}]}])
    state = MemoryState([gateway("gw", listener("http", 80)), service("svc"), r])
    got = statuses.route_status(r, state)
    assert [(p["parentRef"]["name"], [(c["type"], c["status"], c["reason"]) for c in p["conditions"]])
            for p in got["parents"]] == [
        ("gw", [("Accepted", "True", "Accepted"), ("ResolvedRefs", "False", "BackendNotFound")]),
        ("nope", [("Accepted", "False", "NoMatchingParent"), ("ResolvedRefs", "False", "BackendNotFound")])]
    assert got["parents"][0]["conditions"][1]["message"].startswith("spec.rules[0].backendRefs[1]: ")
    everything = statuses.statuses(state)
    assert list(everything) == ["HTTPRoute default/r"] and everything["HTTPRoute default/r"] == got
    json.dumps(everything)


def test_resolved_route_is_all_true() -> None:
    r = route("TCPRoute", "t", parent("gw"), rules=[{"backendRefs": [{"name": "svc", "port": 80}]}])
    state = MemoryState([gateway("gw", listener("tcp", 5432, "TCP")), service("svc"), r])
    conds = statuses.route_status(r, state)["parents"][0]["conditions"]
    assert [c["status"] for c in conds] == ["True", "True"]
