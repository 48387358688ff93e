"""The validators' entry point for the Gate: one change in, ordered findings (and the defaulted object) out.

Order follows the API server and then the data plane: schema (prune, default, OpenAPI, CEL) on the
object as sent, the HAProxy rules on the defaulted object, cross-object findings on the proposed state
(the base state with the defaulted object overlaid), then enforcement. Every stage is guarded: a bug in
one check becomes a warning finding (the gate cannot decide that part), never an exception, and never
a silent pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from validators import budgets, codes, rules
from validators.changes import Change, Operation
from validators.contexts import Context
from validators.crossobject import addressmoves, crossobjects, httpstakeovers
from validators.enforcement import Enforcement
from validators.findings import Finding, Severity, ordered
from validators.objects import Obj, group_of, kind_of, namespace_of
from validators.podranges import PodRange
from validators.schema import schemas
from validators.schema.crds import SchemaSet
from validators.states import Overlay, State


@dataclass(frozen=True, slots=True)
class Result:
    findings: list[Finding]  # enforced and ordered (most specific first)
    defaulted: Obj | None  # the object as the API server stores it; None on DELETE


def version_of(obj: Obj) -> str:
    api_version = obj.get("apiVersion")
    return api_version.rsplit("/", 1)[-1] if isinstance(api_version, str) else ""


class Checks:
    """Everything ``validators`` knows about one change; pure and reusable across requests."""

    def __init__(
        self,
        *,
        schemas: SchemaSet | None,
        enforcement: Enforcement = Enforcement(),  # noqa: B008 - frozen value, shared safely
        haproxy_version: tuple[int, ...] = (2, 8),
        dataplane_version: tuple[int, ...] | None = None,
        cross_object: bool = True,
        http_ports: tuple[int, ...] = (80, 443),
        rule_set: Mapping[str, Sequence[rules.Rule]] = rules.RULES,
        cpu_budget_seconds: float = budgets.DEFAULT_SECONDS,
        pod_ports: PodRange = PodRange(),  # noqa: B008 - frozen value, shared safely
    ) -> None:
        self.schemas = schemas
        self.enforcement = enforcement
        self.haproxy_version = tuple(haproxy_version)  # what the render writes for (validators.dataplanes)
        self.dataplane_version = dataplane_version  # as given; None: the checker's is assumed
        self.cross_object = cross_object
        self.http_ports = tuple(http_ports)
        self.rule_set = rule_set
        self.cpu_budget_seconds = cpu_budget_seconds  # CPU seconds for all validators of one object
        self.pod_ports = pod_ports  # the render's isolation pod-port range (RenderSettings)

    def check(self, change: Change, state: State) -> list[Finding]:
        return self.run(change, state).findings

    def defaulted(self, change: Change) -> Obj | None:
        """The new object pruned and defaulted as the API server would store it (None on DELETE)."""
        if change.obj is None or not isinstance(change.obj, Mapping):
            return None
        return self._schema(change)[0]

    def run(self, change: Change, state: State) -> Result:
        """Findings for ``change`` against ``state`` (the current state; the change is overlaid here).

        All steps share one CPU budget (``validators.budgets``); running out stops the checks with one
        denying finding rather than letting an object that costs too much to check through half-checked.
        """
        found: list[Finding] = []
        try:
            with budgets.limited(self.cpu_budget_seconds):
                return self._run(change, state, found)
        except budgets.OverBudget as e:
            found.append(Finding(codes.VALIDATION_BUDGET, f"{e}; no further checks ran: make the object "
                                 "smaller (fewer rules, matches or values)"))
            subject = change.obj if isinstance(change.obj, Mapping) else {}
            return Result(ordered(self.enforcement.apply(found, namespace=namespace_of(subject))), None)

    def _run(self, change: Change, state: State, found: list[Finding]) -> Result:
        obj = change.obj if change.operation is not Operation.DELETE else None
        defaulted: Obj | None = None
        if obj is not None and not isinstance(obj, Mapping):
            found.append(Finding(codes.SCHEMA_INVALID,
                                 f"Invalid value: the object is a {type(obj).__name__}, not a JSON object"))
        elif obj is not None:
            defaulted, schema_findings = self._schema(change)
            found += schema_findings
            ctx = Context(state=state, haproxy_version=self.haproxy_version, http_ports=self.http_ports,
                          dataplane_version=self.dataplane_version,
                          old=change.old, limits=self.enforcement.limits, pod_ports=self.pod_ports)
            found += _guarded("HAProxy rules", lambda: rules.run(defaulted or obj, ctx, self.rule_set))
        if self.cross_object:
            budgets.spend("cross-object checks")
            found += _guarded("cross-object checks", lambda: self._cross(change, defaulted, state))
        subject = obj if isinstance(obj, Mapping) else change.old if isinstance(change.old, Mapping) else {}
        enforced = self.enforcement.apply(found, namespace=namespace_of(subject))
        return Result(ordered(without_shadowed(enforced)), defaulted)

    def _schema(self, change: Change) -> tuple[Obj, list[Finding]]:
        obj = change.obj
        assert isinstance(obj, Mapping)
        kind, group, version = kind_of(obj), group_of(obj), version_of(obj)
        schema = self.schemas.get(group, version, kind) if self.schemas is not None else None
        if schema is None:
            api = obj.get("apiVersion")
            what = f"{kind or '(no kind)'} {api if isinstance(api, str) else '(no apiVersion)'}"
            return obj, [Finding(codes.NO_SCHEMA, f"no schema for {what}; schema checks skipped", (),
                                 Severity.WARN)]
        old = change.old if change.operation is Operation.UPDATE else None
        try:
            outcome = schemas.check(obj, schema, kind=kind, old=old)
        except Exception as e:  # a bug in the schema check must not crash the gate
            return obj, [_internal("schema check", e)]
        defaulted = outcome.defaulted if isinstance(outcome.defaulted, Mapping) else obj
        return defaulted, list(outcome.findings)

    def _cross(self, change: Change, defaulted: Obj | None, state: State) -> Iterator[Finding]:
        subject = change.old if change.operation is Operation.DELETE else defaulted or change.obj
        if not isinstance(subject, Mapping):
            return
        if change.operation is Operation.DELETE:
            proposed: State = Overlay(state, change)
        else:
            proposed = Overlay(state, Change(change.operation, subject, change.old, change.dry_run))
        yield from crossobjects.findings(subject, proposed, http_ports=self.http_ports)
        yield from addressmoves.findings(subject, state, proposed, http_ports=self.http_ports, pods=self.pod_ports)
        yield from httpstakeovers.findings(subject, state, proposed, http_ports=self.http_ports)


def _internal(stage: str, error: Exception) -> Finding:
    return Finding(codes.SCHEMA_UNCHECKED, f"{stage} not completed: internal error {type(error).__name__}: "
                   f"{error}", (), Severity.WARN)


def _guarded(stage: str, produce: Callable[[], Iterable[Finding]]) -> list[Finding]:
    try:
        return list(produce())
    except Exception as e:  # reported as "could not check", never raised (STYLE R7)
        return [_internal(stage, e)]


# A generic finding and the specific rules that state the same fact about the same field more
# precisely (None: any other rule). One message per problem: the generic one is dropped unless the
# specific one is less severe (a specific rule turned to warn does not hide a denial).
_SHADOWED_BY: dict[str, frozenset[str] | None] = {
    codes.UNSAFE_VALUE: None,
    codes.SCHEMA_INVALID: frozenset({codes.REDIRECT_STATUS}),  # the statusCode enum, and what HAProxy redirects with
    # the render's placeholder certificate, where the cross-object rules name why: the Secret does not
    # exist (RG0509) or no ReferenceGrant permits it (RG0510)
    "RG0405": frozenset({"RG0509", "RG0510"}),
}


def without_shadowed(found: list[Finding]) -> list[Finding]:
    """Drop a generic finding (``_SHADOWED_BY``) where a specific rule reports the same field at
    least as severely."""
    rank = {Severity.WARN: 0, Severity.DENY: 1}
    worst: dict[tuple[object, ...], dict[str, int]] = {}  # field -> rule -> worst severity
    for f in found:
        at = worst.setdefault(f.path, {})
        at[f.code] = max(at.get(f.code, -1), rank[f.severity])

    def shadowed(f: Finding) -> bool:
        if f.code not in _SHADOWED_BY:
            return False
        by = _SHADOWED_BY[f.code]
        # No cycle: a generic code is only shadowed by codes that are not shadowed by it in turn.
        return any(rank[f.severity] <= level for code, level in worst.get(f.path, {}).items()
                   if code != f.code and (by is None or code in by))

    return [f for f in found if not shadowed(f)]
