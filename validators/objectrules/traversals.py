"""Walks over route objects that every rule shares: rules, matches and filters with their paths.

Each walker tolerates any shape (a missing or mistyped field yields nothing): the schema check reports
shape errors, rules only judge values that are there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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


class _Walks(threading.local):
    subject: Obj | None = None  # the object of the rules.run under way in this thread, if any
    walked: dict[str, tuple[Any, ...]] | None = None


_walks = _Walks()


@contextmanager
def walking(obj: Obj) -> Iterator[None]:
    """While the rules of one object run (``validators.rules.run``), each walk of it is made once and
    shared by every rule (a dozen rules read the same rules and filters); outside, every call walks."""
    saved = (_walks.subject, _walks.walked)
    _walks.subject, _walks.walked = obj, {}
    try:
        yield
    finally:
        _walks.subject, _walks.walked = saved


def _shared(obj: Obj, name: str, walk: Callable[[Obj], Iterator[Any]]) -> Iterator[Any]:
    walked = _walks.walked
    if walked is None or _walks.subject is not obj:
        return walk(obj)
    got = walked.get(name)
    if got is None:
        got = walked[name] = tuple(walk(obj))
    return iter(got)


def rules_of(obj: Obj) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    return _shared(obj, "rules", _rules_of)


def _rules_of(obj: Obj) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    for i, rule in enumerate(as_list(as_map(obj.get("spec")).get("rules"))):
        if isinstance(rule, Mapping):
            yield ("spec", "rules", i), rule


def filters_of(obj: Obj) -> Iterator[FilterAt]:
    """Rule-level filters, then each backendRef's filters, in order."""
    return _shared(obj, "filters", _filters_of)


def _filters_of(obj: Obj) -> Iterator[FilterAt]:
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
