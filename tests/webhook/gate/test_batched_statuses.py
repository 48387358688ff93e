"""A batched route verdict's status is worked out when first read, and is the one worked out at once."""

from __future__ import annotations

import pytest

from tests.webhook.gate.test_gates import many_shops, named, state_with
from validators.changes import Change, Operation
from validators.crossobject import statuses
from webhook.gate.gates import Gate

pytestmark = pytest.mark.haproxy


async def test_a_batched_route_status_is_worked_out_when_read_and_equals_the_one_worked_out_at_once(
        gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    changes = [Change(Operation.CREATE, obj) for obj in (*many_shops(4), named("sticky"))]
    state = state_with(version="later-statuses")
    route_status = statuses.route_status
    calls: list[str] = []

    def counted(route: dict[str, object], state: object) -> dict[str, object]:
        calls.append(str(route["metadata"]))
        return route_status(route, state)  # type: ignore[arg-type]

    monkeypatch.setattr(statuses, "route_status", counted)
    verdicts = await gate.review_together(changes, state=state, notes_for=0.0)
    together = [v for v in verdicts if v.allowed]
    assert len(together) >= 2, "some were judged together"
    assert calls == [], "nothing read a status yet"
    read = [dict(v.status) for v in together]
    assert len(calls) == len(together)
    monkeypatch.setattr(statuses, "route_status", route_status)
    by_ref = {c.ref: c for c in changes}
    for verdict, status in zip(together, read, strict=True):
        alone = await gate.review(by_ref[verdict.ref], state=state, reload_note=False)
        assert status == dict(alone.status) and status, verdict.ref
