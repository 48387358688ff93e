"""Offline CEL: a CRD version's ``x-kubernetes-validations`` rules judged as the API server judges them.

In a cluster the API server evaluates these rules before the webhook is called; offline (``routegate
check``) and for forged reviews nobody does, so a dry run could pass what ``kubectl apply`` rejects.
:class:`CelValidator` compiles every rule of one ``openAPIV3Schema`` once and evaluates them against a
defaulted object, with the API server's messages and field paths.

Finding codes (``docs/CEL.md``):

- ``RG0300`` deny: a rule evaluated to false. Message as the API server (>= 1.35) writes it after the
  path: ``Invalid value: <rule message>`` on object/array nodes, ``Invalid value: "v": <message>`` on
  scalar nodes (reason FieldValueInvalid; ``Required value:``, ``Forbidden:``, ``Duplicate value``
  for the other reasons).
- ``RG0301`` warn: a rule could not be compiled or evaluated by the engine (not the object's fault);
  counted in :data:`COUNTERS`.
- ``RG0302`` deny: the object exceeds the evaluation budget (time or estimated cost); no further rules run.
- ``RG0303`` deny: the rule failed at run time because of the object (``no such key``, index out of
  bounds, an unparsable duration, ...), which the API server also rejects.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from validators import cputime, texts
from validators.cel import celengines, celmirror, celprograms, celwhole
from validators.codes import RuleInfo
from validators.findings import Finding, PathPart, Severity

Path = tuple[PathPart, ...]

__all__ = ["COST_LIMIT", "COUNTERS", "RULE_INFOS", "CelValidator", "engine_name"]

COST_LIMIT = 1_000_000  # the API server's per-expression PerCallLimit, applied to our size estimate
# the largest object the shaped mirror judges without CEL's copy: converting it could not come near the
# time budget, so skipping the conversion cannot skip a budget stop
SHAPED_NODES = 10_000
UNCOUNTED = -1  # validate(plain_nodes=): the caller did not count the object
COUNTERS: dict[str, int] = {"compile_errors": 0, "eval_errors": 0, "budget_exceeded": 0, "rules_failed": 0}

RULE_FAILED, ENGINE_ERROR, BUDGET_EXCEEDED, RULE_ERROR = "RG0300", "RG0301", "RG0302", "RG0303"
_OBJECT_ERRORS = ("no such key", "out of range", "division by zero", "modulus by zero", "conversion failed",
                  "cannot convert string", "integer overflow", "invalid regular expression")
_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"

_SUMMARIES = (
    (RULE_FAILED, Severity.DENY, "A CRD x-kubernetes-validations (CEL) rule is false (API server message)."),
    (ENGINE_ERROR, Severity.WARN, "A CEL rule could not be compiled or evaluated offline; not checked."),
    (BUDGET_EXCEEDED, Severity.DENY, "CEL evaluation ran out of its time/cost budget; no further rules ran."),
    (RULE_ERROR, Severity.DENY, "A CEL rule failed at run time because of the object (e.g. no such key)."),
)
RULE_INFOS: tuple[RuleInfo, ...] = tuple(RuleInfo(c, s, t) for c, s, t in _SUMMARIES)

_engine: celengines.Engine | None = None


def _shared_engine() -> celengines.Engine:
    global _engine  # one environment per process: building it declares ~40 overloads
    if _engine is None:
        _engine = celengines.load()
    return _engine


def engine_name() -> str:
    """The CEL engine in use (``cel-expr-python`` or ``common-expression-language``)."""
    try:
        return _shared_engine().name
    except ImportError:
        return "none"


def _failed(reason: str, node: Any, type_name: str, detail: str) -> str:
    """A failed rule as ``field.Error`` prints it after the path (apimachinery ``ErrorBody``).

    Since Kubernetes 1.35 (kubernetes#132798, #133832) the bad value of an object or array node is
    omitted and a scalar node shows its value, where older servers printed the schema type
    (``Invalid value: "object": ...``).
    """
    if reason == "FieldValueRequired":
        return f"Required value: {detail}"
    if reason == "FieldValueForbidden":
        return f"Forbidden: {detail}"
    head = "Duplicate value" if reason == "FieldValueDuplicate" else "Invalid value"
    if type_name not in ("object", "array"):
        head += f": {texts.quote(node)}"
    return head if reason == "FieldValueDuplicate" else f"{head}: {detail}"  # Duplicate carries no detail


def _errored(type_name: str, detail: str) -> str:
    """Errors other than a false rule still print the schema type as the value."""
    return f'Invalid value: "{type_name}": {detail}'


def _same(old: Any, new: Any) -> bool:
    try:
        return bool(old == new)
    except Exception:  # e.g. RecursionError on a very deep object: no answer, the walk decides
        return False


@dataclass(slots=True)
class _Run:
    deadline: float
    budget: float
    findings: list[Finding] = field(default_factory=list)
    memo: celprograms.Memo = field(default_factory=celprograms.Memo)  # obj and old outlive the run
    stopped: bool = False
    evaluated: int = 0


class CelValidator:
    """The compiled rules of one CRD version; cache one per schema (compiling is the slow part)."""

    def __init__(self, root: celprograms.Site, *, kind: str, engine: celengines.Engine | None) -> None:
        self.kind = kind
        self.engine = engine.name if engine is not None else "none"
        self._engine = engine
        self._root = root
        rules = [r for site in root.walk() for r in site.rules]
        self.rule_count = len(rules)
        self.compile_errors = tuple(f"{r.rule}: {r.error}" for r in rules if r.program is None)
        self._whole: celwhole.Whole | None = None
        self._mirror: celmirror.Mirror | None = None
        self._shaped: celmirror.Mirror | None = None
        self.mirrored = True  # False: always ask the engine (the differential tests compare both)
        self._whole_built = False

    @classmethod
    def compile(cls, schema: Mapping[str, Any], *, kind: str,
                engine: celengines.Engine | None = None) -> CelValidator:
        """Compile every rule in ``schema`` (an ``openAPIV3Schema``); never raises on a bad schema."""
        try:
            chosen = engine or _shared_engine()
        except ImportError as e:
            COUNTERS["compile_errors"] += 1
            return _Unavailable(kind=kind, why=str(e))
        root = celprograms.compile_schema(schema, chosen)
        validator = cls(root, kind=kind, engine=chosen)
        COUNTERS["compile_errors"] += len(validator.compile_errors)
        return validator

    def validate(self, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None,
                 budget_seconds: float = 0.5, shaped: bool = False,
                 plain_nodes: int | None = UNCOUNTED) -> list[Finding]:
        """Findings for ``obj`` (defaulted already); ``old`` on UPDATE enables transition rules.
        ``shaped``: ``obj`` is ``structural``'s output for this schema (pruned and defaulted), which
        lets a new object be proven without CEL's copy of it (``celmirror``'s shaped reading);
        ``plain_nodes``: ``celprograms.plain_size(obj)`` without a limit when the caller counted it
        (``structural.Structured.plain_nodes``; None: not plain)."""
        # CPU time of this thread, not wall time: on a busy machine (a burst of reviews) a valid object
        # must not run out of budget because other threads held the CPU.
        start = cputime.now()
        if self._passes_whole(obj, old, start + budget_seconds, shaped=shaped, plain_nodes=plain_nodes):
            return []
        run = _Run(deadline=start + budget_seconds, budget=budget_seconds)
        run.memo.deadline = run.deadline
        try:
            self._walk(obj, old, self._root, (), run)
        except RecursionError:
            run.findings.append(self._engine_error((), "the object is nested too deeply to evaluate"))
        except Exception as e:  # the contract is findings, never an exception; say what went wrong
            run.findings.append(self._engine_error((), f"internal error {type(e).__name__}: {e}; rules not checked"))
        return run.findings

    def _passes_whole(self, obj: Any, old: Any, deadline: float, *, shaped: bool = False,
                      plain_nodes: int | None = UNCOUNTED) -> bool:
        """Whether every rule that applies to a new ``obj`` is true, by one engine call (``celwhole``);
        False says nothing: the walk then judges the object as if this had not run. Taken only where
        the walk could not stop on the budget: within the time left, and with no rule's cost estimate
        over the limit (the object's size bounds every node's).

        On UPDATE it also answers when no rule can see the old object (``Whole.old_blind``): the walk
        then runs a subset of the same rules on the same new nodes (ratcheting only skips rules), and
        the old object converts for CEL as a whole, so none of its parts would fail to convert.

        A ``shaped`` object of at most :data:`SHAPED_NODES` plain nodes is first put to the shaped
        mirror, which reads it without CEL's copy; a proof there is the answer the rest of this
        method would give (the copy would convert: ``plain_size``; its size is at most the counted
        one, so the cost bound holds too), anything else takes the rest of the method."""
        if self._engine is None or obj is None:
            return False
        if not self._whole_built:  # racing threads build the same program; the later store wins
            self._whole = celwhole.compile_whole(self._root, self._engine)
            mirrored = self._whole is not None and self.mirrored
            self._mirror = celmirror.compile_mirror(self._root) if mirrored else None
            self._shaped = celmirror.compile_mirror(self._root, shaped=True) if mirrored else None
            self._whole_built = True
        whole = self._whole
        if whole is None or (old is not None and not whole.old_blind) or cputime.now() > deadline:
            return False
        try:
            memo = celprograms.Memo(deadline, keep=False)
            if old is not None:
                celprograms.whole_to_cel(old, self._root, memo)
            if shaped and self._shaped is not None and (old is None or not _same(old, obj)):
                counted = celprograms.plain_size(obj, SHAPED_NODES) if plain_nodes == UNCOUNTED else plain_nodes
                if (counted is not None and counted <= SHAPED_NODES and whole.cost_bound(counted) <= COST_LIMIT
                        and self._shaped.proves(obj)):
                    return cputime.now() <= deadline
            value, size = celprograms.whole_to_cel(obj, self._root, memo)
        except celprograms.ConversionError:
            return False
        if whole.cost_bound(size) > COST_LIMIT:
            return False
        if old is not None and _same(old, obj):  # the walk would ratchet every node: no rule runs
            return cputime.now() <= deadline
        if memo.plain and self._mirror is not None and self._mirror.proves(value):
            return cputime.now() <= deadline  # the engine's program would be true (celmirror)
        try:
            bound = self._engine.bind({"self": value, "oldSelf": None, "__old": None, "__hasOld": False})
        except celengines.CelEvalError:
            return False
        return whole.program.holds(bound) and cputime.now() <= deadline

    # --- walking the object alongside the schema -------------------------------------------------

    def _walk(self, node: Any, old: Any, site: celprograms.Site, path: Path, run: _Run,
              parent_equal: bool = False) -> None:
        """``old`` is the correlated old node (None: none); ``parent_equal`` tells whether the nearest
        correlated ancestor is unchanged, which ratchets nodes that have no old node of their own."""
        if node is None or not site.live or run.stopped or len(path) > celprograms.MAX_DEPTH:
            return
        equal = (parent_equal or old == node) if old is not None else parent_equal
        if site.rules:
            self._evaluate(node, old, site, path, run, ratchet=equal)
        if isinstance(node, Mapping):
            old_map = old if isinstance(old, Mapping) else {}
            for name, child in site.properties.items():
                if child.live and name in node:
                    self._walk(node[name], old_map.get(name), child, (*path, name), run, equal)
            extra = site.additional
            if extra is not None and extra.live and not site.properties:
                for key, value in node.items():
                    if isinstance(key, str):
                        self._walk(value, old_map.get(key), extra, (*path, key), run, equal)
        elif isinstance(node, list) and site.items is not None and site.items.live:
            olds = self._correlate(node, old, site)
            for i, item in enumerate(node):
                self._walk(item, olds[i], site.items, (*path, i), run, equal)

    @staticmethod
    def _correlate(node: list[Any], old: Any, site: celprograms.Site) -> list[Any]:
        """Old items match new ones only in map lists, by their keys (``CorrelatedObject.Index``);
        items of atomic and set lists have no old item and ratchet with the list as a whole."""
        if site.list_type != "map" or not site.map_keys or not isinstance(old, list):
            return [None] * len(node)

        def key(item: Any) -> Any:
            return tuple(repr(item.get(k)) for k in site.map_keys) if isinstance(item, Mapping) else None

        by_key = {key(o): o for o in old if isinstance(o, Mapping)}
        return [by_key.get(key(item)) for item in node]

    # --- evaluating the rules of one node --------------------------------------------------------

    def _evaluate(self, node: Any, old: Any, site: celprograms.Site, path: Path, run: _Run, *,
                  ratchet: bool) -> None:
        try:
            memo = run.memo
            value, size = celprograms.to_cel(node, site, root=not path, memo=memo)
            old_value = None if old is None else celprograms.to_cel(old, site, root=not path, memo=memo)[0]
        except celprograms.OutOfTime as e:
            self._stop(run, path, site.type, str(e))
            return
        except celprograms.ConversionError as e:
            run.findings.append(self._engine_error(path, f"cannot hand this value to CEL: {e}"))
            return
        width = len(value) if isinstance(value, list | dict) else 1
        bound: celengines.Bound | None = None
        if self._engine is not None and cputime.now() <= run.deadline:
            # One engine call for every rule of the node. It is taken only where the per-rule loop
            # below would run each rule (all compile, none over the cost limit: their sum bounds the
            # call as one rule's limit bounds one rule), and only a true result is used: then every
            # rule is true and the loop would have found nothing. Otherwise the loop judges the node.
            plan = celprograms.plan(site, self._engine, has_old=old is not None, ratchet=ratchet)
            if not plan.rules:
                return
            if plan.conjunction is not None and plan.cost(size, max(1, width)) <= COST_LIMIT:
                bound = self._bind(value, old, old_value, path, run)
                if bound is None:
                    return
                if plan.conjunction.holds(bound):
                    run.evaluated += len(plan.rules)
                    return
        self._each_rule(old, site, path, run, ratchet=ratchet, value=value, old_value=old_value,
                        size=size, width=width, bound=bound)

    def _bind(self, value: Any, old: Any, old_value: Any, path: Path, run: _Run) -> celengines.Bound | None:
        """The node's variables bound once for all its rules; None (with the engine's finding) when the
        engine cannot take them."""
        assert self._engine is not None
        try:
            return self._engine.bind({"self": value, "oldSelf": old_value, "__old": old_value,
                                      "__hasOld": old is not None})
        except celengines.CelEvalError as e:
            run.findings.append(self._engine_error(path, str(e)))
            return None

    def _each_rule(self, old: Any, site: celprograms.Site, path: Path, run: _Run, *, ratchet: bool,
                   value: Any, old_value: Any, size: int, width: int, bound: celengines.Bound | None) -> None:
        """The rules of one node one by one, each with its own result, message and budget check."""
        for rule in site.rules:
            if cputime.now() > run.deadline:
                why = f"evaluation took longer than {run.budget:g}s after {run.evaluated} rules"
                self._stop(run, path, site.type, why)
                return
            if rule.transition and old is None and not rule.optional_old_self:
                continue
            if ratchet and not rule.transition:  # unchanged values keep passing (the API server warns)
                continue
            if rule.program is None:
                why = f"rule does not compile ({rule.error}); not checked: {rule.rule}"
                run.findings.append(self._engine_error(path, why))
                continue
            cost = size * max(1, width) ** max(0, rule.depth - 1) if rule.depth else size
            if cost > COST_LIMIT:
                why = f"estimated cost {cost} of rule {rule.display!r} exceeds {COST_LIMIT}"
                self._stop(run, path, site.type, why)
                return
            if bound is None and self._engine is not None:
                bound = self._bind(value, old, old_value, path, run)
            if bound is None:
                return
            run.evaluated += 1
            run.findings.extend(self._judge(rule, bound, site.type, path))

    def _judge(self, rule: celprograms.Rule, bound: celengines.Bound, type_name: str,
               path: Path) -> Iterator[Finding]:
        assert rule.program is not None
        try:
            result = rule.program.run(bound)
        except celengines.CelEvalError as e:
            text = str(e)
            if any(marker in text for marker in _OBJECT_ERRORS):
                COUNTERS["rules_failed"] += 1
                yield Finding(RULE_ERROR, _errored(type_name, f"{text} evaluating rule: {rule.display}"), path)
            else:
                why = f"rule could not be evaluated ({text}); not checked: {rule.rule}"
                yield self._engine_error(path, why)
            return
        if result is True:
            return
        if result is not False:
            why = f"rule evaluated to {result!r}, not a bool; not checked: {rule.rule}"
            yield self._engine_error(path, why)
            return
        COUNTERS["rules_failed"] += 1
        yield Finding(RULE_FAILED, _failed(rule.reason, bound.values["self"], type_name, self._message(rule, bound)),
                      (*path, *rule.field_path))

    @staticmethod
    def _message(rule: celprograms.Rule, bound: celengines.Bound) -> str:
        """messageExpression's result when it gives one clean line, else message, else the default."""
        if rule.message_program is not None:
            try:
                text = rule.message_program.run(bound)
            except celengines.CelEvalError:
                COUNTERS["eval_errors"] += 1
                text = None
            if isinstance(text, str) and text.strip() and "\n" not in text.strip():
                return text.strip()
        return rule.message.strip() or f"failed rule: {rule.rule.strip()}"

    def _engine_error(self, path: Path, detail: str) -> Finding:
        COUNTERS["eval_errors"] += 1
        return Finding(ENGINE_ERROR, f"CEL ({self.engine}): {detail}", path, Severity.WARN)

    @staticmethod
    def _stop(run: _Run, path: Path, type_name: str, why: str) -> None:
        COUNTERS["budget_exceeded"] += 1
        run.stopped = True
        run.findings.append(Finding(BUDGET_EXCEEDED, _errored(type_name, f"{_BUDGET} ({why})"), path))


class _Unavailable(CelValidator):
    """No engine importable: every validation says so once, as a warning (never a silent pass)."""

    def __init__(self, *, kind: str, why: str) -> None:
        super().__init__(celprograms.Site(), kind=kind, engine=None)
        self._why = why

    def validate(self, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None,
                 budget_seconds: float = 0.5, shaped: bool = False,
                 plain_nodes: int | None = UNCOUNTED) -> list[Finding]:
        COUNTERS["eval_errors"] += 1
        why = f"CEL rules of {self.kind} not checked: {self._why}"
        return [Finding(ENGINE_ERROR, why, (), Severity.WARN)]
