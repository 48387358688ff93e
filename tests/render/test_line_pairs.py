"""Lines per origin added up by marker number are the counts added up by origin, in the same order, and
the route size findings made from them are the same (differential, on drawn marked texts)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render import routelines
from haproxy_check.render.sourcemaps import SourceMap
from tests.render.test_fast_paths import marked_texts
from validators.objects import Ref

_FILES = st.lists(st.sampled_from(["haproxy.cfg", "maps/a.map", "maps/b.map"]), max_size=4)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), files=_FILES, resolved=st.booleans(), limit=st.integers(0, 6),
       subject=st.sampled_from([None, Ref("HTTPRoute", "ns", "r0")]))
def test_pairs_by_number_are_the_counts_by_origin(data: st.DataObject, files: list[str], resolved: bool,
                                                  limit: int, subject: Ref | None) -> None:
    sources = SourceMap()
    refs = [Ref("HTTPRoute", "ns", f"r{i}") for i in range(3)] + [Ref("Gateway", "ns", "g")]
    marks = [sources.mark(ref, ("spec", "rules", k, "matches", m)) for ref in refs for k in range(2) for m in range(2)]
    if resolved:  # a file resolved at once (its lines recorded) besides the stripped ones
        sources.resolve("maps/r.map", data.draw(marked_texts(marks)))
    for file in files:
        sources.strip(file, data.draw(marked_texts(marks)))
    counts = sources.line_counts()
    assert sources.line_pairs() == list(counts.items())
    assert routelines.oversized_pairs(sources.line_pairs(), limit, subject) == routelines.oversized_counts(
        Counter(counts), limit, subject)
