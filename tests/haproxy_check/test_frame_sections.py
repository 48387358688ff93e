"""The frame's text is found by sections that start a line: searching for them after each line break
gives what a multi-line ``^`` pattern tried at every position gives (differential, on drawn configs with
sections at the start, after blank lines, in comments and indented)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.runtime import frames

_OLD_SECTION = re.compile(r"^(global|defaults|frontend|backend|listen|userlist|peers|resolvers|cache|program|"
                          r"http-errors|ring|log-forward|mailers|crt-store|traces)\b[ \t]*(\S*)", re.MULTILINE)


def _outside_by_line_starts(config: str, backends: Iterable[str], profiles: Iterable[str]) -> str:
    """``frames.outside`` as it was: the sections found by the multi-line pattern."""
    owned = {("backend", b) for b in backends} | {("defaults", p) for p in profiles}
    kept: list[str] = []
    starts = [(m.start(), (m.group(1), m.group(2))) for m in _OLD_SECTION.finditer(config)]
    if not starts or starts[0][0] != 0:
        starts.insert(0, (0, ("", "")))
    for i, (start, key) in enumerate(starts):
        if key in owned:
            continue
        end = starts[i + 1][0] if i + 1 < len(starts) else len(config)
        for line in config[start:end].splitlines():
            text = line.strip()
            if text and not text.startswith("#"):
                kept.append(line.rstrip())
    return "\n".join(kept)


_NAMES = ["a", "b", "be_1"]
_LINES = st.one_of(
    st.builds(lambda kw, name: f"{kw} {name}", st.sampled_from(["backend", "defaults", "frontend", "global",
                                                                "listen", "backendx", "ring"]),
              st.sampled_from(["", *_NAMES])),
    st.sampled_from(["", "    mode http", "  # comment", "# backend a", "\tserver s1 1.2.3.4:80", " backend a",
                     "backend\ta", "backend", "\r", "x\x0by", "backend a \x1c", "  \u2028 backend b"]))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINES, max_size=25), ends=st.sampled_from(["\n", "\r\n", ""]),
       backends=st.lists(st.sampled_from(_NAMES), max_size=3), profiles=st.lists(st.sampled_from(_NAMES), max_size=2))
def test_frame_is_the_one_found_by_line_starts(lines: list[str], ends: str, backends: list[str],
                                               profiles: list[str]) -> None:
    config = "\n".join(lines) + ends
    reference = _outside_by_line_starts(config, backends, profiles)
    assert frames.outside(config, backends, profiles) == reference
    assert frames.digest(config, backends, profiles) == hashlib.sha256(reference.encode()).hexdigest()
