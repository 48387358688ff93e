"""A one-route change costs the audit O(change), not O(the routes of its Gateway).

The changed route's Gateway is judged again (its judgement read the route), and that judgement asks
every route naming the Gateway for its attachments, backendRefs and findings. With the per-object memos
``indexes.of_object`` carries from one linked snapshot to the next, only the changed route's answers are
computed; every other route's come from the memo, their reads logged for the Gateway's new result
(test_audit_sequences proves the results equal a from-scratch audit after random sequences).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import bench_gate
from tests.reconcile.test_audit_sequences import Linked
from validators.crossobject import backendrefs, crossobjects
from validators.objects import ref_of
from validators.states import State
from validators.views import attachments
from webhook.gate.gates import Gate
from webhook.reconcile import audits


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"attach": 0, "backend refs": 0, "route findings": 0}
    for module, name, key in ((attachments, "_attach", "attach"), (backendrefs, "_backend_refs", "backend refs"),
                              (crossobjects, "_route_findings", "route findings")):
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _key: str = key, **kwargs: Any) -> Any:
            calls[_key] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("routes", [30, 90])
def test_a_changed_route_computes_only_its_own_answers_again(gate: Gate, routes: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    objs = bench_gate.objects(routes)
    cache = audits.AuditCache(gate.rules, gate.scope)
    state: State = Linked({ref_of(o): o for o in objs}, "0", None)
    assert cache.audit(state) == []
    calls = _counting(monkeypatch)
    for k in range(3):
        at = next(i for i, o in enumerate(objs) if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == f"route-{k}")
        objs = [*objs[:at], bench_gate.route(k, variant=1), *objs[at + 1:]]
        state = Linked({ref_of(o): o for o in objs}, str(k + 1), (state, frozenset({ref_of(objs[at])})))
        before = dict(calls)
        got = cache.audit(state)
        # the changed route's own answers only: for its own judgement (of its defaulted copy) and for its
        # Gateway's (of the stored route; its findings about it), however many routes name the Gateway
        # (a third of them)
        assert {key: n - before[key] for key, n in calls.items()} == {
            "attach": 2, "backend refs": 2, "route findings": 2}, (k, calls, before)
        assert cache.judged == 2  # the route and its Gateway
        assert got == audits.audit(gate.rules, Linked({ref_of(o): o for o in objs}, "fresh", None))
