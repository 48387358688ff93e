"""The render's fast paths give what the ways they replace gave, byte for byte.

Differential tests: each faster step (named in its test) is compared with the plain computation it
stands for, on hypothesis-drawn states from every render fixture (``test_incremental``'s pool) and on
drawn texts, so a fast path that ever differs fails here rather than in a review.
"""

from __future__ import annotations

import copy
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.render import routelines
from haproxy_check.render.rendering import Renderer, RenderError, RenderSettings
from haproxy_check.render.sourcemaps import SourceMap
from tests.render.test_incremental import REFS, VARIANTS
from validators.findings import Finding
from validators.limits import Limits
from validators.objects import Ref
from validators.states import MemoryState

_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def fixture_states(draw: st.DrawFn) -> MemoryState:
    refs = draw(st.lists(st.sampled_from(REFS), min_size=5, max_size=60, unique=True))
    return MemoryState([copy.deepcopy(draw(st.sampled_from(VARIANTS[ref]))) for ref in refs])


# ---------------------------------------------------------------- lines per route from marker counts

_PIECES = st.sampled_from(["a", " ", "x y", "\n", "\x1e", "\x1f", "\x1e9", "\x1e1x\x1f", "7"])


@st.composite
def marked_texts(draw: st.DrawFn, marks: list[str]) -> str:
    parts = draw(st.lists(st.one_of(_PIECES, st.sampled_from(marks)), max_size=40))
    return "".join(parts)


@_SETTINGS
@given(data=st.data(), files=st.lists(st.sampled_from(["haproxy.cfg", "maps/a.map", "maps/b.map"]), max_size=4))
def test_line_counts_are_the_origins_of_the_lines(data: st.DataObject, files: list[str]) -> None:
    """``SourceMap.line_counts`` (counted while stripping) is ``Counter(origins().values())``, in the same
    order (the order decides which field a RG0408 finding names on a tie); a file stripped twice too."""
    sources = SourceMap()
    refs = [Ref("HTTPRoute", "ns", f"r{i}") for i in range(3)]
    marks = [sources.mark(ref, ("spec", "rules", k)) for ref in refs for k in range(2)]
    for file in files:
        sources.strip(file, data.draw(marked_texts(marks)))
    got = sources.line_counts()
    want = Counter(sources.origins().values())
    assert list(got.items()) == list(want.items())


def _oversized(findings: tuple[Finding, ...]) -> list[Finding]:
    return [f for f in findings if f.code == routelines.codes.RENDER_ROUTE_TOO_LARGE]


@_SETTINGS
@given(state=fixture_states(), limit=st.integers(1, 12), data=st.data())
def test_route_size_findings_from_counts_are_those_from_the_lines(state: MemoryState, limit: int,
                                                                  data: st.DataObject) -> None:
    """A render's RG0408 findings (from marker counts) are ``routelines.oversized`` of its source map."""
    routes = sorted(r for r in REFS if r.kind in ("HTTPRoute", "GRPCRoute") and state.get(r.kind, r.namespace, r.name))
    subject = data.draw(st.none() | st.sampled_from(routes)) if routes else None
    renderer = Renderer(settings=RenderSettings(limits=Limits(lines_per_route=limit)), incremental=False)
    try:
        result = renderer.render(state, subject=subject)
    except RenderError:
        return
    assert _oversized(result.findings) == sorted(
        routelines.oversized(result.origins, limit, subject), key=lambda f: (f.about, f.field, f.code, f.message))
