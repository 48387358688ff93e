"""The whole-object CEL program of ``celwhole``, mirrored in Python for the values it can prove true.

``celchecks._passes_whole`` asks the C++ engine whether every rule of a new object holds. That call
costs far more than its rules suggest: the engine converts the whole bound value (~0.6 us per map
entry) and then interprets each operation at ~0.3 us. Most rules of the Gateway API CRDs are a few
``has()``, ``==`` and ``.size()`` tests, which plain Python answers several times faster.

:func:`compile_mirror` writes the rules of a :class:`~validators.cel.celprograms.Site` tree, for a
subset of CEL, as Python source: one function per site, walking the object as the ``celwhole``
program walks it. The answer is one-sided, like the conjunction it stands in for: ``True`` only when
every expression gave exactly the value CEL gives, and every rule came out ``true``; anything else (a
false rule, a CEL error, a value or operation outside the subset) is "not proven", and the caller
asks the engine as before. So every expression either gives CEL's value or raises :class:`Unsure`;
none absorbs an error the way CEL's commutative ``&&`` may (``Unsure`` where CEL would say ``false``
is always safe).

Two readings: of ``whole_to_cel``'s copy (CEL's escaped names, the root metadata cut), and ``shaped``,
of the object as ``structural`` left it, which ``schemas.check`` has at hand anyway: the code maps
CEL's names back to the declared ones through the schema sites it tracks (see :class:`_Source`), so
no copy is made for an object that is proven.

The subset: literals (decimal int, string, bool, null, list); ``self`` and the variables of macros;
``.field``, ``[index]``, ``has()``; ``! - + == != < <= > >= in && || ?:``; ``size``, ``startsWith``,
``endsWith``, ``contains``, ``matches`` (the same RE2 function the conjunction calls); the macros
``all``, ``exists``, ``exists_one``, ``filter``, ``map``; ``cel.bind``. Operands must be of one CEL
type (no heterogeneous ``==``, no ``int`` vs ``double``); any other function compiles to a closure
that raises :class:`Unsure` when reached. A rule text the parser does not take gives no mirror at all.

The bound value must also be one the engine converts as it is: ``celprograms.whole_to_cel`` (and,
for the shaped reading, ``structural``'s count or ``celprograms.plain_size``) marks an int outside
int64 (the engine makes it a ``uint``) or a string that is not valid UTF-8 (the engine fails), and
the caller then asks the engine. Comprehension iterations are capped at :data:`ITERATIONS`,
well under the engine's own cap, so no object the engine would refuse for its cap is proven here.
tests/validators/test_cel_mirror.py compares every mirrored rule and program with the engine.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from validators.cel import celfunctions, celprograms
from validators.cel.celprograms import Site

__all__ = ["ITERATIONS", "Mirror", "Unsure", "compile_mirror", "compile_rule", "rule_source"]

ITERATIONS = 2_000  # comprehension iterations per object; the engine's own cap is 10,000
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

NoneType = type(None)
_EQ_TYPES = frozenset({str, int, bool, NoneType})  # float left out: NaN and Python's identity shortcut in ``in``
_ORDER_TYPES = frozenset({str, int})


class Unsure(Exception):
    """CEL's answer is not known exactly here: an error, or an operation outside the subset."""


class _Unparsable(Exception):
    """The rule text is outside the subset the parser takes."""


