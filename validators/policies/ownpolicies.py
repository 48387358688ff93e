"""routegate's own policies (``--config`` ``policies:``): CEL over what only routegate knows.

The same CEL and the same expression fields as a ValidatingAdmissionPolicy (``variables``,
``validations`` with ``expression``/``message``/``messageExpression``, ``matchConditions``), the same
``object``/``oldObject``/``request``/``namespaceObject``, and three more variables:

- ``attachments``: where the object attaches in the state it is judged against:
  ``{"listeners": [{"gateway", "source", "name", "port", "protocol", "hostname", "hostnames"}],
  "hostnames": [...]}`` (``hostnames``: the names the route really serves there: its hostnames
  intersected with each listener's, the listener's when the route names none, ``*`` for any host).
- ``traffic``: the request classes the change gains, loses or moves (``haproxy_check.traffic``: one
  map per move, ``{"entry", "host", "path", "matchers", "change", "before", "after", "gateways",
  "listeners"}`` with ``before``/``after`` = ``{"outcome", "rule", "owner", "backends"}``). At admission and
  in ``check`` it is the change's diff; in the reconcile audit (a stored object, no change) it is
  what the object serves, every class ``gained``. A policy that reads ``traffic`` runs once the diff is
  known (``needs_traffic``), the others with the rules.
- ``lookup``: ``{"namespaces": {NAME: {"labels": {...}}}, "services": {"NS/NAME": {"labels": {...}}}}``
  for the object's namespace, the namespaces its references name and the Services its backendRefs
  name: what the change reads, never the whole cluster (O(change)).

Each policy has ``action: deny`` (RG0610, the default) or ``warn`` (RG0611) and optional ``kinds``
(default: every kind routegate reviews). Messages name the policy: ``policy hosts-from-label:
MESSAGE``; the field path is a validation's ``fieldPath`` (``.spec.hostnames``), else the expression's
first ``object.spec...`` chain (``vaps.path_of``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from validators.cel.celprograms import parse_field_path
from validators.findings import Finding, Severity
from validators.objects import REVIEWED_KINDS, Obj, as_list, as_map, dig, kind_of
from validators.policies import expressions, policycodes, vaps
from validators.policies.expressions import Activation, EvalError, Expression, Meter, SetupError
from validators.states import State
from validators.views import attachments as views

KEYS = ("name", "kinds", "action", "matchConditions", "variables", "validations")
_VALIDATION_KEYS = ("expression", "message", "messageExpression", "fieldPath")


@dataclass(frozen=True, slots=True)
class OwnPolicy:
    name: str
    kinds: frozenset[str]
    action: str  # deny | warn
    conditions: tuple[tuple[str, Expression], ...]
    variables: tuple[tuple[str, Expression], ...]
    validations: tuple[vaps.Validation, ...]

    @property
    def needs_traffic(self) -> bool:
        texts = [e.text for _, e in (*self.conditions, *self.variables)]
        for v in self.validations:
            texts.append(v.expression.text)
            if v.message_expression is not None:
                texts.append(v.message_expression.text)
        return any(_reads(text, "traffic") for text in texts)


def _reads(text: str, name: str) -> bool:
    import re

    from validators.cel import celfunctions

    return re.search(rf"(?<![.\w]){name}\b", celfunctions.strip_strings(text)) is not None


def _compile(who: str, field: str, text: Any, declared: Sequence[str], kind: str = "bool") -> Expression:
    expr = expressions.compile_expression(who, field, text, declared=declared, variables=expressions.OWN_VARIABLES,
                                          kind=kind)
    if expr.unsupported:
        raise SetupError(f"{who}: {field}: {text!r}: authorizer is not available to routegate policies")
    return expr


def parse(raw: Any) -> tuple[OwnPolicy, ...]:
    """The ``policies:`` list of a settings file; every mistake is a SetupError naming the policy."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SetupError(f"policies: expected a list of policies, got {type(raw).__name__}")
    out: list[OwnPolicy] = []
    names: set[str] = set()
    for n, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise SetupError(f"policies[{n}]: expected a mapping with keys {', '.join(KEYS)}")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise SetupError(f"policies[{n}].name: required")
        who = f"policy {name}"
        if name in names:
            raise SetupError(f"{who}: the name is used twice")
        names.add(name)
        for key in item:
            if key not in KEYS:
                raise SetupError(f"{who}: unknown key {key!r}; allowed: {', '.join(KEYS)}")
        kinds = item.get("kinds", sorted(REVIEWED_KINDS))
        if not isinstance(kinds, list) or not kinds or any(k not in REVIEWED_KINDS for k in kinds):
            raise SetupError(f"{who}: kinds: expected a list of {', '.join(sorted(REVIEWED_KINDS))}, got {kinds!r}")
        action = item.get("action", "deny")
        if action not in ("deny", "warn"):
            raise SetupError(f"{who}: action: {action!r} is not one of deny, warn")
        conditions = tuple((str(as_map(c).get("name") or f"matchConditions[{i}]"),
                            _compile(who, f"matchConditions[{i}].expression", as_map(c).get("expression"), []))
                           for i, c in enumerate(as_list(item.get("matchConditions"))))
        declared: list[str] = []
        variables: list[tuple[str, Expression]] = []
        for i, v in enumerate(as_list(item.get("variables"))):
            vname = as_map(v).get("name")
            if not expressions.names_ok(vname) or vname in declared:
                raise SetupError(f"{who}: variables[{i}].name: expected a new CEL identifier, got {vname!r}")
            variables.append((str(vname), _compile(who, f"variables[{i}].expression", as_map(v).get("expression"),
                                                   declared, kind="any")))
            declared.append(str(vname))
        validations: list[vaps.Validation] = []
        for i, v in enumerate(as_list(item.get("validations"))):
            body = as_map(v)
            for key in body:
                if key not in _VALIDATION_KEYS:
                    raise SetupError(f"{who}: validations[{i}]: unknown key {key!r}; allowed: "
                                     f"{', '.join(_VALIDATION_KEYS)}")
            expr = _compile(who, f"validations[{i}].expression", body.get("expression"), declared)
            message_expr = None
            if body.get("messageExpression") is not None:
                message_expr = _compile(who, f"validations[{i}].messageExpression", body.get("messageExpression"),
                                        declared, kind="string")
            message = body.get("message") or ""
            if not isinstance(message, str):
                raise SetupError(f"{who}: validations[{i}].message: expected a string")
            field_path = body.get("fieldPath")
            if field_path is not None and (not isinstance(field_path, str) or not parse_field_path(field_path)):
                raise SetupError(f"{who}: validations[{i}].fieldPath: expected a path such as .spec.hostnames, "
                                 f"got {field_path!r}")
            path = parse_field_path(field_path) if field_path else vaps.path_of(expr.text)
            validations.append(vaps.Validation(expr, message, message_expr, "Invalid", path))
        if not validations:
            raise SetupError(f"{who}: validations: at least one is required")
        out.append(OwnPolicy(name, frozenset(kinds), action, conditions, tuple(variables), tuple(validations)))
    return tuple(out)


