"""Which objects an admission policy selects: ``matchConstraints`` of a ValidatingAdmissionPolicy and
``matchResources`` of its binding, as the API server matches them
(k8s.io/apiserver/pkg/admission/plugin/policy/matching and .../webhook/predicates).

A request is matched by a rule when operation, API group, version, resource and scope all fit
(``*`` fits all; ``*/*`` also fits subresources, which routegate never reviews); with ``matchPolicy:
Equivalent`` (the default) a rule naming another version of the same group and resource fits too.
``namespaceSelector`` reads the labels of the object's namespace (of the object itself when it is a
Namespace; other cluster-scoped objects always fit), ``objectSelector`` the labels of the new or the
old object (either fits).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from validators.objects import as_list, as_map
from validators.views.attachments import Selector, selector_of

OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")


@dataclass(frozen=True, slots=True)
class Request:
    """What matching reads of one admission request."""

    operation: str
    group: str
    version: str
    resource: str  # plural
    namespaced: bool
    name: str
    versions: tuple[str, ...]  # every version the API server serves of this group and resource
    labels: Mapping[str, str]
    old_labels: Mapping[str, str] | None
    namespace_labels: Mapping[str, str] | None  # None: cluster-scoped


@dataclass(frozen=True, slots=True)
class Rule:
    operations: tuple[str, ...]
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str
    names: tuple[str, ...]

    def fits(self, req: Request, version: str) -> bool:
        if "*" not in self.operations and req.operation not in self.operations:
            return False
        if "*" not in self.groups and req.group not in self.groups:
            return False
        if "*" not in self.versions and version not in self.versions:
            return False
        if not any(r in ("*", "*/*", req.resource) for r in self.resources):
            return False
        if (self.scope == "Cluster" and req.namespaced) or (self.scope == "Namespaced" and not req.namespaced):
            return False
        return not self.names or req.name in self.names


@dataclass(frozen=True, slots=True)
class Match:
    rules: tuple[Rule, ...]
    excluded: tuple[Rule, ...]
    namespace_selector: Selector
    object_selector: Selector
    equivalent: bool
    constrains_resources: bool  # False: a binding's matchResources without resourceRules

    def selects(self, req: Request) -> bool:
        if self.constrains_resources and not self._fits(self.rules, req):
            return False
        if self._fits(self.excluded, req):
            return False
        if req.namespace_labels is not None and not self.namespace_selector.matches(req.namespace_labels):
            return False
        return (self.object_selector.matches(req.labels)
                or (req.old_labels is not None and self.object_selector.matches(req.old_labels)))

    def _fits(self, rules: Sequence[Rule], req: Request) -> bool:
        if any(rule.fits(req, req.version) for rule in rules):
            return True
        return self.equivalent and any(rule.fits(req, v) for rule in rules for v in req.versions)


class MatchError(ValueError):
    """A match block the API server would refuse; the message names the field."""


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MatchError(f"{field}: expected a list of strings, got {value!r}")
    return tuple(value)


def _rule(raw: Any, field: str) -> Rule:
    if not isinstance(raw, Mapping):
        raise MatchError(f"{field}: expected a mapping, got {raw!r}")
    operations = _strings(raw.get("operations"), f"{field}.operations")
    for op in operations:
        if op not in OPERATIONS:
            raise MatchError(f"{field}.operations: {op!r} is not one of {', '.join(OPERATIONS)}")
    scope = raw.get("scope", "*")
    if scope not in ("*", "Cluster", "Namespaced"):
        raise MatchError(f"{field}.scope: {scope!r} is not one of *, Cluster, Namespaced")
    return Rule(operations, _strings(raw.get("apiGroups"), f"{field}.apiGroups"),
                _strings(raw.get("apiVersions"), f"{field}.apiVersions"),
                _strings(raw.get("resources"), f"{field}.resources"), str(scope),
                _strings(raw.get("resourceNames"), f"{field}.resourceNames"))


def _selector(raw: Any, field: str) -> Selector:
    if raw is not None and not isinstance(raw, Mapping):
        raise MatchError(f"{field}: expected a label selector, got {raw!r}")
    for n, expr in enumerate(as_list(as_map(raw).get("matchExpressions"))):
        op = as_map(expr).get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise MatchError(f"{field}.matchExpressions[{n}].operator: {op!r} is not one of In, NotIn, Exists, "
                             "DoesNotExist")
    return selector_of(raw or {})


def parse(raw: Any, field: str, *, binding: bool = False) -> Match:
    """A policy's ``spec.matchConstraints`` (resourceRules required) or a binding's ``spec.matchResources``."""
    if not isinstance(raw, Mapping):
        raise MatchError(f"{field}: expected a mapping, got {raw!r}")
    rules = tuple(_rule(r, f"{field}.resourceRules[{n}]") for n, r in enumerate(as_list(raw.get("resourceRules"))))
    if not rules and not binding:
        raise MatchError(f"{field}.resourceRules: required (a policy without it matches nothing)")
    policy = raw.get("matchPolicy", "Equivalent")
    if policy not in ("Equivalent", "Exact"):
        raise MatchError(f"{field}.matchPolicy: {policy!r} is not one of Equivalent, Exact")
    return Match(
        rules,
        tuple(_rule(r, f"{field}.excludeResourceRules[{n}]")
              for n, r in enumerate(as_list(raw.get("excludeResourceRules")))),
        _selector(raw.get("namespaceSelector"), f"{field}.namespaceSelector"),
        _selector(raw.get("objectSelector"), f"{field}.objectSelector"),
        policy == "Equivalent", bool(rules))


EVERYTHING = Match((), (), Selector(), Selector(), True, False)
