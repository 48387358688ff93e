"""The weight slot lines made as PlainLines register, write and describe as the same lines checked one
by one: RegisterMap skips the check, map_files the de-duplication and description the split only when
that changes nothing (differential, on drawn rule ids and backends, hostile ones among them)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check import escaping
from haproxy_check.render import helpers
from haproxy_check.render.http.httpmodels import WEIGHTED_MAP, HttpModel
from haproxy_check.render.sourcemaps import SourceMap
from validators.objects import Ref

SOURCES = SourceMap()
MARK = SOURCES.mark(Ref("HTTPRoute", "a", "r"), ("spec", "rules", 0))
_WORDS = st.sampled_from(["a_b_0", "ns_r_1", "gw_h_ns_r_svc_80", "@500", "x", "9", "#x", "a b", "", " a", "a ",
                          "\u00e9", "a\nb", "a\x0cb", MARK, f"b{MARK}", "a\x1cb", "a\x85b"])
_SLOTS = st.lists(_WORDS, min_size=1, max_size=4).flatmap(
    lambda targets: st.lists(st.sampled_from(targets), min_size=1, max_size=120).map(tuple))


def _described(register: Any, extra: list[str] | None) -> tuple[str, dict[str, str], Any]:
    recorder = helpers.Recorder(base_lines=(), sources=SOURCES)
    try:
        register(recorder)
        if extra is not None:  # a user template registering more lines in the same map
            recorder.register_map(WEIGHTED_MAP, extra)
    except (helpers.TemplateError, escaping.Unsafe) as exc:
        return f"{type(exc).__name__}: {exc}", {}, None
    texts = {path: SOURCES.strip(path, text) for path, text in recorder.map_files().items()}
    return "ok", texts, recorder.description(texts)


@settings(max_examples=300, deadline=None)
@given(rules=st.dictionaries(_WORDS, _SLOTS, max_size=5), ordered=st.booleans(), data=st.data())
def test_slot_lines_register_as_the_same_lines_checked(rules: dict[str, tuple[str, ...]], ordered: bool,
                                                        data: st.DataObject) -> None:
    model = HttpModel(weighted=list(rules.items()))
    lines = model.map_entries(WEIGHTED_MAP) if rules else []
    # more lines for the same map, some of them slot lines again (to be de-duplicated)
    extra = data.draw(st.none() | st.lists(st.sampled_from([*lines[:3], "1:x y", "a  b", MARK]), max_size=3))
    want = [f"{n}:{rid} {target}" for rid, targets in sorted(rules.items()) for n, target in enumerate(targets)]
    assert lines == want
    if type(lines) is helpers.PlainLines:
        assert helpers._plain_entries(list(lines), SOURCES) and len(set(lines)) == len(lines)
    fast = _described(lambda rec: rec.register_map(WEIGHTED_MAP, lines, {"ordered": ordered}), extra)
    plain = _described(lambda rec: rec.register_map(WEIGHTED_MAP, list(lines), {"ordered": ordered}), extra)
    assert fast == plain


def test_slot_lines_of_plain_words_are_plain_lines() -> None:
    model = HttpModel(weighted=[("ns_r_0", ("gw_a",) * 60 + ("gw_b",) * 40), ("ns_q_1", ("@500",) * 100)])
    assert type(model.map_entries(WEIGHTED_MAP)) is helpers.PlainLines
    model = HttpModel(weighted=[("ns_r_0", ("gw a",) * 100)])
    assert type(model.map_entries(WEIGHTED_MAP)) is list


_PLAIN_WORDS = st.sampled_from(["a_b_0", "ns_r_1", "gw_h_ns_r_svc_80", "@500", "x", "9", "#x"])
_PLAIN_SLOTS = st.lists(_PLAIN_WORDS, min_size=1, max_size=4).flatmap(
    lambda targets: st.lists(st.sampled_from(targets), min_size=0, max_size=230).map(tuple))


@settings(max_examples=200, deadline=None)
@given(rules=st.dictionaries(_PLAIN_WORDS, _PLAIN_SLOTS, max_size=5), times=st.integers(1, 3), then=st.booleans())
def test_a_map_written_from_the_slot_lines_text_is_their_join(rules: dict[str, tuple[str, ...]], times: int,
                                                             then: bool) -> None:
    """The text made with the slot lines is what joining them gives, and a map registered from them more
    than once, or with more lines after them, is written from its lines, not from that text."""
    lines = HttpModel(weighted=list(rules.items())).map_entries(WEIGHTED_MAP) if rules else []
    want_lines = [f"{n}:{rid} {target}" for rid, targets in sorted(rules.items()) for n, target in enumerate(targets)]
    assert lines == want_lines
    if rules:
        assert type(lines) is helpers.PlainLines
        assert lines.text == ("\n".join(lines) + "\n" if lines else None)
    recorder = helpers.Recorder(base_lines=(), sources=SOURCES)
    for _ in range(times):
        recorder.register_map(WEIGHTED_MAP, lines, {"ordered": True})
    if then:
        recorder.register_map(WEIGHTED_MAP, ["1:z y"], {"ordered": True})
    written = recorder.map_files()[f"maps/{WEIGHTED_MAP}"]
    want = list(dict.fromkeys([*[line for _ in range(times) for line in lines], *(["1:z y"] if then else [])]))
    assert written == ("\n".join(want) + "\n" if want else "")
