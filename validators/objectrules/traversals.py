"""Walks over route objects that every rule shares: rules, matches and filters with their paths.

Each walker tolerates any shape (a missing or mistyped field yields nothing): the schema check reports
shape errors, rules only judge values that are there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from validators.findings import PathPart
from validators.objects import Obj, as_list, as_map

Path = tuple[PathPart, ...]

#: The field under a filter that holds its settings, per filter ``type``.
FILTER_FIELDS: Mapping[str, str] = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestRedirect": "requestRedirect",
    "URLRewrite": "urlRewrite",
    "RequestMirror": "requestMirror",
    "ExtensionRef": "extensionRef",
    "ExternalAuth": "externalAuth",
    "CORS": "cors",
}


@dataclass(frozen=True, slots=True)
class FilterAt:
    """One filter with where it sits: ``backend`` is the backendRefs index, None at rule level."""

    path: Path
    rule: int
    backend: int | None
    type: str
    body: Mapping[str, Any]  # the settings under the type's field ({} when absent)

    @property
    def body_path(self) -> Path:
        return (*self.path, FILTER_FIELDS.get(self.type, self.type))


def rules_of(obj: Obj) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    for i, rule in enumerate(as_list(as_map(obj.get("spec")).get("rules"))):
        if isinstance(rule, Mapping):
            yield ("spec", "rules", i), rule


def filters_of(obj: Obj) -> Iterator[FilterAt]:
    """Rule-level filters, then each backendRef's filters, in order."""
    for rule_path, rule in rules_of(obj):
        i = int(rule_path[-1])
        for k, flt in enumerate(as_list(rule.get("filters"))):
            if isinstance(flt, Mapping):
                yield _filter((*rule_path, "filters", k), i, None, flt)
        for j, ref in enumerate(as_list(rule.get("backendRefs"))):
            for k, flt in enumerate(as_list(as_map(ref).get("filters"))):
                if isinstance(flt, Mapping):
                    yield _filter((*rule_path, "backendRefs", j, "filters", k), i, j, flt)


def _filter(path: Path, rule: int, backend: int | None, flt: Mapping[str, Any]) -> FilterAt:
    ftype = flt.get("type")
    ftype = ftype if isinstance(ftype, str) else ""
    return FilterAt(path, rule, backend, ftype, as_map(flt.get(FILTER_FIELDS.get(ftype, ""))))


def matches_of(rule: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A rule's matches as the API server defaults them: no matches means one PathPrefix / match."""
    matches: list[Mapping[str, Any]] = [m for m in as_list(rule.get("matches")) if isinstance(m, Mapping)]
    return matches or [{"path": {"type": "PathPrefix", "value": "/"}}]


def path_type(match: Mapping[str, Any]) -> str:
    """The match's path type, PathPrefix when defaulted."""
    ptype = as_map(match.get("path")).get("type", "PathPrefix")
    return ptype if isinstance(ptype, str) else ""
