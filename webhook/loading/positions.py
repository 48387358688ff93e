"""Where a finding's field is in its file: ``file:line:column`` of the offending field, not of the
object's first line, so that editors and CI annotations point at the right place.

Loading keeps no node tree (memory would grow with every input object). Only a file that has a
finding to place is composed again, once, with libyaml's C composer, which keeps every node's mark;
a field path is then followed down the document's nodes. A path that leaves the document (a
defaulted field, a finding about the whole list) stops at the deepest node that exists. A JSON file
is not composed: its members' offsets are found with json's decoder (``_JsonText``), giving the
same line and column.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence

import yaml

from webhook.loading import jsonmembers
from webhook.loading.inputs import Located

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_WHITESPACE = re.compile(r"[ \t\n]*")
_LINE_BREAKS = ("\r", "\x85", "\u2028", "\u2029")  # YAML counts these as lines too


class _JsonText:
    """Field positions in a JSON file without composing it (a 10,000-route JSON List composed as YAML
    costs more than the whole check): each container's members are found once, by skipping over
    their values with json's C decoder, and their offsets remembered. Only ASCII text with "\n" line
    breaks, where an offset's line and column are exactly what the YAML composer's marks say."""

    def __init__(self, text: str, known: Mapping[int, jsonmembers.Members] | None = None) -> None:
        self.text = text
        self._members: dict[int, jsonmembers.Members] = dict(known or {})  # found while the file was loaded
        self._lines = [0, *(m.end() for m in re.finditer("\n", text))]

    @staticmethod
    def usable(text: str) -> bool:
        return text.lstrip()[:1] in ("{", "[") and text.isascii() and not any(b in text for b in _LINE_BREAKS)

    def root(self) -> int:
        return _WHITESPACE.match(self.text).end()  # type: ignore[union-attr]

    def members(self, at: int) -> jsonmembers.Members:
        """An object's keys -> (key offset, value offset), first occurrence; an array's element offsets;
        None for a scalar."""
        if at not in self._members:
            self._members[at] = jsonmembers.read(self.text, at)
        return self._members[at]

    def mark(self, at: int) -> tuple[int, int]:
        """(line, column), 0-based, of an offset."""
        line = bisect.bisect_right(self._lines, at) - 1
        return line, at - self._lines[line]

    def follow(self, at: int, mark: int, path: Sequence[str | int], *, partial: bool = False,
               ) -> tuple[int, int] | None:
        """``_follow`` over offsets: (value offset, offset to point at)."""
        for part in path:
            members = self.members(at)
            child: tuple[int, int] | None = None
            if isinstance(members, dict) and isinstance(part, str) and part in members:
                key, value = members[part]
                child = value, key if self.mark(value)[0] != self.mark(key)[0] else value
            elif isinstance(members, list) and isinstance(part, int) and 0 <= part < len(members):
                child = members[part], members[part]
            if child is None:
                return (at, mark) if partial else None
            at, mark = child
        return at, mark


class Positions:
    def __init__(self, texts: Mapping[str, str],
                 members: Mapping[str, Mapping[int, jsonmembers.Members]] | None = None) -> None:
        """``members``: per file, JSON members already found (``inputs.Loaded.members``)."""
        self._texts = texts
        self._known = members or {}
        self._documents: dict[str, list[yaml.Node]] = {}
        self._json: dict[str, _JsonText | None] = {}

    def _json_text(self, file: str) -> _JsonText | None:
        if file not in self._json:
            text = self._texts.get(file)
            usable = text is not None and _JsonText.usable(text)
            self._json[file] = _JsonText(text, self._known.get(file)) if text is not None and usable else None
        return self._json[file]

    def _of_json(self, found: _JsonText, item: Located, path: Sequence[str | int]) -> tuple[int, int] | None:
        try:
            root = found.root()
            start = found.follow(root, root, item.prefix)
            if start is None:
                return item.line, item.column
            got = found.follow(*start, path, partial=True)
            line, column = found.mark(got[1] if got is not None else start[1])
        except (ValueError, IndexError):  # not JSON after all (YAML flow style): compose it
            return None
        return line + 1, column + 1

    def _document(self, file: str, index: int) -> yaml.Node | None:
        if file not in self._documents:
            text = self._texts.get(file)
            nodes: list[yaml.Node] = []
            if text is not None:
                try:
                    nodes = [n for n in yaml.compose_all(text, Loader=_Base) if n is not None]
                except yaml.YAMLError:  # reported by the loader already; positions fall back
                    nodes = []
            self._documents[file] = nodes
        nodes = self._documents[file]
        return nodes[index] if 0 <= index < len(nodes) else None

    def of(self, item: Located, path: Sequence[str | int] = ()) -> tuple[int, int]:
        """(line, column), 1-based, of ``path`` inside ``item``'s object; the object's own position
        when the file cannot be composed again."""
        json_text = self._json_text(item.file) if item.doc == 0 else None
        if json_text is not None and (got := self._of_json(json_text, item, path)) is not None:
            return got
        node = self._document(item.file, item.doc)
        if node is None:
            return item.line, item.column
        start = _follow(node, node.start_mark, item.prefix)
        if start is None:
            return item.line, item.column
        found = _follow(*start, path, partial=True)
        mark = found[1] if found is not None else start[1]
        return mark.line + 1, mark.column + 1


def _follow(node: yaml.Node, mark: yaml.Mark, path: Sequence[str | int], *,
            partial: bool = False) -> tuple[yaml.Node, yaml.Mark] | None:
    """The node at ``path`` and where to point for it: a scalar at its value, a block collection at
    its key (the line that names it)."""
    for part in path:
        child: tuple[yaml.Node, yaml.Mark] | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    at = key.start_mark if value.start_mark.line != key.start_mark.line else value.start_mark
                    child = value, at
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part], node.value[part].start_mark
        if child is None:
            return (node, mark) if partial else None
        node, mark = child
    return node, mark