# ------------------------------------------------------------------------------------------ parsing

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>[rR]?(?:'''|\"\"\"|'|"))
  | (?P<int>\d+(?![\w.]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>!+\-*/%?:.,()\[\]{}])
""", re.VERBOSE)
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
_KEYWORDS = frozenset({"true", "false", "null", "in"})
_MACROS = frozenset({"all", "exists", "exists_one", "filter", "map"})


def _string(text: str, pos: int, opener: str) -> tuple[str, int]:
    raw = opener[0] in "rR"
    quote = opener.lstrip("rR")
    out: list[str] = []
    i = pos
    while True:
        if i >= len(text):
            raise _Unparsable("unterminated string")
        if text.startswith(quote, i):
            return "".join(out), i + len(quote)
        c = text[i]
        if c == "\n" and len(quote) == 1:
            raise _Unparsable("newline in a string")
        if c == "\\" and not raw:
            nxt = text[i + 1 : i + 2]
            if nxt not in _ESCAPES:
                raise _Unparsable(f"escape \\{nxt}")
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        out.append(c)
        i += 1


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _Unparsable(f"unexpected {text[pos]!r}")
        kind = match.lastgroup
        assert kind is not None
        pos = match.end()
        if kind == "space":
            continue
        if kind == "string":
            value, pos = _string(text, pos, match.group())
            out.append(("lit", value))
        elif kind == "int":
            number = int(match.group())
            if number > INT_MAX:
                raise _Unparsable("int literal out of range")
            out.append(("lit", number))
        elif kind == "ident":
            name = match.group()
            if name in ("true", "false"):
                out.append(("lit", name == "true"))
            elif name == "null":
                out.append(("lit", None))
            elif name == "in":
                out.append(("op", "in"))
            else:
                out.append(("ident", name))
        else:
            out.append(("op", match.group()))
    out.append(("end", None))
    return out


class _Parser:
    """CEL's grammar (cel-spec ``langdef.md``) for the subset; the tree is nested tuples."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.at]

    def take(self, op: str | None = None) -> tuple[str, Any]:
        token = self.tokens[self.at]
        if op is not None and token != ("op", op):
            raise _Unparsable(f"expected {op!r}, got {token[1]!r}")
        self.at += 1
        return token

    def is_op(self, *ops: str) -> bool:
        kind, value = self.tokens[self.at]
        return kind == "op" and value in ops

    def parse(self) -> tuple[Any, ...]:
        tree = self.expr()
        if self.peek()[0] != "end":
            raise _Unparsable("trailing text")
        return tree

    def expr(self) -> tuple[Any, ...]:
        cond = self.binary(0)
        if self.is_op("?"):
            self.take()
            yes = self.binary(0)
            self.take(":")
            return ("cond", cond, yes, self.expr())
        return cond

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> tuple[Any, ...]:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.is_op(*self._LEVELS[level]):
            op = self.take()[1]
            left = ("op", op, left, self.binary(level + 1))
        return left

    def unary(self) -> tuple[Any, ...]:
        if self.is_op("!", "-"):
            op = self.take()[1]
            return ("not" if op == "!" else "neg", self.unary())
        return self.member()

    def args(self) -> list[tuple[Any, ...]]:
        self.take("(")
        out: list[tuple[Any, ...]] = []
        while not self.is_op(")"):
            out.append(self.expr())
            if not self.is_op(")"):
                self.take(",")
        self.take(")")
        return out

    def member(self) -> tuple[Any, ...]:
        tree = self.primary()
        while True:
            if self.is_op("."):
                self.take()
                kind, name = self.take()
                if kind != "ident":
                    raise _Unparsable("expected a field name")
                tree = self.call(name, tree, self.args()) if self.is_op("(") else ("sel", tree, name)
            elif self.is_op("["):
                self.take()
                index = self.expr()
                self.take("]")
                tree = ("index", tree, index)
            else:
                return tree

    def call(self, name: str, target: tuple[Any, ...] | None, args: list[tuple[Any, ...]]) -> tuple[Any, ...]:
        if target is not None and name in _MACROS and len(args) == 2:
            var = args[0]
            if var[0] != "id":
                raise _Unparsable("macro variable")
            return ("macro", name, target, var[1], args[1])
        if target == ("id", "cel") and name == "bind" and len(args) == 3:
            if args[0][0] != "id":
                raise _Unparsable("bind variable")
            return ("bind", args[0][1], args[1], args[2])
        return ("call", name, target, args)

    def primary(self) -> tuple[Any, ...]:
        kind, value = self.take()
        if kind == "lit":
            return ("lit", value)
        if kind == "ident":
            if self.is_op("("):
                args = self.args()
                if value == "has":
                    if len(args) != 1 or args[0][0] != "sel":
                        raise _Unparsable("has() takes a field selection")
                    return ("has", args[0][1], args[0][2])
                return self.call(value, None, args)
            return ("id", value)
        if (kind, value) == ("op", "("):
            tree = self.expr()
            self.take(")")
            return tree
        if (kind, value) == ("op", "["):
            items: list[tuple[Any, ...]] = []
            while not self.is_op("]"):
                items.append(self.expr())
                if not self.is_op("]"):
                    self.take(",")
            self.take("]")
            return ("list", items)
        raise _Unparsable(f"unexpected {value!r}")


# ------------------------------------------------------------------------- compiling to Python source
#
# Each CEL expression becomes one Python expression that evaluates to CEL's value or raises Unsure,
# with walrus temporaries (``_tN``) where a value is tested and then used; each site of the schema
# becomes one function. Calling small helpers only where an inline test would be long keeps the
# common rule (``has``, ``==`` against a literal, ``size``) to a few bytecodes.


def _U() -> Any:
    raise Unsure


def _B(value: Any) -> bool:
    if value is True or value is False:
        return value
    raise Unsure  # CEL: no such overload (a non-bool where a bool is needed)


def _ordered(x: Any, y: Any) -> None:
    if type(x) is not type(y) or type(x) not in _ORDER_TYPES:
        raise Unsure


def _lt(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return bool(x < y)


def _le(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return bool(x <= y)


def _gt(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return bool(x > y)


def _ge(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return bool(x >= y)


def _in(x: Any, y: Any) -> bool:
    if type(y) is dict and type(x) is str:
        return x in y
    if type(y) is list and type(x) in _EQ_TYPES:
        kind = type(x)
        for item in y:
            if type(item) is not kind:
                raise Unsure  # heterogeneous equality: not mirrored
        return x in y
    raise Unsure


def _int(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise Unsure  # CEL: integer overflow
    return value


def _add(x: Any, y: Any) -> Any:
    if type(x) is int and type(y) is int:
        return _int(x + y)
    if type(x) is str and type(y) is str:
        return x + y
    raise Unsure


def _sub(x: Any, y: Any) -> int:
    if type(x) is int and type(y) is int:
        return _int(x - y)
    raise Unsure


def _neg(x: Any) -> int:
    if type(x) is int:
        return _int(-x)
    raise Unsure


def _index(value: Any, key: Any) -> Any:
    if type(value) is list and type(key) is int and 0 <= key < len(value):
        return value[key]
    if type(value) is dict and type(key) is str and key in value:
        return value[key]
    raise Unsure  # CEL: index out of range, no such key, no such overload


def _matches(text: Any, pattern: Any) -> bool:
    if type(text) is not str or type(pattern) is not str:
        raise Unsure
    try:
        return celfunctions._matches(text, pattern)  # the function the conjunction's __matchesRe2 calls
    except (ValueError, UnicodeError):  # an invalid RE2 pattern, or a lone surrogate
        raise Unsure from None


def _members(count: list[int], value: Any, keys_ok: bool) -> Any:
    if type(value) is list or (keys_ok and type(value) is dict):
        count[0] += len(value)
        if count[0] > ITERATIONS:
            raise Unsure
        return value  # a map's keys serve all, exists and exists_one, which do not depend on order
    raise Unsure


def _all(count: list[int], value: Any, test: Callable[[Any], Any], keys_ok: bool = True) -> bool:
    for member in _members(count, value, keys_ok):
        result = test(member)
        if result is False:
            return False
        if result is not True:
            raise Unsure
    return True


def _exists(count: list[int], value: Any, test: Callable[[Any], Any], keys_ok: bool = True) -> bool:
    for member in _members(count, value, keys_ok):
        result = test(member)
        if result is True:
            return True
        if result is not False:
            raise Unsure
    return False


def _exists_one(count: list[int], value: Any, test: Callable[[Any], Any], keys_ok: bool = True) -> bool:
    found = 0
    for member in _members(count, value, keys_ok):
        found += _B(test(member))
    return found == 1


# The shaped reading's forms: lists only (structural's output has no map a macro may walk by its keys).
_all_l = functools.partial(_all, keys_ok=False)
_exists_l = functools.partial(_exists, keys_ok=False)
_exists_one_l = functools.partial(_exists_one, keys_ok=False)


def _in_l(x: Any, y: Any) -> bool:
    if type(y) is not list:
        raise Unsure
    return _in(x, y)


def _index_l(value: Any, key: Any) -> Any:
    if type(value) is not list:
        raise Unsure
    return _index(value, key)


def _filter(count: list[int], value: Any, test: Callable[[Any], Any]) -> list[Any]:
    return [member for member in _members(count, value, False) if _B(test(member))]


def _map(count: list[int], value: Any, test: Callable[[Any], Any]) -> list[Any]:
    return [test(member) for member in _members(count, value, False)]


_HELPERS: dict[str, Any] = {
    name: value for name, value in dict(globals()).items()
    if name in ("_U", "_B", "_lt", "_le", "_gt", "_ge", "_in", "_add", "_sub", "_neg", "_index", "_matches",
                "_all", "_exists", "_exists_one", "_filter", "_map", "_all_l", "_exists_l", "_exists_one_l",
                "_in_l", "_index_l")
}
_HELPERS["_SIZED"] = frozenset({str, list, dict})
_HELPERS["_SIZED_L"] = frozenset({str, list})
_HELPERS["_EQT"] = _EQ_TYPES
_ORDER_OPS = {"<": "_lt", "<=": "_le", ">": "_gt", ">=": "_ge"}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_STRING_METHODS = {"startsWith": "{t}.startswith({p})", "endsWith": "{t}.endswith({p})", "contains": "{p} in {t}"}

Code = tuple[str, str | None, Site | None]  # a Python expression, the type it surely gives (bool, int, str), its site
_ABSENT = None  # the shaped key of a CEL name that no map of the site can hold


class _Source:
    """Writes the Python source of rules and sites. No text of a rule reaches the source as it is:
    string literals and field names become constants in ``consts`` (``_kN``), CEL variables are
    identifiers matched by the tokenizer and prefixed (``v_x``), numbers are its digits, and everything
    else comes from the fixed templates below; an unknown function is ``_U()``.

    ``shaped``: the code reads the object as ``structural`` left it (declared names, not CEL's escaped
    ones) instead of ``whole_to_cel``'s copy. Each expression then carries the schema site its value
    belongs to where that is known (``self``, a field of a known site, an item of a known list), so
    ``p.__namespace__`` reads the key ``namespace``; a CEL name with ``__`` on a value of unknown site
    makes the rule unmirrored. A map is never sized, iterated, indexed or searched with ``in`` in this
    mode (its keys are CEL's escaped ones there): such an operation raises Unsure."""

    def __init__(self, *, shaped: bool = False) -> None:
        self.shaped = shaped
        self.temps = 0
        self.scope: list[tuple[str, Site | None]] = []
        self.consts: dict[str, Any] = {}

    def temp(self) -> str:
        self.temps += 1
        return f"_t{self.temps}"

    def const(self, value: Any) -> str:
        name = f"_k{len(self.consts)}"
        self.consts[name] = value
        return name

    def rule(self, tree: tuple[Any, ...], site: Site | None) -> Code:
        self.scope = [("self", site)]
        return self.of(tree)

    def of(self, tree: tuple[Any, ...]) -> Code:
        method: Callable[..., Code] = getattr(self, f"_{tree[0]}")
        return method(*tree[1:])

    def code(self, tree: tuple[Any, ...]) -> str:
        return self.of(tree)[0]

    def boolean(self, tree: tuple[Any, ...]) -> str:
        code, kind, _ = self.of(tree)
        return code if kind == "bool" else f"_B({code})"

    def tested(self, code: str) -> tuple[str, str]:
        """(the name to test, its binding form): a variable is used as it is, anything else via a temp."""
        if code.isidentifier():
            return code, code
        name = self.temp()
        return name, f"({name} := {code})"

    def key(self, site: Site | None, name: str) -> tuple[str | None, Site | None]:
        """The key that holds CEL's field ``name`` of a map of ``site``, and the field's site
        (``whole_to_cel``'s ``_members`` in reverse); ``_ABSENT``: CEL's copy cannot have the field."""
        if not self.shaped:
            return name, None
        if site is None:
            if "__" in name:
                raise _Unparsable(f"escaped name {name} on a value of unknown schema")
            return name, None
        names = site.names if site.names is not None else celprograms._site_names(site)
        if names:
            for declared, (cel_name, child) in names.items():
                if cel_name == name:
                    return declared, child
            if name in names:
                return _ABSENT, None  # a declared name CEL sees escaped: no map has it unescaped
            if site.additional is not None:
                return name, site.additional
            return (name, None) if site.preserve_unknown else (_ABSENT, None)
        return name, site.additional

    def _lit(self, value: Any) -> Code:
        if value is True or value is False:
            return repr(value), "bool", None
        if isinstance(value, str):
            return self.const(value), "str", None  # a constant: the text never meets Python's literal syntax
        return repr(value), "int" if type(value) is int else None, None

    def _id(self, name: str) -> Code:
        for var, site in reversed(self.scope):
            if var == name:
                return f"v_{name}", None, site
        raise _Unparsable(f"unknown name {name}")  # oldSelf, a type name, ...

    def _list(self, items: list[tuple[Any, ...]]) -> Code:
        if all(item[0] == "lit" for item in items):
            return self.const([item[1] for item in items]), None, None  # nothing here changes a list
        return "[" + ", ".join(self.code(item) for item in items) + "]", None, None

    def _sel(self, target: tuple[Any, ...], name: str) -> Code:
        code, _, site = self.of(target)
        key, child = self.key(site, name)
        if key is _ABSENT:
            return "_U()", None, None  # CEL: no such key (or no such overload on a non-map)
        value, bind = self.tested(code)
        k = self.const(key)
        return f"({value}[{k}] if type({bind}) is dict and {k} in {value} else _U())", None, child

    def _has(self, target: tuple[Any, ...], name: str) -> Code:
        code, _, site = self.of(target)
        key, _ = self.key(site, name)
        value, bind = self.tested(code)
        test = "False" if key is _ABSENT else f"{self.const(key)} in {value}"
        return f"({test} if type({bind}) is dict else _U())", "bool", None

    def _index(self, target: tuple[Any, ...], index: tuple[Any, ...]) -> Code:
        code, _, site = self.of(target)
        helper = "_index_l" if self.shaped else "_index"
        return f"{helper}({code}, {self.code(index)})", None, site.items if site is not None else None

    def _not(self, operand: tuple[Any, ...]) -> Code:
        return f"(not {self.boolean(operand)})", "bool", None

    def _neg(self, operand: tuple[Any, ...]) -> Code:
        return f"_neg({self.code(operand)})", "int", None

    def _cond(self, cond: tuple[Any, ...], yes: tuple[Any, ...], no: tuple[Any, ...]) -> Code:
        test = self.boolean(cond)
        (then, a, a_site), (other, b, b_site) = self.of(yes), self.of(no)
        return f"({then} if {test} else {other})", a if a == b else None, a_site if a_site is b_site else None

    def _op(self, op: str, left: tuple[Any, ...], right: tuple[Any, ...]) -> Code:
        if op == "&&":
            return f"({self.boolean(right)} if {self.boolean(left)} else False)", "bool", None
        if op == "||":
            return f"(True if {self.boolean(left)} else {self.boolean(right)})", "bool", None
        if op in _FLIPPED:
            literal = _typed_literal(right) or _typed_literal(left)
            if literal is not None:
                flip = _typed_literal(right) is None
                code, kind, _ = self.of(left if not flip else right)
                lit = self.code(right if not flip else left)
                test = f"{{}} {op if not flip else _FLIPPED[op]} {lit}"
                if kind == literal:
                    return f"({test.format(code)})", "bool", None
                value, bind = self.tested(code)
                return f"({test.format(value)} if type({bind}) is {literal} else _U())", "bool", None
        if op in ("==", "!="):
            (x_code, x_kind, _), (y_code, y_kind, _) = self.of(left), self.of(right)
            if x_kind is not None and x_kind == y_kind:
                return f"({x_code} {op} {y_code})", "bool", None
            x, x_bind = self.tested(x_code)
            y, y_bind = self.tested(y_code)
            kind = self.temp()
            return (f"({x} {op} {y} if ({kind} := type({x_bind})) is type({y_bind}) and {kind} in _EQT "
                    "else _U())"), "bool", None
        if op in _ORDER_OPS:
            return f"{_ORDER_OPS[op]}({self.code(left)}, {self.code(right)})", "bool", None
        if op == "in":
            if right[0] == "list" and right[1] and all(i[0] == "lit" and type(i[1]) is str for i in right[1]):
                options = self.const(frozenset(i[1] for i in right[1]))
                code, kind, _ = self.of(left)
                if kind == "str":
                    return f"({code} in {options})", "bool", None
                value, bind = self.tested(code)
                return f"({value} in {options} if type({bind}) is str else _U())", "bool", None
            helper = "_in_l" if self.shaped else "_in"
            return f"{helper}({self.code(left)}, {self.code(right)})", "bool", None
        if op in ("+", "-"):
            (x_code, x_kind, _), (y_code, y_kind, _) = self.of(left), self.of(right)
            helper = "_add" if op == "+" else "_sub"
            return f"{helper}({x_code}, {y_code})", x_kind if x_kind == y_kind and x_kind == "int" else None, None
        return "_U()", None, None  # * / %: not mirrored

    def _call(self, name: str, target: tuple[Any, ...] | None, args: list[tuple[Any, ...]]) -> Code:
        parts = [self.of(arg) for arg in args]  # every name must be known even where never reached
        if target is None:
            if name == "size" and len(parts) == 1:
                return self._size(parts[0][0]), "int", None
            return "_U()", None, None  # duration(), int(), type(), ...: raises where the object reaches it
        on, on_kind, _ = self.of(target)
        if name == "size" and not parts:
            return self._size(on), "int", None
        if name in _STRING_METHODS and len(parts) == 1:
            arg_code, arg_kind, _ = parts[0]
            checks = []
            text, arg = on, arg_code  # a value known to be a string is used as it is
            if on_kind != "str":
                text, bind = self.tested(on)
                checks.append(f"type({bind}) is str")
            if arg_kind != "str":
                arg, arg_bind = self.tested(arg_code)
                checks.append(f"type({arg_bind}) is str")
            test = _STRING_METHODS[name].format(t=text, p=arg)
            if not checks:
                return f"({test})", "bool", None
            return f"({test} if {' and '.join(checks)} else _U())", "bool", None
        if name == "matches" and len(parts) == 1:
            return f"_matches({on}, {parts[0][0]})", "bool", None
        return "_U()", None, None

    def _size(self, code: str) -> str:
        value, bind = self.tested(code)
        return f"(len({value}) if type({bind}) in {'_SIZED_L' if self.shaped else '_SIZED'} else _U())"

    def _bind(self, var: str, init: tuple[Any, ...], body: tuple[Any, ...]) -> Code:
        value, _, site = self.of(init)
        self.scope.append((var, site))
        try:
            inner, kind, inner_site = self.of(body)
        finally:
            self.scope.pop()
        return f"(lambda v_{var}: {inner})({value})", kind, inner_site

    def _macro(self, name: str, target: tuple[Any, ...], var: str, body: tuple[Any, ...]) -> Code:
        # a helper's loop calling a lambda: cheaper than a generator for the short lists rules walk
        over, _, site = self.of(target)
        self.scope.append((var, site.items if site is not None else None))
        try:
            test = self.code(body)
        finally:
            self.scope.pop()
        helper = f"_{name}_l" if self.shaped and name in ("all", "exists", "exists_one") else f"_{name}"
        kind = None if name in ("filter", "map") else "bool"
        return f"{helper}(_c, {over}, lambda v_{var}: {test})", kind, site if name == "filter" else None


def _typed_literal(tree: tuple[Any, ...]) -> str | None:
    """The Python type name of an int or string literal (compared inline), else None."""
    if tree[0] != "lit" or type(tree[1]) not in (int, str):
        return None
    return type(tree[1]).__name__


def rule_source(text: str, site: Site | None = None, *, shaped: bool = False) -> str | None:
    """The Python expression of one rule (``v_self`` the node, ``_c`` the iteration count), for tests."""
    try:
        return _Source(shaped=shaped).rule(_Parser(text).parse(), site)[0]
    except (_Unparsable, RecursionError):
        return None


def compile_rule(text: str, site: Site | None = None, *, shaped: bool = False) -> Callable[[Any], Any] | None:
    """``rule(self)``: CEL's value of one rule text for the node ``self`` (of ``site``, read as
    ``structural`` leaves it with ``shaped``), or Unsure; None when the text is outside the subset."""
    source = _Source(shaped=shaped)
    try:
        code = source.rule(_Parser(text).parse(), site)[0]
        namespace = {**_HELPERS, **source.consts}
        exec(compile(f"def rule(v_self, _c):\n    return {code}\n", "<cel mirror>", "exec"), namespace)  # noqa: S102 (see _Source)
    except (_Unparsable, RecursionError, SyntaxError, MemoryError):
        return None
    rule = namespace["rule"]
    return lambda value: rule(value, [0])


# ------------------------------------------------------------------------------- the whole object


class Mirror:
    """The mirrored ``celwhole`` program of one schema: ``proves(value)`` is True only when the engine's
    program would return true for ``value`` (``whole_to_cel``'s output, with ``Memo.plain``)."""

    __slots__ = ("_root", "source")

    def __init__(self, root: Callable[[Any, list[int]], bool], source: str) -> None:
        self._root = root
        self.source = source

    def proves(self, value: Any) -> bool:
        try:
            return self._root(value, [0]) is True
        except Exception:  # Unsure, RecursionError, or a value a closure did not expect: the engine decides
            return False


class _Unmirrored(Exception):
    pass


def compile_mirror(root: Site, *, shaped: bool = False) -> Mirror | None:
    """The :class:`Mirror` of ``root``'s rules, or None when a rule is outside the subset or the
    ``celwhole`` program would not exist (see ``celwhole.compile_whole``).

    ``shaped``: ``proves`` takes the object as ``structural`` leaves it (pruned and defaulted), not
    ``whole_to_cel``'s copy. That reading holds only where the two differ by CEL's escaped names alone:
    not with rules at the root (CEL sees the root metadata cut to its names), nor where the structural
    step keeps fields that CEL's copy prunes (``Site.keeps_undeclared``)."""
    if shaped and (any(s.keeps_undeclared for s in root.walk())
                   or any(celprograms.applies(r, has_old=False, ratchet=False) for r in root.rules)):
        return None
    source = _Source(shaped=shaped)
    functions: list[str] = []
    try:
        top = _site(root, source, functions, top=True)
        if top is None:
            return None
        text = "\n".join(functions)
        namespace = {**_HELPERS, **source.consts}
        exec(compile(text, "<cel mirror>", "exec"), namespace)  # noqa: S102 (see _Source)
    except (_Unmirrored, _Unparsable, RecursionError, SyntaxError, MemoryError):
        return None
    return Mirror(namespace[top], text)


def _site(site: Site, source: _Source, functions: list[str], *, top: bool = False) -> str | None:
    """The name of the function that is True when every rule at a node of ``site`` and below holds
    (``celwhole._Writer.node``, step for step); None when nothing runs there."""
    if not site.live:
        return None
    rules: list[str] = []
    for rule in site.rules:
        if not celprograms.applies(rule, has_old=False, ratchet=False):
            continue
        if rule.program is None or rule.optional_old_self:
            raise _Unmirrored
        code, kind, _ = source.rule(_Parser(rule.rule).parse(), site)
        rules.append(f"    if not {code}:\n        return False" if kind == "bool"
                     else f"    if ({code}) is not True:\n        return False")
    children: list[tuple[str, str]] = []
    if site.properties:
        for name, child in site.properties.items():
            if not child.live:
                continue
            cel_name = celprograms.escape(name)
            if cel_name is None or (top and name == "metadata"):
                raise _Unmirrored
            below = _site(child, source, functions)
            if below is not None:
                children.append((source.const(name if source.shaped else cel_name), below))
    additional = None
    if not site.properties and site.additional is not None and site.additional.live:
        additional = _site(site.additional, source, functions)
    items = _site(site.items, source, functions) if site.items is not None and site.items.live else None
    if not (rules or children or additional or items):
        return None
    name = f"_site{len(functions)}"
    lines = [f"def {name}(v_self, _c):", "    if v_self is None:", "        return True", *rules]
    if children or additional:
        lines.append("    if type(v_self) is dict:")
        for key, below in children:
            lines.append(f"        if {key} in v_self and not {below}(v_self[{key}], _c):\n            return False")
        if additional:
            lines.append(f"        for _m in v_self.values():\n            if not {additional}(_m, _c):\n"
                         "                return False")
    if items:
        lines.append(f"    if type(v_self) is list:\n        for _m in v_self:\n            if not {items}(_m, _c):\n"
                     "                return False")
    lines.append("    return True")
    functions.append("\n".join(lines))
    return name
