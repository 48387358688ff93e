"""What the API server does to a custom object before it validates it: prune and default.

Implements the structural-schema algorithms of apiextensions-apiserver in one pass:

* unknown fields (not in ``properties``, no ``additionalProperties`` schema, no
  ``x-kubernetes-preserve-unknown-fields``) are pruned and reported, since a forged review or an offline
  file may carry them and the stored object will not;
* a ``null`` in a non-``nullable`` field is replaced by its default or pruned;
* a missing field with a ``default`` gets a deep copy of it, and defaulting continues inside it.

``metadata`` at the root (and in ``x-kubernetes-embedded-resource`` objects) is ObjectMeta, which the
API server handles separately, so it is copied unchanged. The input is never mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from validators.findings import PathPart

Path = tuple[PathPart, ...]
MAX_DEPTH = 128
_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")


UNCOUNTED = -1


@dataclass(frozen=True, slots=True)
class Structured:
    value: Any  # the pruned and defaulted copy
    unknown: tuple[Path, ...]  # paths of pruned unknown fields, in document order
    # the compiled form's count of ``value``'s nodes, as ``celprograms.plain_size(value, ...)`` counts
    # them, or None where plain_size says None (not plain JSON the CEL engine takes as it is, or nested
    # too deeply); UNCOUNTED from the reference form. Not part of the value's equality.
    plain_nodes: int | None = field(default=UNCOUNTED, compare=False)


def apply(obj: Any, schema: Mapping[str, Any]) -> Structured:
    unknown: list[Path] = []
    value = _walk(obj, schema, (), unknown, resource=True)
    return Structured(value, tuple(unknown))


def _walk(
    value: Any, schema: Mapping[str, Any], path: Path, unknown: list[Path], *, resource: bool = False
) -> Any:
    if len(path) > MAX_DEPTH:
        return copy.deepcopy(value)
    if isinstance(value, Mapping):
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        return _object(value, schema, path, unknown, resource or embedded)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_walk(v, items, (*path, i), unknown) for i, v in enumerate(value)]
        return copy.deepcopy(value)
    return value


def _object(value: Mapping[str, Any], schema: Mapping[str, Any], path: Path, unknown: list[Path],
            resource: bool) -> dict[str, Any]:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    extra = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True or extra is True
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = props.get(key) if key in props else extra if isinstance(extra, Mapping) else None
        if resource and key in _RESOURCE_FIELDS and (key == "metadata" or sub is None):
            out[key] = copy.deepcopy(item)
            continue
        if not isinstance(sub, Mapping):
            if preserve:
                out[key] = copy.deepcopy(item)
            else:
                unknown.append((*path, key))
            continue
        if item is None and sub.get("nullable") is not True:
            if "default" in sub:
                out[key] = _walk(copy.deepcopy(sub["default"]), sub, (*path, key), unknown)
            continue  # a non-nullable null is pruned
        out[key] = _walk(item, sub, (*path, key), unknown)
    for key, sub in props.items():
        if key not in value and isinstance(sub, Mapping) and "default" in sub and sub["default"] is not None:
            out[key] = _walk(copy.deepcopy(sub["default"]), sub, (*path, key), unknown)
    return out


# ---------------------------------------------------------------------------------- compiled form
#
# The same algorithm with each schema node's facts (its properties, defaults, nullable flags,
# preserve-unknown-fields) looked up once per schema instead of once per value, exact-type dispatch
# instead of ``isinstance(value, Mapping)`` (an ABC check, most of apply's time), and plain-JSON copies
# instead of ``copy.deepcopy``. Anything that is not a plain JSON value (a non-dict Mapping, a tuple,
# ...) is handed to the reference :func:`_walk` above, so the output is always the same as
# :func:`apply`'s (tests/validators/test_structural_compiled.py compares them).

_SCALARS = (str, int, float, bool, type(None))
CEL_DEPTH = 64  # celprograms.MAX_DEPTH: a member deeper than this is not plain for CEL
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def _odd(text: str) -> bool:
    """A non-ASCII string that is not valid UTF-8 (a lone surrogate): the CEL engine cannot take it."""
    try:
        text.encode("utf-8")
    except UnicodeError:
        return True
    return False


def _tally_scalar(value: Any, tally: list[int]) -> None:
    kind = type(value)
    if (kind is str and not value.isascii() and _odd(value)) or (kind is int and not _INT_MIN <= value <= _INT_MAX):
        tally[1] = 1


def _counted_copy(value: Any, depth: int, tally: list[int]) -> Any:
    """``_copy`` that counts the copy's members into ``tally`` (``depth``: that of ``value``)."""
    kind = type(value)
    if kind is dict:
        if depth + 1 >= CEL_DEPTH:
            tally[1] = 1
        tally[0] += len(value)
        out = {}
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and _odd(key)):
                tally[1] = 1
            out[key] = _counted_copy(item, depth + 1, tally)
        return out
    if kind is list:
        if depth + 1 >= CEL_DEPTH:
            tally[1] = 1
        tally[0] += len(value)
        return [_counted_copy(item, depth + 1, tally) for item in value]
    if kind in _SCALARS:
        _tally_scalar(value, tally)
        return value
    tally[1] = 1
    return copy.deepcopy(value)


