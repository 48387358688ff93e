"""CEL engines behind one small interface: compile a rule once, bind a node once, run rules on it.

``cel-expr-python`` (the official C++ runtime; RE2 regexes, Go-style durations) is preferred;
``common-expression-language`` (the Rust interpreter) is the fallback when the first is missing.
Values are bound once per schema node (:meth:`Engine.bind`) because converting the node to CEL
costs as much as running a rule, and one node carries up to ~15 rules. Evaluation errors surface as
:class:`CelEvalError`, compile errors as :class:`CelCompileError`; nothing else escapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from validators.cel import celfunctions

__all__ = ["Bound", "CelCompileError", "CelEvalError", "Conjunction", "CppEngine", "Engine", "Program", "RustEngine",
           "load"]

VARIABLES = ("self", "oldSelf", "__old", "__hasOld")
ITERATION_CAP = 10_000  # fixed in cel-expr-python 0.1.3, not configurable from Python (measured)


class CelCompileError(Exception):
    """The rule text does not compile (syntax, undeclared names, wrong result type)."""


class CelEvalError(Exception):
    """The rule failed at run time; ``str()`` is the engine's message in cel-go's words where known."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The variables of one node, plus the engine's converted form of them (built once)."""

    values: Mapping[str, Any]
    native: Any


class Program(Protocol):
    def run(self, bound: Bound) -> Any: ...


class Conjunction(Protocol):
    """Several rules of one node in one engine call: ``holds`` is True only when every rule is true."""

    def holds(self, bound: Bound) -> bool: ...


class Engine(Protocol):
    """``optional_old_self``: ``oldSelf`` is an optional (``optionalOldSelf: true`` rules), built from
    the ``__old``/``__hasOld`` bindings."""

    name: str

    def compile(self, expr: str, *, optional_old_self: bool = False) -> Program: ...

    def bind(self, values: Mapping[str, Any]) -> Bound: ...

    def rule_text(self, expr: str, *, optional_old_self: bool = False) -> str:
        """The text :meth:`compile` compiles for a rule, to embed in a :meth:`compile_holds` program."""
        ...

    def compile_holds(self, text: str) -> Conjunction | None:
        """``text`` (rules joined by ``&&``, see :meth:`rule_text`) as one program; None when it does
        not compile to a bool or the engine cannot promise that true means every rule is true."""
        ...


_CPP_INDEX = re.compile(r"Index error: index=(-?\d+) size=(\d+)")
_RUST_CONVERSION = re.compile(r"Function '(int|uint|double|duration|timestamp)' error")


def _normalise(message: str) -> str:
    """Say what cel-go (the API server) says for the common runtime errors."""
    status, sep, rest = message.partition(": ")
    text = rest if sep and status.isupper() else message  # drop absl's "INVALID_ARGUMENT: "
    if text.startswith("Key not found in map"):
        return "no such key: " + text.split(":", 1)[1].strip().strip('"')
    if text.startswith("No matching overloads found"):
        return "no such overload: " + text.split(":", 1)[1].strip()
    if (index := _CPP_INDEX.search(text)) is not None:
        return f"index '{index.group(1)}' out of range in list size '{index.group(2)}'"
    if text.startswith("index out of bounds: "):  # the Rust engine does not say the size
        return f"index '{text.rsplit(' ', 1)[1]}' out of range"
    if text in ("divide by zero", "division by zero in CEL expression"):
        return "division by zero"
    if text.startswith("Arithmetic overflow"):
        return "integer overflow"
    if (conversion := _RUST_CONVERSION.match(text)) is not None:
        return f"String to {conversion.group(1).capitalize()} conversion failed"
    return text


# --- cel-expr-python ---------------------------------------------------------------------------------


class _CppProgram:
    """A compiled C++ program; past the runtime's fixed iteration cap it re-runs on the spare engine."""

    __slots__ = ("_error", "_expr", "_optional", "_source", "_spare", "_spare_engine", "_spare_program")

    def __init__(self, expr: Any, source: str, optional: bool, spare: Callable[[], Engine | None],
                 error: Any) -> None:
        self._expr, self._source, self._optional = expr, source, optional
        self._spare, self._error = spare, error
        self._spare_program: Program | None = None
        self._spare_engine: Engine | None = None

    def run(self, bound: Bound) -> Any:
        try:
            result = self._expr.eval(bound.native)
            kind = result.type()
            value = result.value()
        except Exception as e:  # the binding raises on values it cannot convert, and on its iteration cap
            if "Iteration budget exceeded" in str(e):
                return self._run_spare(bound)
            raise CelEvalError(f"cannot evaluate: {e}") from None
        if kind == self._error:
            raise CelEvalError(_normalise(str(value)))
        return value

    def _run_spare(self, bound: Bound) -> Any:
        if self._spare_program is None or self._spare_engine is None:
            spare = self._spare()
            if spare is None:
                raise CelEvalError(f"more than the {ITERATION_CAP} comprehension iterations cel-expr-python "
                                   "allows per evaluation")
            self._spare_program = spare.compile(self._source, optional_old_self=self._optional)
            self._spare_engine = spare
        return self._spare_program.run(self._spare_engine.bind(bound.values))


