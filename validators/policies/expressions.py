"""CEL expressions of admission policies: compiled once with the variables the API server declares,
run with its per-expression cost limit and its per-policy runtime budget.

Names the API server gives a ValidatingAdmissionPolicy's expressions: ``object``, ``oldObject``,
``request``, ``params``, ``namespaceObject``, ``variables`` and ``authorizer`` (+ ``authorizer.
requestResource``). routegate's own policies add ``attachments``, ``traffic`` and ``lookup``
(``ownpolicies``). ``authorizer`` asks the cluster's authorizers, which nobody can ask offline: an
expression that names it is reported unsupported (``uses_authorizer``) rather than guessed.

Costs (k8s.io/apiserver/pkg/apis/cel/config.go): ``PerCallLimit`` 1,000,000 per expression and
``RuntimeCELCostBudget`` 10,000,000 per policy evaluation. The C++ engine does not count cost, so the
cost of a run is estimated before it as ``validators.cel`` does for CRD rules: the size of the bound
values, times the widest list for every comprehension nested under the first (an upper bound of what
cel-go would count). Past a limit the expression is not run and fails with the API server's message.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from validators import budgets
from validators.cel import celengines, celfunctions, celprograms

PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
VAP_VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer")
OWN_VARIABLES = (*VAP_VARIABLES, "attachments", "traffic", "lookup")
PER_CALL_EXCEEDED = "operation cancelled: actual cost limit exceeded"
BUDGET_EXCEEDED = "validation failed due to running out of cost budget, no further validation rules will be run"

_VARIABLE_USE = re.compile(r"\bvariables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_AUTHORIZER = re.compile(r"(?<![.\w])authorizer\b")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SetupError(ValueError):
    """A policy that cannot be used: the message names the policy, the field and the expression."""


class EvalError(Exception):
    """An expression failed at run time (its message in cel-go's words where known)."""


@dataclass(frozen=True, slots=True)
class Expression:
    field: str  # "spec.validations[0].expression"
    text: str
    program: celengines.Program | None  # None: names authorizer (unsupported offline)
    depth: int  # comprehension nesting: the cost estimate's exponent
    uses: frozenset[str]  # the names of ``variables.NAME`` it reads
    variables: tuple[str, ...] = VAP_VARIABLES  # the names the engine declares (which engine runs it)

    @property
    def unsupported(self) -> bool:
        return self.program is None


_engines: dict[tuple[str, ...], celengines.Engine] = {}


def engine(variables: Sequence[str]) -> celengines.Engine:
    """One engine per variable set and process (building one declares ~40 overloads)."""
    key = tuple(variables)
    found = _engines.get(key)
    if found is None:
        found = _engines[key] = celengines.load(variables=key)
    return found


def uses_authorizer(text: str) -> bool:
    return bool(_AUTHORIZER.search(celfunctions.strip_strings(text)))


def compile_expression(who: str, field: str, text: Any, *, declared: Sequence[str], variables: Sequence[str],
                       kind: str = "bool") -> Expression:
    """``kind``: what the result must be: ``bool`` (a validation, a match condition), ``string`` (a
    messageExpression) or ``any`` (a variable). ``declared``: the ``variables.NAME`` it may read."""
    if not isinstance(text, str) or not text.strip():
        raise SetupError(f"{who}: {field}: expected a CEL expression (a non-empty string), got {text!r}")
    blank = celfunctions.strip_strings(text)
    uses = frozenset(_VARIABLE_USE.findall(blank))
    unknown = sorted(uses - set(declared))
    if unknown:
        raise SetupError(f"{who}: {field}: {text!r}: unknown variable 'variables.{unknown[0]}'"
                         f"{'; declared before it: ' + ', '.join(declared) if declared else '; none is declared'}")
    depth = celprograms.nesting(text)
    if uses_authorizer(text):
        return Expression(field, text, None, depth, uses, tuple(variables))
    source = celfunctions.precompiled_regexes(celfunctions.rewrite_formats(text))
    if kind == "any":
        source = f"dyn({source})"  # a variable may be of any type; the engine accepts bool, string or dyn
    try:
        program = engine(variables).compile(source)
    except celengines.CelCompileError as exc:
        raise SetupError(f"{who}: {field}: {text!r}: compilation failed: {exc}") from None
    except ImportError as exc:
        raise SetupError(f"{who}: {field}: no CEL engine is installed ({exc})") from None
    return Expression(field, text, program, depth, uses, tuple(variables))


def names_ok(name: Any) -> bool:
    return isinstance(name, str) and bool(_NAME.fullmatch(name))


@dataclass(slots=True)
class Meter:
    """The cost left in one policy evaluation (``RUNTIME_BUDGET``) and the estimate's inputs."""

    size: int
    width: int
    left: int = RUNTIME_BUDGET

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Meter:
        size, width = measure(values)
        return cls(size, width)

    def charge(self, expression: Expression) -> None:
        cost = self.size if expression.depth <= 1 else self.size * self.width ** (expression.depth - 1)
        cost = max(1, cost)
        if cost > PER_CALL_LIMIT:
            raise EvalError(PER_CALL_EXCEEDED)
        if cost > self.left:
            self.left = 0
            raise EvalError(BUDGET_EXCEEDED)
        self.left -= cost


_SCALARS = frozenset({str, int, float, bool, type(None)})


def measure(value: Any, depth: int = 0) -> tuple[int, int]:
    """(nodes, widest list or map) of plain data; bounded by depth like every walk of objects here.
    Objects from JSON and YAML are plain dicts, lists and scalars: told apart by type, not by ABC."""
    kind = type(value)
    if kind in _SCALARS:
        return 1, 0
    if kind is not dict and kind is not list:
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        else:
            return 1, 0
    if depth > 100:
        return 1, 0
    size, width = 1, len(value)
    for item in value.values() if type(value) is dict else value:
        if type(item) in _SCALARS:
            size += 1
            continue
        s, w = measure(item, depth + 1)
        size += s
        if w > width:
            width = w
    return size, width


def as_json(value: Any, depth: int = 0) -> Any:
    """``value`` as the API server sees it, in JSON: YAML's unquoted timestamps and dates are the strings
    kubectl sends (``2026-11-01T10:00:00Z``), keys are strings, tuples are lists. The same object is
    returned when nothing changes (the common case: objects from JSON or the cluster)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None and value.utcoffset() == datetime.timedelta(0):
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if depth > 100:
        return value
    if isinstance(value, Mapping):
        changed = kind is not dict
        out: dict[str, Any] = {}
        for key, item in value.items():
            new = as_json(item, depth + 1)
            changed = changed or new is not item or type(key) is not str
            out[key if type(key) is str else str(key)] = new
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [as_json(item, depth + 1) for item in value]
        if kind is list and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items
    return value


def measured(*values: Any) -> tuple[int, int]:
    size, width = 0, 0
    for value in values:
        s, w = measure(value)
        size, width = size + s, max(width, w)
    return size, width


class Activation:
    """The values of one evaluation, converted for the engine once per change of ``variables``.

    ``variables`` are composited as the API server does: each in order, seeing those before it; a
    variable that fails makes every expression that reads it fail with its error, the others run."""

    def __init__(self, values: Mapping[str, Any], names: Sequence[str]) -> None:
        self.values: dict[str, Any] = {name: values.get(name) for name in names}
        self.values["variables"] = {}
        self.failed: dict[str, str] = {}
        self._names = tuple(names)
        self._bound: celengines.Bound | None = None

    def set_variable(self, name: str, value: Any) -> None:
        self.values["variables"] = {**self.values["variables"], name: value}
        self._bound = None

    def bound(self) -> celengines.Bound:
        if self._bound is None:
            try:
                self._bound = engine(self._names).bind(self.values)
            except celengines.CelEvalError as exc:
                raise EvalError(str(exc)) from None
        return self._bound


def run(expression: Expression, activation: Activation, meter: Meter) -> Any:
    """The expression's value; :class:`EvalError` for a run-time error or a cost limit."""
    assert expression.program is not None, "unsupported expressions are not run"
    for name in sorted(expression.uses):
        if name in activation.failed:
            raise EvalError(f'composited variable "{name}" fails to evaluate: {activation.failed[name]}')
    budgets.spend("admission policies")
    meter.charge(expression)
    try:
        return plain(expression.program.run(activation.bound()))
    except celengines.CelEvalError as exc:
        raise EvalError(str(exc)) from None


def plain(value: Any, depth: int = 0) -> Any:
    """A result as plain Python: cel-expr-python hands back lists and maps whose items are lazy
    accessors (``plain_value()``), which a later binding (a variable read by another expression) cannot
    convert."""
    if depth > 100:
        raise EvalError("value nests too deep")
    if hasattr(value, "plain_value"):
        return plain(value.plain_value(), depth + 1)
    if isinstance(value, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, depth + 1) for v in value]
    return value