def _copy(value: Any) -> Any:
    """``copy.deepcopy`` for plain JSON values (same result, a fraction of the time)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


class _Field:
    """What one declared property (or the additionalProperties schema) means for a value under it."""

    __slots__ = ("default", "has_default", "missing_schema", "nullable", "shape")

    def __init__(self, sub: Any) -> None:
        self.missing_schema = sub is None  # a null subschema (or no additionalProperties schema)
        self.shape = _Shape(sub) if isinstance(sub, Mapping) else None
        self.nullable = isinstance(sub, Mapping) and sub.get("nullable") is True
        self.has_default = isinstance(sub, Mapping) and "default" in sub
        self.default = sub["default"] if self.has_default else None


class _Shape:
    """One schema node, compiled on first use (so a self-referencing schema terminates)."""

    __slots__ = ("defaults", "embedded", "extra", "fields", "filled", "items", "preserve", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.filled = False

    def _fill(self) -> None:
        schema = self.schema
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        extra = schema.get("additionalProperties")
        self.fields = {key: _Field(sub) for key, sub in props.items()}
        self.extra = _Field(extra if isinstance(extra, Mapping) else None)
        self.preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True or extra is True
        self.embedded = schema.get("x-kubernetes-embedded-resource") is True
        items = schema.get("items")
        self.items = _Shape(items) if isinstance(items, Mapping) else None
        self.defaults = tuple(
            (key, field.shape, field.default) for key, field in self.fields.items()
            if field.shape is not None and field.has_default and field.default is not None)
        self.filled = True

    def walk(self, value: Any, path: Path, unknown: list[Path], tally: list[int], resource: bool = False) -> Any:
        """``tally``: [members counted so far, 1 once anything is not plain] (see Structured.plain_nodes)."""
        if not self.filled:
            self._fill()
        kind = type(value)
        if kind is dict:
            if len(path) > MAX_DEPTH:
                return _counted_copy(value, len(path), tally)
            return self._object(value, path, unknown, tally, resource or self.embedded)
        if kind is list:
            if len(path) > MAX_DEPTH:
                return _counted_copy(value, len(path), tally)
            items = self.items
            if items is None:
                return _counted_copy(value, len(path), tally)
            if len(path) + 1 >= CEL_DEPTH:
                tally[1] = 1
            tally[0] += len(value)
            out = []
            for i, v in enumerate(value):
                sub = type(v)
                if sub is str:
                    if not v.isascii() and _odd(v):
                        tally[1] = 1
                    out.append(v)
                elif sub in _SCALARS:
                    if sub is int and not _INT_MIN <= v <= _INT_MAX:
                        tally[1] = 1
                    out.append(v)
                else:
                    out.append(items.walk(v, (*path, i), unknown, tally))
            return out
        if kind in _SCALARS:
            _tally_scalar(value, tally)
            return value  # deepcopy of an immutable scalar is the scalar itself
        # not plain JSON on the way in: the reference walk, and its (plain or not) output counted
        return _counted_copy(_walk(value, self.schema, path, unknown, resource=resource), len(path), tally)

    def _object(self, value: dict[Any, Any], path: Path, unknown: list[Path], tally: list[int],
                resource: bool) -> dict[str, Any]:
        fields, extra = self.fields, self.extra
        depth = len(path) + 1  # that of the members
        if depth >= CEL_DEPTH:
            tally[1] = 1
        out: dict[str, Any] = {}
        for key, item in value.items():
            field = fields.get(key, extra)
            if type(key) is not str or (field is extra and not key.isascii() and _odd(key)):
                tally[1] = 1  # declared names are the schema's; any other key may be anything
            if resource and key in _RESOURCE_FIELDS and (key == "metadata" or field.missing_schema):
                out[key] = _counted_copy(item, depth, tally)
                continue
            shape = field.shape
            if shape is None:
                if self.preserve:
                    out[key] = _counted_copy(item, depth, tally)
                else:
                    unknown.append((*path, key))
                continue
            if item is None and not field.nullable:
                if field.has_default:
                    out[key] = shape.walk(_copy(field.default), (*path, key), unknown, tally)
                continue  # a non-nullable null is pruned
            kind = type(item)
            if kind is str:
                if not item.isascii() and _odd(item):
                    tally[1] = 1
                out[key] = item
            elif kind in _SCALARS:
                if kind is int and not _INT_MIN <= item <= _INT_MAX:
                    tally[1] = 1
                out[key] = item
            else:
                out[key] = shape.walk(item, (*path, key), unknown, tally)
        for key, default_shape, default in self.defaults:
            if key not in value:
                out[key] = default_shape.walk(_copy(default), (*path, key), unknown, tally)
        tally[0] += len(out)
        return out


def compile_apply(schema: Mapping[str, Any]) -> Callable[[Any], Structured]:
    """:func:`apply` for one schema, compiled once: ``compile_apply(schema)(obj) == apply(obj, schema)``."""
    root = _Shape(schema)

    def shaped(obj: Any) -> Structured:
        unknown: list[Path] = []
        tally = [1, 0]  # the root, and nothing odd yet
        value = root.walk(obj, (), unknown, tally, resource=True)
        return Structured(value, tuple(unknown), None if tally[1] else tally[0])

    return shaped
