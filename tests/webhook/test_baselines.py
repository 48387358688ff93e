"""The baseline rule compares failures, not the proxy that happened to report them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gates import Gate
from webhook.verdicts import Decision

pytestmark = pytest.mark.haproxy


def named(name: str, where: Any = INPUTS) -> dict[str, Any]:
    return copy.deepcopy(next(o for o in load_objects(where) if o["metadata"]["name"] == name))  # type: ignore[index]


@pytest.mark.parametrize("delta", [False, True])
async def test_a_new_frontend_that_reports_an_old_broken_map_entry_does_not_deny(gate: Gate, delta: bool) -> None:
    """The broken route's bad regex sits in a map every HTTP frontend loads; HAProxy names the first
    frontend that loads it. A Gateway change adding port 79 (gw-http-79 sorts before gw-http-80) changes
    that name, not the failure: the change is admitted with the baseline warning."""
    judge = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=delta)
    edge = named("edge", STATE_DIR)
    changed = copy.deepcopy(edge)
    changed["spec"]["listeners"].append({"name": "alt", "protocol": "HTTP", "port": 79,
                                         "allowedRoutes": {"namespaces": {"from": "Same"}}})
    state = MemoryState([*load_objects(STATE_DIR), named("broken")], version="v1")
    verdict = await judge.review(Change(Operation.UPDATE, changed, edge), state=state, reload_note=False)
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert any("already fails haproxy -c because of HTTPRoute capture/broken" in n
               for n in verdict.notes), verdict.notes
