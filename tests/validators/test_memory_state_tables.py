"""A MemoryState answers list/get/kinds/counts as a table by Ref would: sorted by Ref within a kind, the
later of two objects with one identity wins."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.objects import Ref, ref_of
from validators.states import MemoryState

NAMES = st.sampled_from(["a", "b", "B", "a-1", ""])
OBJECT = st.builds(
    lambda kind, namespace, name, n: {"kind": kind, "metadata": {"namespace": namespace, "name": name}, "n": n},
    st.sampled_from(["HTTPRoute", "Gateway", "Service", "GatewayClass"]), NAMES, NAMES, st.integers(0, 9))


@settings(max_examples=200, deadline=None)
@given(st.lists(OBJECT, max_size=12))
def test_the_tables_answer_as_one_keyed_by_ref(objects: list[dict[str, Any]]) -> None:
    by_ref: dict[Ref, dict[str, Any]] = {}
    for obj in objects:
        by_ref[ref_of(obj)] = obj
    state = MemoryState(objects)
    kinds = sorted({r.kind for r in by_ref})
    assert list(state.kinds()) == kinds
    assert dict(state.counts()) == {k: sum(1 for r in by_ref if r.kind == k) for k in kinds}
    for kind in [*kinds, "TLSRoute"]:
        assert list(state.list(kind)) == [by_ref[r] for r in sorted(by_ref) if r.kind == kind]
    for ref, obj in by_ref.items():
        assert state.get(ref.kind, ref.namespace, ref.name) is obj
    assert state.get("HTTPRoute", "nowhere", "none") is None
