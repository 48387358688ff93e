"""Where a finding's field is in its file: ``file:line:column`` of the offending field, not of the
object's first line, so that editors and CI annotations point at the right place.

Loading keeps no node tree (memory would grow with every input object). Only a file that has a
finding to place is composed again, once, with libyaml's C composer, which keeps every node's mark;
a field path is then followed down the document's nodes. A path that leaves the document (a
defaulted field, a finding about the whole list) stops at the deepest node that exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from webhook.inputs import Located

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Positions:
    def __init__(self, texts: Mapping[str, str]) -> None:
        self._texts = texts
        self._documents: dict[str, list[yaml.Node]] = {}

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
