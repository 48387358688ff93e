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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from validators.findings import PathPart

Path = tuple[PathPart, ...]
MAX_DEPTH = 128
_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True, slots=True)
class Structured:
    value: Any  # the pruned and defaulted copy
    unknown: tuple[Path, ...]  # paths of pruned unknown fields, in document order


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
