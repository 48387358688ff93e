"""The subject's status is worked out when first read, not during the render (``laterstatuses``): not on
a review's path before ``haproxy -c``, yet the same status, and a plain dict wherever it is copied."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
import yaml

from haproxy_check.render import rendering
from haproxy_check.render.rendering import Renderer
from tests.render.test_incremental import DATA, REFS, ROUTE_KINDS, VARIANTS
from validators.crossobject import statuses
from validators.objects import ref_of
from validators.states import MemoryState


def _state() -> MemoryState:
    return MemoryState([o for o in yaml.safe_load_all((DATA / "render" / "basic.yaml").read_text()) if o])


def test_the_render_does_not_work_out_the_status_until_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    status_of = statuses.status_of

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return status_of(*args, **kwargs)

    monkeypatch.setattr(statuses, "status_of", counted)
    state = _state()
    route = next(o for o in state.list("HTTPRoute"))
    subject = ref_of(route)
    result = Renderer().render(state, subject=subject)
    assert not calls
    status = result.statuses.get(str(subject), {})
    assert not calls  # a view of the entry waits too: a verdict holds it unread
    assert status["parents"] and len(calls) == 1
    assert dict(result.statuses) == {str(subject): status_of(route, state)} and len(calls) == 1


@pytest.mark.parametrize("ref", [r for r in REFS if r.kind in ROUTE_KINDS])
def test_a_status_read_later_is_the_one_worked_out_at_once(ref: Any) -> None:
    state = MemoryState([copy.deepcopy(VARIANTS[r][0]) for r in REFS])
    result = Renderer().render(state, subject=ref)
    now = rendering._statuses_now(state, ref, (80, 443))
    assert result.statuses == now and dict(result.statuses) == now
    entry = result.statuses.get(str(ref), {})
    assert entry == now.get(str(ref), {})
    for copied in (pickle.loads(pickle.dumps(result.statuses)), copy.deepcopy(result.statuses),
                   pickle.loads(pickle.dumps(entry))):
        assert type(copied) is dict
    assert copy.deepcopy(entry) == now.get(str(ref), {})
