"""A CRD schema's ``x-kubernetes-validations`` rules, compiled once, at the schema nodes they sit on.

:func:`compile_schema` turns an ``openAPIV3Schema`` into a tree of :class:`Site` values that mirrors
the schema (properties, items, additionalProperties), each carrying its compiled :class:`Rule`s and
whether any rule lives below it (so evaluation skips rule-free subtrees). :func:`to_cel` turns a node
of an object into the value the API server binds to ``self``: unknown fields pruned, property names
escaped (``namespace`` -> ``__namespace__``), root ``metadata`` cut to ``name``/``generateName``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from validators import cputime
from validators.cel import celengines, celfunctions
from validators.findings import PathPart

__all__ = ["ConversionError", "Memo", "OutOfTime", "Plan", "Rule", "Site", "compile_schema", "holds_text", "plain_size",
           "plan", "to_cel", "whole_to_cel"]

MAX_DEPTH = 64  # deeper values are refused (a structural schema this deep does not exist)

# k8s.io/apiserver/pkg/cel/escaping.go
_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
    "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
})
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")
_MACROS = re.compile(r"\.\s*(all|exists|exists_one|filter|map)\s*\($")
_OLD_SELF = re.compile(r"\boldSelf\b")
_FIELD_PATH = re.compile(r"""\.([A-Za-z_][A-Za-z0-9_-]*)|\[\s*'([^']*)'\s*\]|\[\s*"([^"]*)"\s*\]|\[(\d+)\]""")


class ConversionError(ValueError):
    """A value that cannot be handed to CEL (non-string map key, too deep, not JSON)."""