# --- the variables only routegate knows ------------------------------------------------------------------


def attachments_of(obj: Obj, state: State, http_ports: Sequence[int]) -> dict[str, Any]:
    """``attachments``: the listeners the route attaches to and the hostnames it serves there."""
    found, _ = views.attach(obj, state, http_ports=http_ports)
    listeners: list[dict[str, Any]] = []
    served: list[str] = []
    route_hosts = views.route_hostnames(obj)
    for a in found:
        hosts = list(a.hostnames) or ([a.listener.hostname] if a.listener.hostname else route_hosts or ["*"])
        listeners.append({"gateway": f"{a.listener.gateway.namespace}/{a.listener.gateway.name}",
                          "source": str(a.listener.source), "name": a.listener.name, "port": a.listener.port,
                          "protocol": a.listener.protocol, "hostname": a.listener.hostname, "hostnames": hosts})
        served += [h for h in hosts if h not in served]
    return {"listeners": listeners, "hostnames": served}


def served_traffic(obj: Obj, attached: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``traffic`` of a stored object (the audit): every host it serves, as gained by it."""
    ns = str(dig(obj, "metadata", "namespace", default="") or "")
    who = f"{kind_of(obj)} {ns}/{dig(obj, 'metadata', 'name', default='')}"
    nothing = {"outcome": "no route", "rule": "", "owner": "", "detail": "", "backends": []}
    out: list[dict[str, Any]] = []
    for listener in attached.get("listeners", ()):
        for host in listener["hostnames"]:
            out.append({"entry": f"{listener['protocol']} :{listener['port']}", "host": host, "path": "*",
                        "matchers": [], "change": "gained", "before": nothing,
                        "after": {"outcome": "backend", "rule": who, "owner": ns, "detail": "", "backends": []},
                        "gateways": [listener["gateway"]], "listeners": [listener["source"]]})
    return out


def lookup_of(obj: Obj, state: State) -> dict[str, Any]:
    """``lookup``: labels of the namespaces and Services the object names (its own namespace first)."""
    ns = str(dig(obj, "metadata", "namespace", default="") or "")
    namespaces = {ns} if ns else set()
    services: dict[str, Any] = {}
    for ref in _backend_refs(obj):
        if ref.get("kind", "Service") != "Service" or ref.get("group", "") not in ("", None):
            continue
        name, where = ref.get("name"), ref.get("namespace") or ns
        if not isinstance(name, str) or not isinstance(where, str):
            continue
        namespaces.add(where)
        svc = state.get("Service", where, name)
        if svc is not None:
            services[f"{where}/{name}"] = {"labels": dict(as_map(dig(svc, "metadata", "labels")))}
    for ref in as_list(dig(obj, "spec", "parentRefs")):
        where = as_map(ref).get("namespace")
        if isinstance(where, str) and where:
            namespaces.add(where)
    return {"namespaces": {n: {"labels": views.namespace_labels(state, n)} for n in sorted(namespaces)},
            "services": services}


def _backend_refs(obj: Obj) -> Iterable[Mapping[str, Any]]:
    for rule in as_list(dig(obj, "spec", "rules")):
        for ref in as_list(as_map(rule).get("backendRefs")):
            if isinstance(ref, Mapping):
                yield ref


# --- evaluation --------------------------------------------------------------------------------------------


def judge(policies: Sequence[OwnPolicy], subject: vaps.Subject, extra: Mapping[str, Any]) -> list[Finding]:
    """Findings of ``policies`` on one request; ``extra``: ``attachments``, ``traffic``, ``lookup``."""
    kind = str(subject.request.get("kind", {}).get("kind", ""))
    findings: list[Finding] = []
    extra = {name: expressions.as_json(value) for name, value in extra.items()}
    size, width = expressions.measured(*extra.values())
    for policy in policies:
        if kind not in policy.kinds:
            continue
        values = {"object": subject.object, "oldObject": subject.old, "request": dict(subject.request),
                  "params": None, "namespaceObject": subject.namespace, "authorizer": None, **extra}
        activation = Activation(values, expressions.OWN_VARIABLES)
        meter = Meter(subject.size + size, max(subject.width, width))
        findings += _one(policy, activation, meter)
    return findings


def _finding(policy: OwnPolicy, message: str, path: tuple[str | int, ...] = ()) -> Finding:
    code, severity = ((policycodes.OWN_DENIED, Severity.DENY) if policy.action == "deny"
                      else (policycodes.OWN_WARNED, Severity.WARN))
    return Finding(code, f"policy {policy.name}: {message}", path, severity)


def _one(policy: OwnPolicy, activation: Activation, meter: Meter) -> list[Finding]:
    """Like a ValidatingAdmissionPolicy with failurePolicy Fail: an error is a finding, never a pass."""
    for name, condition in policy.conditions:
        try:
            result = expressions.run(condition, activation, meter)
        except EvalError as exc:
            return [_finding(policy, f"matchCondition '{name}': expression '{condition.text}' resulted in error: "
                                     f"{exc}")]
        if result is not True:
            return []
    for name, variable in policy.variables:
        try:
            activation.set_variable(name, expressions.run(variable, activation, meter))
        except EvalError as exc:
            activation.failed[name] = str(exc)
            activation.set_variable(name, None)
    out: list[Finding] = []
    for validation in policy.validations:
        expr = validation.expression
        try:
            result = expressions.run(expr, activation, meter)
        except EvalError as exc:
            out.append(_finding(policy, f"expression '{expr.text}' resulted in error: {exc}", validation.path))
            if str(exc) == expressions.BUDGET_EXCEEDED:
                break
            continue
        if result is True:
            continue
        if result is not False:
            out.append(_finding(policy, f"expression '{expr.text}' must evaluate to bool", validation.path))
            continue
        out.append(_finding(policy, vaps.message_of(validation, activation, meter), validation.path))
    return out
