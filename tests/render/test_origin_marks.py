"""One marker per distinct origin, however the origin is given: a Ref and a path (tuple or list), or an
Origin; markers are keyed by the Ref's strings, so equal Refs share a marker and distinct ones never do
(differential against a table keyed by the Origin record itself)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render.sourcemaps import Origins
from haproxy_check.results import Origin
from validators.objects import Ref

_WORDS = st.sampled_from(["", "a", "b", "a b", "ns", "HTTPRoute"])
_REFS = st.builds(Ref, _WORDS, _WORDS, _WORDS)
_PATHS = st.lists(st.one_of(st.sampled_from(["spec", "rules", "matches"]), st.integers(0, 2)), max_size=4)
_CALLS = st.lists(st.tuples(_REFS, _PATHS, st.sampled_from(["tuple", "list", "origin"])), max_size=40)


@settings(max_examples=150, deadline=None)
@given(calls=_CALLS)
def test_markers_are_one_per_distinct_origin(calls: list[tuple[Ref, list[str | int], str]]) -> None:
    table = Origins()
    expected: dict[Origin, str] = {}  # the reference: numbered by the Origin record, in first-seen order
    for ref, path, form in calls:
        origin = Origin(ref, tuple(path))
        if form == "origin":
            marker = table.mark(origin)
        else:
            marker = table.mark(ref, tuple(path) if form == "tuple" else list(path))
        want = expected.setdefault(origin, f"\x1e{len(expected)}\x1f")
        assert marker == want
        assert table[int(marker[1:-1])] == origin
    assert list(table.table()) == list(expected)
    assert table.mark(None) == ""