@functools.lru_cache(maxsize=4096)
def escape(name: str) -> str | None:
    """The CEL name of a property, or None when the API server makes it inaccessible."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    return (name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
            .replace("/", "__slash__"))


@dataclass(frozen=True, slots=True)
class Rule:
    rule: str
    message: str = ""
    message_expression: str = ""
    field_path: tuple[PathPart, ...] = ()
    reason: str = "FieldValueInvalid"
    optional_old_self: bool = False
    transition: bool = False  # references oldSelf: runs only on UPDATE with a correlated old node
    depth: int = 0  # deepest nesting of comprehension macros, for the cost estimate
    program: celengines.Program | None = None
    message_program: celengines.Program | None = None
    error: str = ""  # why the rule did not compile; program is None then

    @property
    def display(self) -> str:
        """What the API server quotes for a rule: its message, else its text (``ruleErrorString``)."""
        return (self.message or self.rule).strip()


@dataclass(slots=True)
class Site:
    type: str = ""
    rules: tuple[Rule, ...] = ()
    properties: dict[str, Site] = field(default_factory=dict)
    items: Site | None = None
    additional: Site | None = None
    preserve_unknown: bool = False
    list_type: str = "atomic"
    map_keys: tuple[str, ...] = ()
    live: bool = False  # a rule sits here or below
    # the structural step keeps fields here that CEL's copy prunes (additionalProperties: true beside
    # properties, the apiVersion/kind/metadata of an embedded resource)
    keeps_undeclared: bool = False
    plans: dict[tuple[bool, bool], Plan] = field(default_factory=dict, compare=False, repr=False)
    # each declared property's CEL name (None: inaccessible) and site, for ``whole_to_cel``; built on first use
    names: dict[str, tuple[str | None, Site]] | None = field(default=None, compare=False, repr=False)

    def walk(self) -> list[Site]:
        out = [self]
        for child in (*self.properties.values(), self.items, self.additional):
            if child is not None:
                out.extend(child.walk())
        return out


def applies(rule: Rule, *, has_old: bool, ratchet: bool) -> bool:
    """Whether ``rule`` runs on a node: transition rules need a correlated old node (unless oldSelf is
    optional), and an unchanged (ratcheted) node runs only its transition rules."""
    if rule.transition and not has_old and not rule.optional_old_self:
        return False
    return not (ratchet and not rule.transition)


@dataclass(frozen=True, slots=True)
class Plan:
    """The rules of one site that run for one (has an old node, ratcheted) case, and all of them
    joined into one program (None: some rule does not compile, or the engine cannot join them)."""

    rules: tuple[Rule, ...]
    conjunction: celengines.Conjunction | None
    flat: int  # rules that iterate nothing or one level: their estimated cost is the node's size
    deep: tuple[int, ...]  # the others' macro nesting depths

    def cost(self, size: int, width: int) -> int:
        """The summed cost estimate of every rule (``celchecks`` bounds each rule by the same formula)."""
        return size * self.flat + sum(size * int(width ** (d - 1)) for d in self.deep)


def holds_text(rule: Rule, engine: celengines.Engine) -> str:
    """The text of ``rule`` for a program whose true result alone is trusted (see ``plan``)."""
    text = celfunctions.precompiled_regexes(celfunctions.rewrite_formats(rule.rule))
    return f"({engine.rule_text(text, optional_old_self=rule.optional_old_self)})"


def plan(site: Site, engine: celengines.Engine | None, *, has_old: bool, ratchet: bool) -> Plan:
    """The :class:`Plan` of ``site`` for this case, built on first use and kept on the site."""
    key = (has_old, ratchet)
    hit = site.plans.get(key)
    if hit is None:  # two threads may both build it: the same value, and the dict store is atomic
        rules = tuple(r for r in site.rules if applies(r, has_old=has_old, ratchet=ratchet))
        conjunction = None
        if engine is not None and rules and all(r.program is not None for r in rules):
            conjunction = engine.compile_holds(" && ".join(holds_text(r, engine) for r in rules))
        hit = Plan(rules, conjunction, sum(1 for r in rules if r.depth <= 1),
                   tuple(r.depth for r in rules if r.depth > 1))
        site.plans[key] = hit
    return hit


def nesting(expr: str) -> int:
    """The deepest nesting of comprehension macros in ``expr`` (0 when it iterates nothing)."""
    blank = celfunctions.strip_strings(expr)
    stack: list[bool] = []
    deepest = 0
    for i, c in enumerate(blank):
        if c == "(":
            stack.append(bool(_MACROS.search(blank[max(0, i - 24) : i + 1])))
            deepest = max(deepest, sum(stack))
        elif c == ")" and stack:
            stack.pop()
    return deepest


def parse_field_path(text: str) -> tuple[PathPart, ...]:
    """``.spec.foo['a.b']`` -> ('spec', 'foo', 'a.b'); anything unparsable -> () (report at the node)."""
    out: list[PathPart] = []
    pos = 0
    for match in _FIELD_PATH.finditer(text):
        if match.start() != pos:
            return ()
        pos = match.end()
        dot, single, double, index = match.groups()
        out.append(int(index) if index is not None else (dot or single or double or ""))
    return tuple(out) if pos == len(text) else ()


def _rule(raw: Any, engine: celengines.Engine) -> Rule | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("rule"), str):
        return None
    text: str = raw["rule"]

    def text_of(key: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else ""

    optional = raw.get("optionalOldSelf") is True
    base = Rule(
        rule=text,
        message=text_of("message"),
        message_expression=text_of("messageExpression"),
        field_path=parse_field_path(text_of("fieldPath")),
        reason=text_of("reason") or "FieldValueInvalid",
        optional_old_self=optional,
        transition=bool(_OLD_SELF.search(celfunctions.strip_strings(text))),
        depth=nesting(text),
    )
    try:
        program = engine.compile(celfunctions.rewrite_formats(text), optional_old_self=optional)
        message_program = (engine.compile(celfunctions.rewrite_formats(base.message_expression))
                           if base.message_expression else None)
    except celengines.CelCompileError as e:
        return replace(base, error=str(e))
    return replace(base, program=program, message_program=message_program)


def compile_schema(schema: Any, engine: celengines.Engine, *, depth: int = 0) -> Site:
    """The :class:`Site` tree for ``schema``; malformed parts of the schema are treated as absent."""
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return Site()
    raw_rules = schema.get("x-kubernetes-validations")
    compiled = (_rule(x, engine) for x in raw_rules) if isinstance(raw_rules, list) else ()
    rules = tuple(r for r in compiled if r is not None)
    props = schema.get("properties")
    properties = ({k: compile_schema(v, engine, depth=depth + 1) for k, v in props.items()
                   if isinstance(k, str)} if isinstance(props, Mapping) else {})
    items = compile_schema(schema["items"], engine, depth=depth + 1) if isinstance(schema.get("items"),
                                                                                    Mapping) else None
    extra = schema.get("additionalProperties")
    additional = compile_schema(extra, engine, depth=depth + 1) if isinstance(extra, Mapping) else None
    keys = schema.get("x-kubernetes-list-map-keys")
    site = Site(
        type=schema["type"] if isinstance(schema.get("type"), str) else "",
        rules=rules,
        properties=properties,
        items=items,
        additional=additional,
        preserve_unknown=schema.get("x-kubernetes-preserve-unknown-fields") is True,
        list_type=str(schema.get("x-kubernetes-list-type") or "atomic"),
        map_keys=tuple(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else (),
        keeps_undeclared=extra is True or schema.get("x-kubernetes-embedded-resource") is True,
    )
    site.live = bool(rules) or any(c.live for c in (*properties.values(), items, additional) if c is not None)
    return site


class OutOfTime(ConversionError):
    """Converting the object took longer than the evaluation budget allows."""


@dataclass(slots=True)
class Memo:
    """Conversions of one evaluation, keyed by node identity, and the deadline they must meet.

    Every rule-bearing node on the way down binds its own subtree; the memo converts each subtree
    once (the caller keeps the nodes alive meanwhile), and the deadline stops a huge object early.
    """

    deadline: float = float("inf")
    done: dict[tuple[int, int, bool], tuple[Any, int]] = field(default_factory=dict)
    nodes: int = 0
    keep: bool = True  # False: one conversion of the whole object, where nothing is converted twice
    # whole_to_cel: False once the value holds what the C++ engine does not take as it is (an int outside
    # int64 becomes a uint, a string that is not valid UTF-8 fails), or anything not a plain JSON value
    plain: bool = True

    def tick(self) -> None:
        self.nodes += 1
        if not self.nodes % 1024 and cputime.now() > self.deadline:
            raise OutOfTime(f"converting the object for CEL took too long ({self.nodes} nodes so far)")


_SCALARS = frozenset({type(None), bool, str, int, float})  # exact types: subclasses take the long way


def to_cel(value: Any, site: Site | None, *, root: bool = False, depth: int = 0,
           memo: Memo | None = None) -> tuple[Any, int]:
    """``value`` as the API server shows it to CEL, and its node count (for the cost estimate)."""
    if depth > MAX_DEPTH:
        raise ConversionError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | str | int | float):
        return value, 1
    key = (id(value), id(site), root) if memo is not None and memo.keep else None
    if memo is not None:
        if key is not None:
            hit = memo.done.get(key)
            if hit is not None:
                return hit
        memo.tick()
    kind = type(value)
    if kind is list or kind is tuple or isinstance(value, list | tuple):
        result: tuple[Any, int] = _list(value, site.items if site else None, depth=depth, memo=memo)
    elif kind is dict or isinstance(value, Mapping):
        result = _map(value, site, root=root, depth=depth, memo=memo)
    else:
        raise ConversionError(f"{type(value).__name__} is not a JSON value")
    if memo is not None and key is not None:
        memo.done[key] = result
    return result


def _list(value: list[Any] | tuple[Any, ...], items: Site | None, *, depth: int,
          memo: Memo | None) -> tuple[Any, int]:
    # Scalars are copied in place rather than through a call each: most of an object's nodes are
    # scalars. Past MAX_DEPTH even a scalar item is refused, as the call would refuse it.
    inline = depth < MAX_DEPTH
    out = []
    total = 1
    for item in value:
        if inline and type(item) in _SCALARS:
            out.append(item)
            total += 1
            continue
        conv, size = to_cel(item, items, depth=depth + 1, memo=memo)
        out.append(conv)
        total += size
    return out, total


def _map(value: Mapping[Any, Any], site: Site | None, *, root: bool, depth: int,
         memo: Memo | None) -> tuple[Any, int]:
    out: dict[str, Any] = {}
    total = 1
    inline = depth < MAX_DEPTH
    for name, child, item, cut in _members(value, site, root):
        if inline and type(item) in _SCALARS:
            out[name] = item
            total += 1
            continue
        child_memo = memo if not cut or memo is None else Memo(memo.deadline, keep=memo.keep)  # fresh dict: no key
        conv, size = to_cel(item, child, depth=depth + 1, memo=child_memo)
        out[name] = conv
        total += size
    return out, total


def _members(value: Mapping[Any, Any], site: Site | None, root: bool,
             ) -> Iterator[tuple[str, Site | None, Any, bool]]:
    """(CEL name, site, value, whether it is the root metadata cut to its names) of each member CEL sees:
    properties under their escaped names, unknown fields pruned as the API server prunes them."""
    if site is None:
        names: dict[str, tuple[str | None, Site]] = {}
        additional = None
        prune = False
    else:
        names = site.names if site.names is not None else _site_names(site)
        additional = site.additional
        prune = bool(names) and not site.preserve_unknown
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            raise ConversionError(f"map key {key!r} is not a string")
        child: Site | None
        if names and key in names:
            name, child = names[key]
            if name is None:
                continue
            if root and key == "metadata" and isinstance(item, Mapping):
                yield name, child, {k: v for k, v in item.items() if k in ("name", "generateName")}, True
                continue
        elif additional is not None:
            name, child = key, additional
        elif prune:
            continue  # the API server prunes unknown fields before CEL sees the object
        else:
            name, child = key, None
        yield name, child, item, False


# ------------------------------------------------------------------ the whole object, compiled per site
#
# ``to_cel(obj, root, root=True, memo=Memo(deadline, keep=False))`` for the one-call path of a new
# object (``celchecks._passes_whole``), which converts every node once and keeps nothing: the same
# value, size and ConversionError cases, with each site's property names escaped once per site instead
# of once per key, and one call per plain dict or list instead of two. Anything that is not a plain
# dict, list or exact scalar is handed to :func:`to_cel` itself (tests/validators/test_cel_wholevalue.py
# compares both).


def _site_names(site: Site) -> dict[str, tuple[str | None, Site]]:
    names = site.names
    if names is None:  # two threads may both build it: the same value
        names = {key: (escape(key), child) for key, child in site.properties.items()}
        site.names = names
    return names


def whole_to_cel(value: Any, root: Site, memo: Memo) -> tuple[Any, int]:
    """``to_cel(value, root, root=True, memo=memo)`` for a ``memo`` that keeps nothing (``keep=False``)."""
    assert not memo.keep
    return _whole(value, root, 0, memo, True)


def _odd_scalar(item: Any) -> bool:
    """Whether the C++ engine takes this exact-typed scalar differently from CEL's view of JSON."""
    kind = type(item)
    if kind is str:
        if item.isascii():
            return False
        try:
            item.encode("utf-8")
        except UnicodeError:  # a lone surrogate
            return True
        return False
    return kind is int and not -0x8000000000000000 <= item <= 0x7FFFFFFFFFFFFFFF