class _CppConjunction:
    """CEL's ``&&`` is true only when both sides are true: an error or a non-bool on either side makes
    it an error and a false side makes it false, whatever the order. So a true result proves every
    rule true; anything else (false, error, the iteration cap) says nothing and the caller runs the
    rules one by one for their own results and messages."""

    __slots__ = ("_bool", "_expr")

    def __init__(self, expr: Any, bool_type: Any) -> None:
        self._expr, self._bool = expr, bool_type

    def holds(self, bound: Bound) -> bool:
        try:
            result = self._expr.eval(bound.native)
            return result.type() == self._bool and result.value() is True
        except Exception:  # the iteration cap, or a value the binding cannot convert: no verdict here
            return False


class CppEngine:
    """cel-expr-python: Kubernetes' functions registered as Python overloads of a custom extension."""

    name = "cel-expr-python"

    def __init__(self, variables: Sequence[str] = VARIABLES) -> None:
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

        types: Mapping[str, Any] = {
            "string": cel.Type.STRING, "bool": cel.Type.BOOL, "int": cel.Type.INT, "dyn": cel.Type.DYN,
            "list": cel.Type.List(cel.Type.DYN), "list_string": cel.Type.List(cel.Type.STRING),
            "map": cel.Type.Map(cel.Type.STRING, cel.Type.List(cel.Type.STRING)),
        }
        decls: dict[str, list[Any]] = {}
        for fn in celfunctions.FUNCTIONS:
            decls.setdefault(fn.name, []).append(cel.Overload(
                fn.overload, types[fn.result], [types[p] for p in fn.params], is_member=fn.member,
                impl=fn.impl))
        k8s = cel.CelExtension("kubernetes", [cel.FunctionDecl(n, o) for n, o in decls.items()])
        declared = {v: cel.Type.DYN for v in variables} | {"__hasOld": cel.Type.BOOL}
        self._env = cel.NewEnv(variables=declared, extensions=[
            ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
            ext_math.ExtMath(), ext_encoders.ExtEncoders(), k8s])
        self._result_ok = (cel.Type.BOOL, cel.Type.DYN, cel.Type.STRING)
        self._error_type = cel.Type.ERROR
        self._bool_type = cel.Type.BOOL
        self._spare: Engine | None = None
        self._spare_tried = False

    def spare(self) -> Engine | None:
        """The fallback engine, for rules past the C++ runtime's iteration cap (the cost estimate in
        ``celchecks`` already bounds them to the API server's per-call limit)."""
        if not self._spare_tried:
            self._spare_tried = True
            try:
                self._spare = RustEngine()
            except ImportError:  # the Rust engine's wheel is a separate third-party package
                self._spare = None
        return self._spare

    def rule_text(self, expr: str, *, optional_old_self: bool = False) -> str:
        if optional_old_self:  # a Python callable cannot return an optional; cel.bind can make one
            return f"cel.bind(oldSelf, __hasOld ? optional.of(__old) : optional.none(), ({expr}))"
        return expr

    def compile(self, expr: str, *, optional_old_self: bool = False) -> Program:
        source = expr
        expr = self.rule_text(expr, optional_old_self=optional_old_self)
        try:
            compiled = self._env.compile(expr)
            result = compiled.return_type()
        except Exception as e:
            raise CelCompileError(str(e).replace("\n", " ").strip()) from None
        if result not in self._result_ok:
            raise CelCompileError(f"expression evaluates to {result.name()}, not bool or string")
        return _CppProgram(compiled, source, optional_old_self, self.spare, self._error_type)

    def bind(self, values: Mapping[str, Any]) -> Bound:
        try:
            return Bound(values, self._env.Activation(dict(values)))
        except Exception as e:
            raise CelEvalError(f"cannot convert the value for CEL: {e}") from None

    def compile_holds(self, text: str) -> Conjunction | None:
        try:
            compiled = self._env.compile(text)
            if compiled.return_type() != self._bool_type:
                return None
        except Exception:  # e.g. a rule typed string: no conjunction, the rules run one by one
            return None
        return _CppConjunction(compiled, self._bool_type)


