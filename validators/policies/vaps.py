"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1),
judged offline as the API server judges them (k8s.io/apiserver/pkg/admission/plugin/policy/validating).

:meth:`PolicySet.of` reads policies, bindings and the objects that may be their params from plain
objects (files, a cluster's listing; no I/O here) and compiles every expression once; a policy that
cannot be used (does not compile, names an unknown variable, an unknown field value) is a
:class:`~validators.policies.expressions.SetupError` naming the policy, the field and the expression.
:meth:`PolicySet.judge` evaluates every binding whose policy selects the change:

- ``paramRef`` (``name`` or ``selector``; ``namespace`` or the request's) finds the params; none found:
  ``parameterNotFoundAction`` Deny fails the binding, Allow skips it; a policy with ``paramKind`` bound
  without ``paramRef`` is a configuration error. Each selected param is evaluated on its own.
- ``matchConditions`` in order: any false skips the policy; errors (and no false) fail it.
- ``variables`` composited in order; ``validations`` in order: false is a failure with
  ``messageExpression`` (when it gives a non-empty single-line string), else ``message``, else
  ``failed expression: EXPR``; an error is a failure under ``failurePolicy: Fail`` (the default) and
  nothing under ``Ignore``.
- each failure becomes one finding per ``validationActions`` entry: Deny (RG0600, deny), Warn (RG0601,
  a warning), Audit (RG0602, a warning standing for the audit annotation), worded as the API server
  words them. An expression naming ``authorizer`` is not run (RG0603): nobody can ask the cluster's
  authorizers offline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from validators.findings import Finding, PathPart, Severity
from validators.objects import KINDS, Obj, as_list, as_map, dig
from validators.policies import expressions, matching, policycodes
from validators.policies.expressions import Activation, EvalError, Expression, Meter, SetupError
from validators.views.attachments import Selector, selector_of

GROUP = "admissionregistration.k8s.io"
POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
KINDS_READ = (POLICY_KIND, BINDING_KIND)
ACTIONS = ("Deny", "Warn", "Audit")
MESSAGE_LIMIT = 5 * 1024  # a longer messageExpression result falls back to message (upstream validator.go)
_OBJECT_PATH = re.compile(r"(?<![.\w])(?:object|oldObject)((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)+)")


@dataclass(frozen=True, slots=True)
class Validation:
    expression: Expression
    message: str
    message_expression: Expression | None
    reason: str
    path: tuple[PathPart, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    failure_policy: str  # Fail | Ignore
    match: matching.Match
    param_kind: tuple[str, str] | None  # (apiVersion, kind)
    conditions: tuple[tuple[str, Expression], ...]
    variables: tuple[tuple[str, Expression], ...]
    validations: tuple[Validation, ...]


@dataclass(frozen=True, slots=True)
class ParamRef:
    name: str
    namespace: str
    selector: Selector | None
    not_found: str  # Allow | Deny


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    policy: str
    actions: tuple[str, ...]
    match: matching.Match
    param_ref: ParamRef | None


@dataclass(frozen=True, slots=True)
class Subject:
    """One admission request, as the policies see it (built by the caller from a Change)."""

    object: Obj | None
    old: Obj | None
    request: Mapping[str, Any]
    namespace: Obj | None  # the namespace object; None: cluster-scoped
    match: matching.Request
    size: int = 0  # nodes of object, oldObject, request and namespaceObject (the cost estimate's input)
    width: int = 0  # their widest list or map


def _name(obj: Obj) -> str:
    return str(dig(obj, "metadata", "name", default="") or "")


def _who(kind: str, name: str) -> str:
    return f"{kind} {name}"


def _text(raw: Any, field: str, who: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise SetupError(f"{who}: {field}: expected a string, got {raw!r}")
    return raw


def _named_expressions(raw: Any, field: str, who: str, key: str, *, kind: str, declared: list[str],
                       grow: bool) -> tuple[tuple[str, Expression], ...]:
    out: list[tuple[str, Expression]] = []
    seen: set[str] = set()
    for n, item in enumerate(as_list(raw)):
        at = f"{field}[{n}]"
        name = as_map(item).get("name")
        if not isinstance(name, str) or not name or (grow and not expressions.names_ok(name)):
            raise SetupError(f"{who}: {at}.name: expected a name{' (a CEL identifier)' if grow else ''}, got {name!r}")
        if name in seen:
            raise SetupError(f"{who}: {at}.name: {name!r} is declared twice")
        seen.add(name)
        expr = expressions.compile_expression(who, f"{at}.{key}", as_map(item).get(key), declared=list(declared),
                                              variables=expressions.VAP_VARIABLES, kind=kind)
        out.append((name, expr))
        if grow:
            declared.append(name)
    return tuple(out)


def path_of(text: str) -> tuple[PathPart, ...]:
    """The field an expression is about, where it names one: its first ``object.spec...`` chain (else
    its first ``object...`` chain), without a trailing method: ``object.spec.hostnames.all(...)`` ->
    spec.hostnames."""
    from validators.cel import celfunctions

    blank = celfunctions.strip_strings(text)
    chains: list[list[str]] = []
    for found in _OBJECT_PATH.finditer(blank):
        parts = [p.strip() for p in found.group(1).split(".") if p.strip()]
        if blank[found.end():].lstrip().startswith("(") and parts:  # the last name is a method
            parts.pop()
        if parts:
            chains.append(parts)
    spec = [c for c in chains if c[0] == "spec"]
    chosen = spec[0] if spec else chains[0] if chains else []
    return tuple(chosen)


def parse_policy(obj: Obj) -> Policy:
    name = _name(obj)
    who = _who(POLICY_KIND, name or "<no name>")
    spec = obj.get("spec")
    if not name:
        raise SetupError(f"{who}: metadata.name: required")
    if not isinstance(spec, Mapping):
        raise SetupError(f"{who}: spec: required")
    failure = spec.get("failurePolicy", "Fail")
    if failure not in ("Fail", "Ignore"):
        raise SetupError(f"{who}: spec.failurePolicy: {failure!r} is not one of Fail, Ignore")
    try:
        match = matching.parse(spec.get("matchConstraints"), "spec.matchConstraints")
    except matching.MatchError as exc:
        raise SetupError(f"{who}: {exc}") from None
    param_kind = None
    if spec.get("paramKind") is not None:
        pk = as_map(spec.get("paramKind"))
        if not isinstance(pk.get("apiVersion"), str) or not isinstance(pk.get("kind"), str):
            raise SetupError(f"{who}: spec.paramKind: apiVersion and kind are required")
        param_kind = (pk["apiVersion"], pk["kind"])
    declared: list[str] = []
    conditions = _named_expressions(spec.get("matchConditions"), "spec.matchConditions", who, "expression",
                                    kind="bool", declared=[], grow=False)
    variables = _named_expressions(spec.get("variables"), "spec.variables", who, "expression", kind="any",
                                   declared=declared, grow=True)
    validations: list[Validation] = []
    for n, raw in enumerate(as_list(spec.get("validations"))):
        at = f"spec.validations[{n}]"
        item = as_map(raw)
        expr = expressions.compile_expression(who, f"{at}.expression", item.get("expression"), declared=declared,
                                              variables=expressions.VAP_VARIABLES)
        message_expression = None
        if item.get("messageExpression") is not None:
            message_expression = expressions.compile_expression(
                who, f"{at}.messageExpression", item.get("messageExpression"), declared=declared,
                variables=expressions.VAP_VARIABLES, kind="string")
        message = _text(item.get("message"), f"{at}.message", who)
        reason = _text(item.get("reason"), f"{at}.reason", who) or "Invalid"
        validations.append(Validation(expr, message, message_expression, reason, path_of(expr.text)))
    if not validations and not as_list(spec.get("auditAnnotations")):
        raise SetupError(f"{who}: spec.validations: required (with no auditAnnotations)")
    return Policy(name, failure, match, param_kind, conditions, variables, tuple(validations))


def parse_binding(obj: Obj) -> Binding:
    name = _name(obj)
    who = _who(BINDING_KIND, name or "<no name>")
    spec = as_map(obj.get("spec"))
    policy = spec.get("policyName")
    if not name:
        raise SetupError(f"{who}: metadata.name: required")
    if not isinstance(policy, str) or not policy:
        raise SetupError(f"{who}: spec.policyName: required")
    actions = spec.get("validationActions")
    if not isinstance(actions, list) or not actions or any(a not in ACTIONS for a in actions):
        raise SetupError(f"{who}: spec.validationActions: expected a non-empty list of Deny, Warn, Audit, "
                         f"got {actions!r}")
    if len(set(actions)) != len(actions):
        raise SetupError(f"{who}: spec.validationActions: {actions!r} has duplicates")
    if "Deny" in actions and "Warn" in actions:
        raise SetupError(f"{who}: spec.validationActions: Deny and Warn may not be used together")
    match = matching.EVERYTHING
    if spec.get("matchResources") is not None:
        try:
            match = matching.parse(spec.get("matchResources"), "spec.matchResources", binding=True)
        except matching.MatchError as exc:
            raise SetupError(f"{who}: {exc}") from None
    param_ref = None
    if spec.get("paramRef") is not None:
        raw = as_map(spec.get("paramRef"))
        ref_name, selector = raw.get("name"), raw.get("selector")
        if (ref_name is None) == (selector is None):
            raise SetupError(f"{who}: spec.paramRef: exactly one of name or selector is required")
        not_found = raw.get("parameterNotFoundAction", "Deny")
        if not_found not in ("Allow", "Deny"):
            raise SetupError(f"{who}: spec.paramRef.parameterNotFoundAction: {not_found!r} is not one of Allow, Deny")
        param_ref = ParamRef(str(ref_name or ""), str(raw.get("namespace") or ""),
                             selector_of(selector) if selector is not None else None, str(not_found))
    return Binding(name, policy, tuple(actions), match, param_ref)


@dataclass(frozen=True, slots=True)
class _Failure:
    message: str
    reason: str
    path: tuple[PathPart, ...] = ()


class PolicySet:
    """Compiled policies and bindings, and the objects that may be params (by API group and kind)."""

    def __init__(self, policies: Mapping[str, Policy], bindings: Sequence[Binding],
                 params: Mapping[tuple[str, str], Sequence[Obj]]) -> None:
        self.policies = dict(policies)
        self.bindings = tuple(sorted(bindings, key=lambda b: b.name))
        # by (API group, kind) and namespace: a binding looks in one namespace (and the cluster scope),
        # never through every param object of the cluster (a live check lists all ConfigMaps)
        self.params: dict[tuple[str, str], dict[str, list[Obj]]] = {}
        for key, objects in params.items():
            by_namespace = self.params.setdefault(key, {})
            for obj in objects:
                ns = str(dig(obj, "metadata", "namespace", default="") or "")
                by_namespace.setdefault(ns, []).append(obj)

    def __bool__(self) -> bool:
        """Whether any policy is bound (an unbound policy enforces nothing)."""
        return any(b.policy in self.policies for b in self.bindings)

    @classmethod
    def of(cls, objects: Iterable[Obj]) -> PolicySet:
        """Every policy and binding among ``objects``; raises the first SetupError found. The others
        are kept as possible params."""
        policies: dict[str, Policy] = {}
        bindings: list[Binding] = []
        others: list[tuple[str, str, Obj]] = []
        for obj in objects:
            kind, api = obj.get("kind"), str(obj.get("apiVersion", ""))
            if kind in KINDS_READ and api.startswith(GROUP + "/"):
                if kind == POLICY_KIND:
                    policy = parse_policy(obj)
                    policies[policy.name] = policy
                else:
                    bindings.append(parse_binding(obj))
                continue
            others.append((api, str(kind), obj))
        # Only objects of a kind some policy takes as params are ever looked up (``_params``): a check of
        # 50,000 objects and no policy indexed every one of them by kind and namespace for nothing.
        wanted = {(api.rpartition("/")[0], kind) for p in policies.values() if p.param_kind is not None
                  for api, kind in (p.param_kind,)}
        params: dict[tuple[str, str], list[Obj]] = {}
        if wanted:
            for api, kind, obj in others:
                key = (api.rpartition("/")[0], kind)
                if key in wanted:
                    params.setdefault(key, []).append(obj)
        return cls(policies, bindings, params)

    def judge(self, subject: Subject) -> list[Finding]:
        findings: list[Finding] = []
        for binding in self.bindings:
            policy = self.policies.get(binding.policy)
            if policy is None:  # the API server ignores a binding to a policy that does not exist
                continue
            if not policy.match.selects(subject.match) or not binding.match.selects(subject.match):
                continue
            for failure in self._evaluate(policy, binding, subject):
                findings += _findings(policy, binding, failure)
        return findings

    def _evaluate(self, policy: Policy, binding: Binding, subject: Subject) -> list[_Failure]:
        try:
            params = self._params(policy, binding, subject)
        except _ConfigError as exc:
            if policy.failure_policy == "Ignore":
                return []
            return [_Failure(f"failed to configure binding: {exc}", "Invalid")]
        out: list[_Failure] = []
        for param in params:
            out += evaluate(policy, subject, param)
        return out

    def _params(self, policy: Policy, binding: Binding, subject: Subject) -> list[Obj | None]:
        if policy.param_kind is None:
            return [None]
        ref = binding.param_ref
        if ref is None:
            raise _ConfigError(f"policy '{policy.name}' has paramKind but binding '{binding.name}' has no paramRef")
        api, kind = policy.param_kind
        group = api.rpartition("/")[0]
        request_ns = str(subject.request.get("namespace") or "")
        namespace = ref.namespace or request_ns
        by_namespace = self.params.get((group, kind), {})
        candidates = [*by_namespace.get(namespace, ()), *(by_namespace.get("", ()) if namespace else ())]
        if ref.name:
            found = [o for o in candidates if _name(o) == ref.name]
        else:
            assert ref.selector is not None
            found = [o for o in candidates if ref.selector.matches(as_map(dig(o, "metadata", "labels")))]
        if found:
            ordered: list[Obj | None] = [*sorted(found, key=_name)]
            return ordered
        if ref.not_found == "Deny":
            raise _ConfigError("no params found for policy binding with `Deny` parameterNotFoundAction")
        return []


class _ConfigError(Exception):
    pass


def evaluate(policy: Policy, subject: Subject, param: Obj | None) -> list[_Failure]:
    """The failures of one policy on one request with one param (upstream validator.go's Validate)."""
    values = {"object": subject.object, "oldObject": subject.old, "request": dict(subject.request),
              "params": expressions.as_json(param), "namespaceObject": subject.namespace, "authorizer": None}
    activation = Activation(values, expressions.VAP_VARIABLES)
    size, width = expressions.measure(param)
    meter = Meter(subject.size + size, max(subject.width, width))
    ignore = policy.failure_policy == "Ignore"

    def failed(error: str) -> list[_Failure]:
        return [] if ignore else [_Failure(error, "Invalid")]

    errors: list[str] = []
    for name, condition in policy.conditions:
        if condition.unsupported:
            return failed(f"matchCondition '{name}': authorizer is not supported offline")
        try:
            result = expressions.run(condition, activation, meter)
        except EvalError as exc:
            if str(exc) == expressions.BUDGET_EXCEEDED:
                return failed(str(exc))
            errors.append(f"expression '{condition.text}' resulted in error: {exc}")
            continue
        if result is False:
            return []
        if result is not True:
            errors.append(f"matchCondition '{name}' must evaluate to bool")
    if errors:
        return failed(f"failed to evaluate matchConditions: {'; '.join(errors)}")
    for name, variable in policy.variables:
        try:
            if variable.unsupported:
                raise EvalError("authorizer is not supported offline")
            activation.set_variable(name, expressions.run(variable, activation, meter))
        except EvalError as exc:
            activation.failed[name] = str(exc)
            activation.set_variable(name, None)
    out: list[_Failure] = []
    for validation in policy.validations:
        expr = validation.expression
        if expr.unsupported:
            continue  # reported once per policy by the caller (RG0603), never judged
        try:
            result = expressions.run(expr, activation, meter)
        except EvalError as exc:
            out += failed(f"expression '{expr.text}' resulted in error: {exc}")
            if str(exc) == expressions.BUDGET_EXCEEDED:
                break  # no further validation rules are run
            continue
        if result is True:
            continue
        if result is not False:
            out += failed(f"expression '{expr.text}' resulted in error: validation expression must evaluate to "
                          f"bool, got {type(result).__name__}")
            continue
        out.append(_Failure(message_of(validation, activation, meter), validation.reason, validation.path))
    return out


def message_of(validation: Validation, activation: Activation, meter: Meter) -> str:
    if validation.message_expression is not None and not validation.message_expression.unsupported:
        try:
            text = expressions.run(validation.message_expression, activation, meter)
        except EvalError:
            text = None  # the API server falls back to the static message
        if isinstance(text, str) and text.strip() and "\n" not in text and len(text) <= MESSAGE_LIMIT:
            return text.strip()
    if validation.message.strip():
        return validation.message.strip()
    return f"failed expression: {validation.expression.text.strip()}"


def _findings(policy: Policy, binding: Binding, failure: _Failure) -> Iterator[Finding]:
    for action in binding.actions:
        if action == "Deny":
            yield Finding(policycodes.VAP_DENIED, f"ValidatingAdmissionPolicy '{policy.name}' with binding "
                          f"'{binding.name}' denied request: {failure.message}", failure.path, Severity.DENY)
        elif action == "Warn":
            yield Finding(policycodes.VAP_WARNED, f"Validation failed for ValidatingAdmissionPolicy "
                          f"'{policy.name}' with binding '{binding.name}': {failure.message}", failure.path,
                          Severity.WARN)
        else:
            yield Finding(policycodes.VAP_AUDITED, f"audit: ValidatingAdmissionPolicy '{policy.name}' with binding "
                          f"'{binding.name}' failed: {failure.message}", failure.path, Severity.WARN)


def unsupported(policies: Iterable[Policy]) -> Iterator[tuple[str, str, str]]:
    """(policy, field, expression) of every expression that names ``authorizer``."""
    for policy in policies:
        for _, expr in (*policy.conditions, *policy.variables):
            if expr.unsupported:
                yield policy.name, expr.field, expr.text
        for v in policy.validations:
            if v.expression.unsupported:
                yield policy.name, v.expression.field, v.expression.text


def unsupported_findings(policy_set: PolicySet, subject: Subject) -> list[Finding]:
    """RG0603 for each expression a selected policy could not run (authorizer)."""
    out: list[Finding] = []
    for binding in policy_set.bindings:
        policy = policy_set.policies.get(binding.policy)
        if policy is None or not policy.match.selects(subject.match) or not binding.match.selects(subject.match):
            continue
        for _, field, text in unsupported([policy]):
            out.append(Finding(policycodes.VAP_UNSUPPORTED, f"ValidatingAdmissionPolicy '{policy.name}': {field}: "
                               f"{text!r} uses authorizer, which routegate cannot ask offline; not judged",
                               (), Severity.WARN))
    return out


def subject_of(operation: str, obj: Obj | None, old: Obj | None, namespace: Obj | None, *,
               user: Mapping[str, Any] | None = None, dry_run: bool = False) -> Subject:
    """The request the API server would build for a change of a kind routegate knows."""
    obj, old, namespace = expressions.as_json(obj), expressions.as_json(old), expressions.as_json(namespace)
    current = obj if obj is not None else old
    assert current is not None, "a change carries an object or an old object"
    api = str(current.get("apiVersion", ""))
    group, _, version = api.rpartition("/")
    kind = str(current.get("kind", ""))
    info = KINDS.get(kind)
    resource = info.plural if info is not None else kind.lower() + "s"
    namespaced = info.namespaced if info is not None else bool(dig(current, "metadata", "namespace"))
    name = _name(current)
    ns = str(dig(current, "metadata", "namespace", default="") or "") if namespaced else ""
    request = {
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": name, "namespace": ns, "operation": operation,
        # offline the user is not known: nobody's (no name, no groups), so an exemption for a user or
        # group does not apply, as for a developer's own apply
        "userInfo": {"username": "", "uid": "", "groups": [], "extra": {}, **dict(user or {})},
        "dryRun": dry_run, "subResource": "", "options": None,
    }
    labels = as_map(dig(obj, "metadata", "labels")) if obj is not None else {}
    old_labels = as_map(dig(old, "metadata", "labels")) if old is not None else None
    if kind == "Namespace":
        ns_labels: Mapping[str, str] | None = as_map(dig(current, "metadata", "labels"))
    else:
        ns_labels = as_map(dig(namespace, "metadata", "labels")) if namespaced else None
    versions = info.versions if info is not None else (version,)
    req = matching.Request(operation, group, version, resource, namespaced, name, versions,
                           {str(k): str(v) for k, v in labels.items()},
                           {str(k): str(v) for k, v in old_labels.items()} if old_labels is not None else None,
                           {str(k): str(v) for k, v in ns_labels.items()} if ns_labels is not None else None)
    ns_obj = namespace if namespaced else None
    size, width = expressions.measured(obj, old, request, ns_obj)
    return Subject(obj, old, request, ns_obj, req, size, width)
