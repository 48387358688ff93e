"""The frame of a configuration: haproxy.cfg outside the sections Backend() describes.

Backend sections and their named ``defaults`` profiles are described record by record (servers, maps,
profiles), so the runtime planner compares those records. Everything else (global, frontends, their
rules, listeners) has no runtime form: when its text changes, only a reload applies it. The frame is
that text, comments and blank lines left out, and its digest is what a Description records.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# a section keyword at the start of a line (section bodies are indented)
_KEYWORDS = (r"(global|defaults|frontend|backend|listen|userlist|peers|resolvers|cache|program|"
             r"http-errors|ring|log-forward|mailers|crt-store|traces)\b[ \t]*(\S*)")
_SECTION = re.compile(r"^" + _KEYWORDS, re.MULTILINE)
# the same after a line break (``^`` of a multi-line pattern matches at the start and after each "\n"):
# a search led by a literal character, not a match tried at every position of the text
_NEXT_SECTION = re.compile(r"\n" + _KEYWORDS)


def section_starts(config: str) -> list[tuple[int, tuple[str, str]]]:
    """Where each section of ``config`` starts, with its (keyword, name); what comes before the first
    section keyword is a nameless section at 0."""
    first = _SECTION.match(config)
    starts = [(0, (first.group(1), first.group(2)) if first is not None else ("", ""))]
    starts += [(m.start() + 1, (m.group(1), m.group(2))) for m in _NEXT_SECTION.finditer(config)]
    return starts


def outside(config: str, backends: Iterable[str], profiles: Iterable[str]) -> str:
    """The frame's text: ``config`` without the named backend and profile sections."""
    owned = {("backend", b) for b in backends} | {("defaults", p) for p in profiles}
    kept: list[str] = []
    starts = section_starts(config)
    for i, (start, key) in enumerate(starts):
        if key in owned:
            continue
        end = starts[i + 1][0] if i + 1 < len(starts) else len(config)
        for line in config[start:end].splitlines():
            text = line.strip()
            if text and not text.startswith("#"):
                kept.append(line.rstrip())
    return "\n".join(kept)


def digest(config: str, backends: Iterable[str], profiles: Iterable[str]) -> str:
    return hashlib.sha256(outside(config, backends, profiles).encode()).hexdigest()