def _whole(value: Any, site: Site | None, depth: int, memo: Memo, root: bool = False) -> tuple[Any, int]:
    kind = type(value)
    if depth > MAX_DEPTH or (kind is not dict and kind is not list):
        if kind in _SCALARS:
            if _odd_scalar(value):
                memo.plain = False
        else:
            memo.plain = False
        return to_cel(value, site, root=root, depth=depth, memo=memo)
    memo.tick()
    inline = depth < MAX_DEPTH
    total = 1
    if kind is list:
        items = site.items if site is not None else None
        out_list = []
        for item in value:
            if inline and type(item) in _SCALARS:
                if ((type(item) is str and not item.isascii()) or type(item) is int) and _odd_scalar(item):
                    memo.plain = False
                out_list.append(item)
                total += 1
                continue
            conv, size = _whole(item, items, depth + 1, memo)
            out_list.append(conv)
            total += size
        return out_list, total
    out: dict[str, Any] = {}
    for name, child, item, _ in _members(value, site, root):
        if not name.isascii() and _odd_scalar(str(name)):
            memo.plain = False
        if inline and type(item) in _SCALARS:
            if ((type(item) is str and not item.isascii()) or type(item) is int) and _odd_scalar(item):
                memo.plain = False
            out[name] = item
            total += 1
            continue
        conv, size = _whole(item, child, depth + 1, memo)
        out[name] = conv
        total += size
    return out, total