# --- common-expression-language -----------------------------------------------------------------------


class _RustProgram:
    __slots__ = ("_functions", "_optional", "_program")

    def __init__(self, program: Any, functions: Mapping[str, Callable[..., Any]], optional: bool) -> None:
        self._program, self._functions, self._optional = program, functions, optional

    def run(self, bound: Bound) -> Any:
        import cel

        context = bound.native
        try:
            if self._optional:
                variables = dict(bound.values)
                has_old = bool(variables.get("__hasOld"))
                variables["oldSelf"] = (cel.OptionalValue.of(variables.get("__old")) if has_old
                                        else cel.OptionalValue.none())
                context = cel.Context(variables=variables, functions=dict(self._functions))
            return self._program.execute(context)
        except KeyError as e:
            raise CelEvalError(f"no such key: {e.args[0] if e.args else ''}") from None
        except ZeroDivisionError:
            raise CelEvalError("division by zero") from None
        except TypeError as e:
            raise CelEvalError(f"no such overload: {e}") from None
        except Exception as e:  # the Rust binding raises for every runtime error
            raise CelEvalError(_normalise(str(e))) from None


class RustEngine:
    """common-expression-language: untyped; functions bound by name, member calls pass the receiver
    first. Its own ``cel.stdlib`` supplies the strings/lists/sets/math libraries."""

    name = "common-expression-language"

    def __init__(self) -> None:
        from cel import stdlib

        self._functions: dict[str, Callable[..., Any]] = {
            name: impl for library in stdlib.EXTENSIONS.values() for name, impl in library.items()}
        ours: dict[str, list[celfunctions.Fn]] = {}
        for fn in celfunctions.FUNCTIONS:
            ours.setdefault(fn.name, []).append(fn)
        for name, fns in ours.items():
            self._functions[name] = _dispatch(fns, self._functions.get(name))

    def compile(self, expr: str, *, optional_old_self: bool = False) -> Program:
        import cel

        try:
            program = cel.compile(expr)
        except Exception as e:
            raise CelCompileError(str(e).replace("\n", " ").strip()) from None
        return _RustProgram(program, self._functions, optional_old_self)

    def bind(self, values: Mapping[str, Any]) -> Bound:
        import cel

        try:
            return Bound(values, cel.Context(variables=dict(values), functions=dict(self._functions)))
        except Exception as e:
            raise CelEvalError(f"cannot convert the value for CEL: {e}") from None

    def rule_text(self, expr: str, *, optional_old_self: bool = False) -> str:
        return expr

    def compile_holds(self, text: str) -> Conjunction | None:
        """None: this interpreter's ``&&`` is not proven to be CEL's commutative one (errors, non-bools)."""
        return None


def _dispatch(fns: list[celfunctions.Fn], fallback: Callable[..., Any] | None) -> Callable[..., Any]:
    """One callable for a name: the overload whose first parameter fits the receiver and arity."""
    kinds: dict[str, type | tuple[type, ...]] = {"string": str, "list": list, "int": int, "bool": bool}

    def call(*args: Any) -> Any:
        for fn in fns:
            want = kinds.get(fn.params[0], object) if fn.params else object
            if len(args) == len(fn.params) and (not args or isinstance(args[0], want)):
                return fn.impl(*args)
        if fallback is not None:
            return fallback(*args)
        raise TypeError(f"no such overload: {fns[0].name}")

    return call


def load(prefer: str | None = None, *, variables: Sequence[str] = VARIABLES) -> Engine:
    """The first engine that imports; ``prefer`` names one explicitly (tests, benchmarks). ``variables``:
    the names an expression may use (CRD rules: ``self``...; admission policies declare their own);
    the C++ engine refuses any other name at compile time, the Rust one when it runs."""
    order: list[Callable[[], Engine]] = [lambda: CppEngine(variables), RustEngine]
    if prefer == RustEngine.name:
        order.reverse()
    errors = []
    for make in order:
        try:
            return make()
        except ImportError as e:
            errors.append(str(e))
    raise ImportError("no CEL engine available: " + "; ".join(errors))


def installed() -> dict[str, Engine]:
    """Every engine that imports, by name, preferred first (parity tests run rules on each)."""
    out: dict[str, Engine] = {}
    for make in (CppEngine, RustEngine):
        try:
            engine: Engine = make()
        except ImportError:
            continue
        out[engine.name] = engine
    return out
