"""The frame's text is found by sections that start a line: searching for them after each line break
gives what a multi-line ``^`` pattern tried at every position gives (differential, on drawn configs with
sections at the start, after blank lines, in comments and indented)."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.runtime import frames

_OLD_SECTION = re.compile(r"^(global|defaults|frontend|backend|listen|userlist|peers|resolvers|cache|program|"
                          r"http-errors|ring|log-forward|mailers|crt-store|traces)\b[ \t]*(\S*)", re.MULTILINE)


def _starts_by_line_starts(config: str) -> list[tuple[int, tuple[str, str]]]:
    """``frames.section_starts`` as it was: the sections found by the multi-line pattern."""
    starts = [(m.start(), (m.group(1), m.group(2))) for m in _OLD_SECTION.finditer(config)]
    if not starts or starts[0][0] != 0:
        starts.insert(0, (0, ("", "")))
    return starts


_NAMES = ["a", "b", "be_1"]
_LINES = st.one_of(
    st.builds(lambda kw, name: f"{kw} {name}", st.sampled_from(["backend", "defaults", "frontend", "global",
                                                                "listen", "backendx", "ring"]),
              st.sampled_from(["", *_NAMES])),
    st.sampled_from(["", "    mode http", "  # comment", "# backend a", "\tserver s1 1.2.3.4:80", " backend a",
                     "backend\ta", "backend", "\r", "x\x0by", "backend a \x1c", "  \u2028 backend b"]))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINES, max_size=25), ends=st.sampled_from(["\n", "\r\n", ""]))
def test_sections_are_the_ones_found_by_line_starts(lines: list[str], ends: str) -> None:
    config = "\n".join(lines) + ends
    assert frames.section_starts(config) == _starts_by_line_starts(config)


def test_the_frame_leaves_out_the_named_sections_comments_and_blank_lines() -> None:
    config = ("global\n    maxconn 10\n# note\nbackend a\n    server s 1.2.3.4:80\n\ndefaults p\n    mode http\n"
              "frontend f\n    bind :80\n")
    assert frames.outside(config, ["a"], ["p"]) == "global\n    maxconn 10\nfrontend f\n    bind :80"
    frame = frames.outside(config, ["a"], ["p"])
    assert frames.digest(config, ["a"], ["p"]) == hashlib.sha256(frame.encode()).hexdigest()
