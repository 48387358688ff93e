"""YAML to Python objects, faster than PyYAML's own constructor and equal to it.

libyaml (``yaml.CSafeLoader``) parses and composes in C, but resolving every scalar's tag and
constructing every node runs in Python, one method call after another: for a 10,000-route state that
is most of the start-up time. :class:`FastSafeLoader` keeps libyaml and PyYAML's safe semantics and
only takes shorter paths for what manifests are made of: tags are resolved once per distinct plain
scalar, and str/int/float/bool/null scalars, sequences and mappings with scalar keys are built in
one recursive function. Anything else (merge keys, timestamps, binary, sets, explicit tags) goes
through PyYAML's constructor, so the result is what ``yaml.load(..., Loader=CSafeLoader)`` returns
(a differential test holds it to that).
"""

from __future__ import annotations

from typing import Any

import yaml

Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

STR, MAP, SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_SCALARS = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
            "tag:yaml.org,2002:float")
_MERGE = "tag:yaml.org,2002:merge"
_RESOLVED_CACHE = 65536  # distinct plain scalars remembered per loader (keys, ports, names repeat)


class AliasRefused(yaml.constructor.ConstructorError):
    pass


class TooDeep(yaml.constructor.ConstructorError):
    pass


class FastSafeLoader(Base):  # type: ignore[misc]
    refuse_aliases = False
    max_depth = 100  # Kubernetes objects nest ~20 levels; what reads them later walks them recursively

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._resolved: dict[tuple[str, bool], str] = {}
        self._seen: set[int] = set()
        self._scalar_constructors = {tag: self.yaml_constructors[tag] for tag in _SCALARS}
        self.used_slow_path = False  # PyYAML's constructor built part of the last document (depth unchecked)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode:
            key = (value, implicit[0])
            tag = self._resolved.get(key)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(self._resolved) < _RESOLVED_CACHE:
                    self._resolved[key] = tag
            return tag
        return super().resolve(kind, value, implicit)

    def construct_document(self, node: yaml.Node) -> Any:
        self.used_slow_path = False
        try:
            return self._build(node, 1)
        finally:
            self._seen.clear()
            self.constructed_objects.clear()
            self.recursive_objects.clear()

    def _refuse(self, node: yaml.Node) -> None:
        raise AliasRefused(None, None, "YAML aliases (*name, <<: *name) are not accepted (they can expand "
                           "without bound): write the value out", node.start_mark)

    def _build(self, node: yaml.Node, depth: int) -> Any:
        if depth > self.max_depth:
            raise TooDeep(None, None, f"nesting deeper than {self.max_depth} levels", node.start_mark)
        if self.refuse_aliases:
            if id(node) in self._seen:
                self._refuse(node)
            self._seen.add(id(node))
        tag = node.tag
        if tag == STR and isinstance(node, yaml.ScalarNode):
            return node.value
        if tag == MAP and isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key, value in node.value:
                if key.tag != STR or not isinstance(key, yaml.ScalarNode):
                    return self._slow(node)  # merge keys, non-string keys: PyYAML's rules
                out[key.value] = self._build(value, depth + 1)
            return out
        if tag == SEQ and isinstance(node, yaml.SequenceNode):
            return [self._build(child, depth + 1) for child in node.value]
        if isinstance(node, yaml.ScalarNode) and tag in self._scalar_constructors:
            return self._scalar_constructors[tag](self, node)
        return self._slow(node)

    def _slow(self, node: yaml.Node) -> Any:
        self.used_slow_path = True
        if self.refuse_aliases:
            self._seen.discard(id(node))
            return _NoAliasConstructor.construct(self, node)
        return self.construct_object(node, deep=True)


class _NoAliasConstructor:
    """PyYAML's constructor for the rare node the fast path leaves to it, still refusing aliases."""

    @staticmethod
    def construct(loader: FastSafeLoader, node: yaml.Node) -> Any:
        original = loader.construct_object

        def once(child: yaml.Node, deep: bool = False) -> Any:
            # a node the fast path built, or this constructor built, seen again: an alias (or a merge)
            if child in loader.constructed_objects or (child is not node and id(child) in loader._seen):
                loader._refuse(child)
            loader._seen.add(id(child))
            return original(child, deep)

        loader.construct_object = once
        try:
            return original(node, deep=True)
        finally:
            loader.construct_object = original


class NoAliasLoader(FastSafeLoader):
    refuse_aliases = True
