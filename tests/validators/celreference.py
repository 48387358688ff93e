"""The CEL walk as it was before the one-call-per-node fast path, kept whole as the reference the
differential tests compare :class:`validators.cel.celchecks.CelValidator` with.

It shares only the compiled :class:`~validators.cel.celprograms.Site` tree (the rules' programs) and
the message helpers; walking, conversion to CEL values, binding and judging are the original code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from validators.cel import celengines, celprograms
from validators.cel.celchecks import (
    _BUDGET,
    _OBJECT_ERRORS,
    BUDGET_EXCEEDED,
    COST_LIMIT,
    COUNTERS,
    ENGINE_ERROR,
    RULE_ERROR,
    RULE_FAILED,
    CelValidator,
    _errored,
    _failed,
)
from validators.cel.celprograms import ConversionError, OutOfTime, escape
from validators.findings import Finding, PathPart, Severity

Path = tuple[PathPart, ...]


@dataclass(slots=True)
class Memo:
    """Conversions of one evaluation, keyed by node identity, and the deadline they must meet.

    Every rule-bearing node on the way down binds its own subtree; the memo converts each subtree
    once (the caller keeps the nodes alive meanwhile), and the deadline stops a huge object early.
    """

    deadline: float = float("inf")
    done: dict[tuple[int, int, bool], tuple[Any, int]] = field(default_factory=dict)
    nodes: int = 0

    def tick(self) -> None:
        self.nodes += 1
        if not self.nodes % 1024 and time.thread_time() > self.deadline:
            raise OutOfTime(f"converting the object for CEL took too long ({self.nodes} nodes so far)")


def to_cel(value: Any, site: celprograms.Site | None, *, root: bool = False, depth: int = 0,
           memo: Memo | None = None) -> tuple[Any, int]:
    """``value`` as the API server shows it to CEL, and its node count (for the cost estimate)."""
    if depth > celprograms.MAX_DEPTH:
        raise ConversionError(f"value nested deeper than {celprograms.MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | str | int | float):
        return value, 1
    key = (id(value), id(site), root)
    if memo is not None:
        hit = memo.done.get(key)
        if hit is not None:
            return hit
        memo.tick()
    if isinstance(value, list | tuple):
        out, total = [], 1
        for item in value:
            conv, size = to_cel(item, site.items if site else None, depth=depth + 1, memo=memo)
            out.append(conv)
            total += size
        result: tuple[Any, int] = (out, total)
    elif isinstance(value, Mapping):
        result = _map(value, site, root=root, depth=depth, memo=memo)
    else:
        raise ConversionError(f"{type(value).__name__} is not a JSON value")
    if memo is not None:
        memo.done[key] = result
    return result


def _map(value: Mapping[Any, Any], site: celprograms.Site | None, *, root: bool, depth: int,
         memo: Memo | None) -> tuple[Any, int]:
    out: dict[str, Any] = {}
    total = 1
    structural = site is not None and bool(site.properties)
    for key, item in value.items():
        if not isinstance(key, str):
            raise ConversionError(f"map key {key!r} is not a string")
        child_memo = memo
        if structural and site is not None and key in site.properties:
            name = escape(key)
            if name is None:
                continue
            child: celprograms.Site | None = site.properties[key]
            if root and key == "metadata" and isinstance(item, Mapping):
                item = {k: v for k, v in item.items() if k in ("name", "generateName")}
                child_memo = None if memo is None else Memo(memo.deadline)  # fresh dict: its id is no key
        elif site is not None and site.additional is not None:
            name, child = key, site.additional
        elif structural and site is not None and not site.preserve_unknown:
            continue  # the API server prunes unknown fields before CEL sees the object
        else:
            name, child = key, None
        conv, size = to_cel(item, child, depth=depth + 1, memo=child_memo)
        out[name] = conv
        total += size
    return out, total


@dataclass(slots=True)
class _Run:
    deadline: float
    budget: float
    findings: list[Finding] = field(default_factory=list)
    memo: Memo = field(default_factory=lambda: Memo())
    stopped: bool = False
    evaluated: int = 0


class ReferenceValidator:
    """The original per-rule evaluation over the same compiled rules as ``validator``."""

    def __init__(self, validator: CelValidator) -> None:
        self.engine = validator.engine
        self._engine = validator._engine
        self._root = validator._root

    def validate(self, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None,
                 budget_seconds: float = 0.5) -> list[Finding]:
        """Findings for ``obj`` (defaulted already); ``old`` on UPDATE enables transition rules."""
        # CPU time of this thread, not wall time: on a busy machine (a burst of reviews) a valid object
        # must not run out of budget because other threads held the CPU.
        start = time.thread_time()
        run = _Run(deadline=start + budget_seconds, budget=budget_seconds)
        run.memo.deadline = run.deadline
        try:
            self._walk(obj, old, self._root, (), run)
        except RecursionError:
            run.findings.append(self._engine_error((), "the object is nested too deeply to evaluate"))
        except Exception as e:  # the contract is findings, never an exception; say what went wrong
            run.findings.append(self._engine_error((), f"internal error {type(e).__name__}: {e}; rules not checked"))
        return run.findings

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
            value, size = to_cel(node, site, root=not path, memo=memo)
            old_value = None if old is None else to_cel(old, site, root=not path, memo=memo)[0]
        except OutOfTime as e:
            self._stop(run, path, site.type, str(e))
            return
        except ConversionError as e:
            run.findings.append(self._engine_error(path, f"cannot hand this value to CEL: {e}"))
            return
        width = len(value) if isinstance(value, list | dict) else 1
        bound: celengines.Bound | None = None
        for rule in site.rules:
            if time.thread_time() > run.deadline:
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
                try:
                    bound = self._engine.bind({"self": value, "oldSelf": old_value, "__old": old_value,
                                               "__hasOld": old is not None})
                except celengines.CelEvalError as e:
                    run.findings.append(self._engine_error(path, str(e)))
                    return
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


