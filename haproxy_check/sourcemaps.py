"""Source maps: which object field produced each line of rendered output.

Templates call ``origin(ref, path)`` which returns an invisible marker (two control characters around
an index). Control characters can never come from a user value (``escaping`` refuses them), so after
rendering every marker is found, stripped, and its line recorded. haproxy -c then reports FILE:LINE
and the gate traces it back to ``spec.rules[i]...`` of the object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from haproxy_check.results import Origin
from validators.findings import PathPart
from validators.objects import Ref

_OPEN, _CLOSE = "\x1e", "\x1f"
_MARK = re.compile("\x1e(\\d+)\x1f")


class SourceMap:
    """Collects origins while templates render, then resolves them to (file, line)."""

    def __init__(self) -> None:
        self._origins: list[Origin] = []
        self._index: dict[Origin, int] = {}
        self.lines: dict[tuple[str, int], Origin] = {}

    def mark(self, ref: Ref | Origin | None, path: Iterable[PathPart] = ()) -> str:
        if ref is None:
            return ""
        origin = ref if isinstance(ref, Origin) else Origin(ref, tuple(path))
        idx = self._index.get(origin)
        if idx is None:
            idx = self._index[origin] = len(self._origins)
            self._origins.append(origin)
        return f"{_OPEN}{idx}{_CLOSE}"

    def strip_line(self, text: str) -> tuple[str, Origin | None]:
        """One line without markers, and its most specific (last) origin."""
        if _OPEN not in text:
            return text, None
        found = _MARK.findall(text)
        if not found:
            return text, None
        return _MARK.sub("", text), self._origins[int(found[-1])]

    def resolve(self, file: str, text: str) -> str:
        """Strip the markers of a whole file and record the origin of each marked line."""
        if _OPEN not in text:
            return text
        out: list[str] = []
        for number, line in enumerate(text.split("\n"), start=1):
            clean, origin = self.strip_line(line)
            if origin is not None:
                self.lines[(file, number)] = origin
            out.append(clean)
        return "\n".join(out)