def plain_size(value: Any, limit: int) -> int | None:
    """The node count of ``value`` when it is plain JSON that ``whole_to_cel`` converts without error and
    the C++ engine takes as it is (see ``Memo.plain``), nested at most ``MAX_DEPTH - 1`` deep, with at
    most ``limit`` nodes; else None. It counts every node, so it is never below ``whole_to_cel``'s size
    of the same value (which leaves out what CEL does not see)."""
    try:
        kind = type(value)
        if kind is dict:
            total = _plain_map(value, 1, limit)
        elif kind is list:
            total = _plain_list(value, 1, limit)
        else:
            total = _plain_scalar(value)
    except _NotPlain:
        return None
    return total if total <= limit else None


class _NotPlain(Exception):
    pass


def _plain_scalar(item: Any) -> int:
    kind = type(item)
    if kind is str:
        if not item.isascii() and _odd_scalar(item):
            raise _NotPlain
    elif kind is int:
        if not -0x8000000000000000 <= item <= 0x7FFFFFFFFFFFFFFF:
            raise _NotPlain
    elif kind is not bool and kind is not float and item is not None:
        raise _NotPlain
    return 1


def _plain_map(value: dict[Any, Any], depth: int, limit: int) -> int:
    for key in value:
        if type(key) is not str or (not key.isascii() and _odd_scalar(key)):
            raise _NotPlain
    return _plain_list(value.values(), depth, limit)


def _plain_list(value: Iterable[Any], depth: int, limit: int) -> int:
    """The nodes of a container's members plus its own (a list's items, a map's values: its keys are
    checked by ``_plain_map``)."""
    # depth: that of the members; whole_to_cel refuses any value deeper than MAX_DEPTH
    if depth >= MAX_DEPTH:
        raise _NotPlain
    total = 1
    for item in value:
        kind = type(item)
        if kind is str:
            if not item.isascii() and _odd_scalar(item):
                raise _NotPlain
            total += 1
        elif kind is dict:
            total += _plain_map(item, depth + 1, limit)
        elif kind is list:
            total += _plain_list(item, depth + 1, limit)
        else:
            total += _plain_scalar(item)
    if total > limit:
        raise _NotPlain
    return total
