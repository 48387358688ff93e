"""A map text is stripped once: ``map_files`` keeps the unordered maps' texts without markers (made while
sorting their lines), and ``SourceMap.strip`` given that text answers as when it strips the markers
itself: the same clean text, line counts and origins (differential, on drawn marked texts and entries).
And a route compilation's frontend lookups log what ``Mapping.get`` through ``__getitem__`` logged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render import helpers, increments
from haproxy_check.render.http.httpmodels import FrontendModel
from haproxy_check.render.sourcemaps import _MARK, SourceMap
from tests.render.test_fast_paths import marked_texts
from validators.objects import Ref


def _stripped(given_clean: bool, texts: list[str]) -> tuple[object, ...]:
    sources = SourceMap()
    marks = [sources.mark(Ref("HTTPRoute", "ns", f"r{i}"), ("spec", "rules", k)) for i in range(3) for k in range(2)]
    assert marks == [f"\x1e{n}\x1f" for n in range(6)]
    out = [sources.strip(f"maps/{n}.map", text, _MARK.sub("", text) if given_clean else None)
           for n, text in enumerate(texts)]
    return out, sources.line_pairs(), list(sources.line_counts().items()), dict(sources.origins())


_MARKS = [f"\x1e{n}\x1f" for n in range(6)]


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(marked_texts(_MARKS), max_size=4))
def test_strip_given_the_clean_text_answers_as_stripping_it(texts: list[str]) -> None:
    assert _stripped(True, texts) == _stripped(False, texts)


_ENTRIES = st.lists(st.builds(lambda key, mark, value: f"{key}{mark} {value}",
                              st.sampled_from(["a", "b", "host:80", "c/d"]),
                              st.sampled_from(["", *_MARKS]), st.sampled_from(["x", "y", "1|2"])), max_size=12)


@settings(max_examples=150, deadline=None)
@given(entries=_ENTRIES, more=_ENTRIES, ordered=st.booleans())
def test_the_clean_texts_of_map_files_are_their_texts_stripped(entries: list[str], more: list[str],
                                                               ordered: bool) -> None:
    sources = SourceMap()
    for n in range(6):
        sources.mark(Ref("HTTPRoute", "ns", "r"), ("spec", "rules", n))
    recorder = helpers.Recorder(base_lines=(), sources=sources)
    recorder.register_map("a.map", entries, {"ordered": ordered})
    recorder.register_map("a.map", more, {"ordered": ordered})
    recorder.register_map("b.map", more, {"ordered": False})
    texts = recorder.map_files()
    for path, clean in recorder.clean_texts.items():
        assert clean == _MARK.sub("", texts[path])
    marked = [path for path, text in texts.items() if "\x1e" in text and not recorder.maps[path][0]]
    assert sorted(recorder.clean_texts) == sorted(marked)  # every unordered marked map, nothing else


def test_frontend_lookups_log_what_they_found() -> None:
    fe = FrontendModel("fe_http_80", "80", "HTTP", ":80", 80)
    reads = increments.FrontReads({("HTTP", "80"): fe})
    assert reads.get(("HTTP", "80@ns/gw")) is None
    assert reads.get(("HTTP", "81"), "none") == "none"
    assert reads.get(("HTTP", "80")) is fe
    assert reads[("HTTP", "80")] is fe
    assert reads.seen == {("HTTP", "80@ns/gw"): None, ("HTTP", "81"): None, ("HTTP", "80"): ("fe_http_80", "80")}


@settings(max_examples=150, deadline=None)
@given(text=marked_texts(_MARKS))
def test_without_markers_is_the_stripped_line(text: str) -> None:
    sources = SourceMap()
    for n in range(6):
        sources.mark(Ref("HTTPRoute", "ns", "r"), ("spec", "rules", n))
    assert sources.without_markers(text) == sources.strip_line(text)[0]
