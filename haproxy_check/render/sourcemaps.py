"""Source maps: which object field produced each line of rendered output.

Templates call ``origin(ref, path)`` which returns an invisible marker (two control characters around
an index). Control characters can never come from a user value (``escaping`` refuses them), so after
rendering every marker is found, stripped, and its line recorded. haproxy -c then reports FILE:LINE
and the gate traces it back to ``spec.rules[i]...`` of the object.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from haproxy_check.results import Origin
from validators.findings import PathPart
from validators.objects import Ref

_OPEN, _CLOSE = "\x1e", "\x1f"
_MARK = re.compile("\x1e(\\d+)\x1f")
# the last marker of a line (no other marker after it before the line ends): the line's origin
_LAST_MARK = re.compile("\x1e(\\d+)\x1f(?=(?:[^\n\x1e]|\x1e(?!\\d+\x1f))*(?:\n|\\Z))")
# the same where every \x1e opens a marker (always, unless a template wrote one): no lookahead per character
_LAST_MARK_PLAIN = re.compile("\x1e(\\d+)\x1f(?=[^\n\x1e]*(?:\n|\\Z))")


class Origins:
    """The marker of each origin: one number per distinct origin, kept for as long as the table lives.

    A table shared by many renders gives an origin the same marker in all of them, so text compiled
    in one render (an incremental render's cached route) carries valid markers into the next. Safe
    to share between threads: a new origin is numbered under a lock.
    """

    def __init__(self) -> None:
        self._origins: list[Origin] = []
        # keyed by (kind, namespace, name, path), not by Origin: a hit then costs a tuple, not a frozen
        # record and its hash
        self._index: dict[tuple[Any, ...], str] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._origins)

    def mark(self, ref: Ref | Origin | None, path: Iterable[PathPart] = ()) -> str:
        if ref is None:
            return ""
        parts: tuple[PathPart, ...]
        if isinstance(ref, Origin):
            parts, ref = ref.path, ref.ref
        else:
            parts = path if type(path) is tuple else tuple(path)
        # a plain Ref is keyed by its three strings: a tuple of strings hashes in C (their hashes kept),
        # a Ref in Python, and every marker of a render is looked up at least twice
        key = (ref.kind, ref.namespace, ref.name, parts) if type(ref) is Ref else (ref, parts)
        marker = self._index.get(key)
        if marker is None:
            with self._lock:
                marker = self._index.get(key)
                if marker is None:
                    marker = f"{_OPEN}{len(self._origins)}{_CLOSE}"
                    # before the index: a reader finds its number's origin
                    self._origins.append(Origin(ref, parts))
                    self._index[key] = marker
        return marker

    def __getitem__(self, number: int) -> Origin:
        return self._origins[number]

    def table(self) -> Sequence[Origin]:
        """The origins by number (only ever appended to: a number once given keeps its origin)."""
        return self._origins


class SourceMap:
    """Collects origins while templates render, then resolves them to (file, line)."""

    def __init__(self, origins: Origins | None = None) -> None:
        self._origins = origins if origins is not None else Origins()
        self.mark = self._origins.mark
        self.lines: dict[tuple[str, int], Origin] = {}
        self._pending: list[tuple[str, bytes]] = []
        self._counts: list[Counter[str]] = []  # per stripped file: its lines' last markers, first line first

    def strip_line(self, text: str) -> tuple[str, Origin | None]:
        """One line without markers, and its most specific (last) origin."""
        if _OPEN not in text:
            return text, None
        found = _MARK.findall(text)
        if not found:
            return text, None
        return _MARK.sub("", text), self._origins[int(found[-1])]

    def without_markers(self, text: str) -> str:
        """``strip_line(text)[0]``, in one pass (no origin looked for)."""
        return _MARK.sub("", text) if _OPEN in text else text

    def strip_lines(self, lines: list[str]) -> list[str]:
        """``strip_line(line)[0]`` of each line (none holds a line break), in one pass over them all."""
        joined = "\n".join(lines)
        if _OPEN not in joined:
            return lines
        return _MARK.sub("", joined).split("\n")

    def resolve(self, file: str, text: str) -> str:
        """Strip the markers of a whole file and record the origin of each marked line (its last marker)."""
        if _OPEN not in text:
            return text
        self.lines.update(_marked_lines(file, text, self._origins.table()))
        return _MARK.sub("", text)

    def strip(self, file: str, text: str, clean: str | None = None) -> str:
        """``resolve`` that leaves finding the lines' origins to ``origins()``, the first time they are read.
        The marked text waits compressed (a tenth of its size): results are kept, few are ever traced.
        ``clean``: ``text`` without its markers when the caller has it already (``_MARK.sub("", text)``)."""
        if _OPEN not in text:
            return text
        self._pending.append((file, zlib.compress(text.encode(), 1)))
        if clean is None:
            clean = _MARK.sub("", text)
        # an \x1e left after the markers went is one that opens none
        last = _LAST_MARK if _OPEN in clean else _LAST_MARK_PLAIN
        self._counts.append(Counter(last.findall(text)))
        return clean

    def line_counts(self) -> Counter[Origin]:
        """How many lines each origin marks (as ``origins()`` would map them: a line's last marker), in the
        order of each origin's first line; without working out which lines those are."""
        files = [file for file, _ in self._pending]
        if len(set(files)) != len(files) or any(key[0] in files for key in self.lines):
            return Counter(self.origins().values())  # a file stripped twice: the later text's lines count
        counts: Counter[Origin] = Counter(self.lines.values())
        table = self._origins.table()
        for per_file in self._counts:
            for number, n in per_file.items():
                counts[table[int(number)]] += n
        return counts

    def line_pairs(self) -> list[tuple[Origin, int]]:
        """``list(line_counts().items())``, added up by marker number and not by origin: an origin's hash is
        two records' (in Python), and a large render has one origin per rule, match and filter."""
        files = [file for file, _ in self._pending]
        if self.lines or len(set(files)) != len(files):
            return list(self.line_counts().items())
        merged: dict[str, int] = {}
        for per_file in self._counts:
            for number, n in per_file.items():
                merged[number] = merged.get(number, 0) + n
        table = self._origins.table()  # one number per distinct origin: the same order, the same sums
        return [(table[int(number)], n) for number, n in merged.items()]

    def origins(self) -> Mapping[tuple[str, int], Origin]:
        """The lines' origins: those ``resolve`` recorded, and those of the files ``strip`` took, found when
        first read (most renders are never traced back: their config was valid)."""
        return LazyOrigins(dict(self.lines), tuple(self._pending), self._origins.table())


def _marked_lines(file: str, text: str, table: Sequence[Origin]) -> Iterator[tuple[tuple[str, int], Origin]]:
    number, at = 1, 0
    for found in _MARK.finditer(text):
        start = found.start()
        number += text.count("\n", at, start)
        at = start
        yield (file, number), table[int(found.group(1))]


class LazyOrigins(Mapping[tuple[str, int], Origin]):
    """(file, line) -> Origin, worked out from the (compressed) marked texts on first use. Holds only plain
    values, so it pickles; two threads reading it at once at worst both work it out."""

    def __init__(self, known: dict[tuple[str, int], Origin], texts: tuple[tuple[str, bytes], ...],
                 table: Sequence[Origin]) -> None:
        self._known, self._texts, self._table = known, texts, table
        self._all: dict[tuple[str, int], Origin] | None = None if texts else known

    def _lines(self) -> dict[tuple[str, int], Origin]:
        found = self._all
        if found is None:
            found = dict(self._known)
            for file, packed in self._texts:
                found.update(_marked_lines(file, zlib.decompress(packed).decode(), self._table))
            self._all, self._texts = found, ()
        return found

    def __getitem__(self, key: tuple[str, int]) -> Origin:
        return self._lines()[key]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._lines())

    def __len__(self) -> int:
        return len(self._lines())

    def __repr__(self) -> str:
        return repr(self._lines())
