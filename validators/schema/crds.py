"""CRD schemas indexed by (group, version, kind): what the schema check validates against.

A :class:`SchemaSet` is an immutable value built from CustomResourceDefinition documents, whether they
came from ``--crds`` files or from a cluster watch; a new set replaces the old one whole, so a check
never sees half of an update. Only served versions count: the API server rejects the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from validators.objects import as_list, as_map
from validators.schema.schemaformats import pattern_problem

SchemaKey = tuple[str, str, str]  # (group, version, kind)


@dataclass(frozen=True, slots=True)
class SchemaSet:
    """openAPIV3Schema per (group, version, kind), plus which kinds have any schema at all."""

    schemas: Mapping[SchemaKey, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_documents(cls, docs: Iterable[Any]) -> SchemaSet:
        """Index every served version of every CRD in ``docs``; other documents are ignored.

        Later documents win for the same key, so a cluster's live CRDs can be layered over files.
        """
        out: dict[SchemaKey, Mapping[str, Any]] = {}
        for doc in docs:
            for key, schema in _versions(doc):
                out[key] = schema
        return cls(out)

    def get(self, group: str, version: str, kind: str) -> Mapping[str, Any] | None:
        return self.schemas.get((group, version, kind))

    def kinds(self) -> list[str]:
        return sorted({kind for _, _, kind in self.schemas})

    def __iter__(self) -> Iterator[SchemaKey]:
        return iter(sorted(self.schemas))

    def __len__(self) -> int:
        return len(self.schemas)


def _versions(doc: Any) -> Iterator[tuple[SchemaKey, Mapping[str, Any]]]:
    if isinstance(doc, Mapping) and doc.get("kind") in ("List", "CustomResourceDefinitionList"):
        for item in as_list(doc.get("items")):  # `kubectl get crd -o yaml` output
            yield from _versions(item)
        return
    if not isinstance(doc, Mapping) or doc.get("kind") != "CustomResourceDefinition":
        return
    spec = as_map(doc.get("spec"))
    group = spec.get("group")
    kind = as_map(spec.get("names")).get("kind")
    if not isinstance(group, str) or not isinstance(kind, str):
        return
    shared = as_map(as_map(spec.get("validation")).get("openAPIV3Schema"))  # apiextensions v1beta1
    for version in as_list(spec.get("versions")):
        version = as_map(version)
        name = version.get("name")
        if not isinstance(name, str) or version.get("served") is False:
            continue
        schema = as_map(as_map(version.get("schema")).get("openAPIV3Schema")) or shared
        if schema:
            yield (group, name, kind), schema


def pattern_problems(docs: Iterable[Any]) -> list[str]:
    """One line per ``pattern`` of the served CRD versions in ``docs`` that RE2 cannot compile: the API
    server (Go's regexp, RE2 syntax) refuses such a CRD, and routegate never falls back to a
    backtracking engine for it. ``--crds`` files with one are refused at load."""
    found: list[str] = []
    for doc in docs:
        name = as_map(as_map(doc).get("metadata")).get("name", "?")
        for (_, version, _), schema in _versions(doc):
            for where, text in _patterns(schema, ""):
                problem = pattern_problem(text)
                if problem:
                    found.append(f"CustomResourceDefinition {name} {version}: {where or '(root)'}: pattern "
                                 f"{text!r} is not valid RE2 syntax ({problem})")
    return found


def _patterns(schema: Any, at: str) -> Iterator[tuple[str, str]]:
    if not isinstance(schema, Mapping):
        return
    if isinstance(schema.get("pattern"), str):
        yield at, schema["pattern"]
    for key, sub in as_map(schema.get("properties")).items():
        yield from _patterns(sub, f"{at}.{key}" if at else str(key))
    yield from _patterns(schema.get("items"), f"{at}[*]")
    yield from _patterns(schema.get("additionalProperties"), f"{at}[*]")
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in as_list(schema.get(key)):
            yield from _patterns(sub, at)
    yield from _patterns(schema.get("not"), at)
