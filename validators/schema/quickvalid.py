"""A compiled yes/no form of the OpenAPI schema check: would the schema validator report no error at all?

jsonschema's ``iter_errors`` builds a validator for every subschema it descends into and an error
object for every problem, which made it most of the schema check's time, although nearly every object
is clean. :func:`compile_clean` turns a schema, once, into plain closures that answer only "is this
value clean?" for the keywords of ``schemakeywords.KEYWORDS``; ``schemas.check`` runs jsonschema only
when the answer is no, to word the findings as before.

The answer must be exact, not merely strict: ``not`` and ``oneOf`` turn a sub-answer around, so a
strict sub-answer would make its parent loose. Whatever is not mirrored exactly raises, and the caller
takes the jsonschema path: a keyword outside :data:`SUPPORTED` (every other keyword the validator knows,
e.g. ``uniqueItems``, ``patternProperties``), a keyword value of a shape jsonschema would treat
differently or crash on, a value that is not a plain JSON type (``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``: the per-node tables are keyed by exact type, so anything else is a
``KeyError``), and any exception at all. So "clean" here always means jsonschema finds nothing.

Each schema node compiles lazily (on the first value that reaches it) into a :class:`_Node`: a dict
from a value's type to the check for values of that type, with the keywords that cannot apply to that
type left out. The object's CPU budget (``validators.budgets``) is checked at the start and then every
:data:`SPEND_EVERY` objects, arrays or patterns, so a huge hostile object stays bounded without paying
for a clock read per node.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from validators import budgets
from validators.schema.schemaformats import _NO_MATCH, _UNANCHORED, FORMATS, go_pattern
from validators.schema.schemakeywords import KEYWORDS, _same

Check = Callable[[Any], bool]
NoneType = type(None)
JSON_TYPES: tuple[type, ...] = (dict, list, str, int, float, bool, NoneType)
SPEND_EVERY = 64

# The keywords mirrored here; any other keyword the validator knows makes its node unsure.
SUPPORTED = frozenset({
    "type", "enum", "format", "pattern", "required", "properties", "additionalProperties", "items",
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
    "minimum", "maximum", "multipleOf", "allOf", "anyOf", "oneOf", "not",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type",
})
_UNSUPPORTED = frozenset(KEYWORDS) - SUPPORTED

# Which JSON value types each jsonschema type name accepts; "integer" also takes integral floats.
_TYPE_NAMES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (NoneType,),
    "integer": (int,), "number": (int, float),
}


class Unsure(Exception):
    """The compiled check cannot answer exactly for this schema node; ask jsonschema."""


_spent = 0  # shared by all threads: a lost increment only moves the next budget check a little


def _tick(where: str) -> None:
    """Counts one object, array or pattern; checks the budget every SPEND_EVERY. The hot closures
    count inline and call this only when the count is due (it counts once more then: harmless)."""
    global _spent
    _spent += 1
    if _spent >= SPEND_EVERY:
        _spent = 0
        budgets.spend(where)


def _yes(value: Any) -> bool:
    return True


def _no(value: Any) -> bool:
    return False


def _unsure(value: Any) -> bool:
    raise Unsure


def never_clean(value: Any) -> bool:
    """The check of a schema nothing was compiled for: always ask jsonschema."""
    return False


def compile_clean(schema: Mapping[str, Any]) -> Check:
    """``check(value)`` is True only when the validator built from KEYWORDS reports no error for
    ``value``; False means "not shown clean" (errors, or an unsure node, or a failure): run jsonschema."""
    root = _Node(dict(schema))

    def clean(value: Any) -> bool:
        budgets.spend("properties")
        try:
            return root[type(value)](value)
        except Exception:  # Unsure, a KeyError for a non-JSON type, RecursionError, anything: ask jsonschema
            return False

    return clean


class _Node(dict[type, Check]):
    """The compiled form of one schema node: value type -> check. Compiled on first lookup, so a
    schema is compiled only as far as values reach into it (and a self-referencing one terminates)."""

    __slots__ = ("filled", "schema")

    def __init__(self, schema: Any) -> None:
        super().__init__()
        self.schema = schema
        self.filled = False

    def __missing__(self, key: type) -> Check:
        if self.filled:
            raise KeyError(key)  # not a plain JSON type
        self.update(_compile(self.schema))
        self.filled = True
        return self[key]


def _compile(schema: Any) -> dict[type, Check]:
    if schema is True:
        return dict.fromkeys(JSON_TYPES, _yes)
    if schema is False:
        return dict.fromkeys(JSON_TYPES, _no)
    if not isinstance(schema, dict) or not _UNSUPPORTED.isdisjoint(schema):
        return dict.fromkeys(JSON_TYPES, _unsure)
    try:
        checks = {t: _checks_for(t, schema) for t in JSON_TYPES}
    except Unsure:
        return dict.fromkeys(JSON_TYPES, _unsure)
    return {t: _all(found) for t, found in checks.items()}


def _all(checks: list[Check] | None) -> Check:
    if checks is None:
        return _no  # fails for every value of this type (e.g. a type mismatch)
    if not checks:
        return _yes
    if len(checks) == 1:
        return checks[0]
    chain = tuple(checks)

    def every(value: Any) -> bool:
        for check in chain:  # noqa: SIM110 (a plain loop: all() over a generator is slower here)
            if not check(value):
                return False
        return True

    return every


def _number(limit: Any) -> bool:
    return isinstance(limit, int | float) and not isinstance(limit, bool)


def _limit(schema: Mapping[str, Any], key: str) -> Any:
    limit = schema[key]
    if not _number(limit):
        raise Unsure  # jsonschema would compare (or crash on) a non-number
    return limit


def _checks_for(kind: type, schema: dict[str, Any]) -> list[Check] | None:
    """The checks of ``schema`` that apply to a value of type ``kind`` (None: none of them can pass)."""
    null_ok = kind is NoneType and schema.get("nullable") is True
    found: list[Check] = []
    if "type" in schema and not null_ok:
        type_check = _type(kind, schema["type"])
        if type_check is None:
            return None
        if type_check is not _yes:
            found.append(type_check)
    if schema.get("x-kubernetes-int-or-string") is True and not null_ok:
        if kind is float:
            found.append(float.is_integer)
        elif kind not in (str, int):
            return None
    if "enum" in schema and not null_ok and isinstance(schema["enum"], list):
        found.append(_enum(kind, schema["enum"]))
    if "format" in schema and not null_ok:
        fmt = schema["format"]
        check = FORMATS.get(fmt) if isinstance(fmt, str) else None
        if check is not None:
            found.append(check)
    if kind is str:
        found += _string(schema)
    elif kind is list:
        found += _array(schema)
    elif kind is dict:
        found += _object(schema)
    elif kind in (int, float):
        found += _numeric(schema)
    found += _combined(schema)
    return found


def _type(kind: type, types: Any) -> Check | None:
    wanted = [types] if isinstance(types, str) else types if isinstance(types, list) else []
    if not wanted:
        return _yes
    if not all(isinstance(t, str) and t in _TYPE_NAMES for t in wanted):
        raise Unsure  # jsonschema raises UnknownType, or ignores non-strings: not mirrored
    if any(kind in _TYPE_NAMES[t] for t in wanted):  # exact types: bool is not an "integer" here
        return _yes
    if kind is float and "integer" in wanted:
        return float.is_integer
    return None


def _enum(kind: type, enums: list[Any]) -> Check:
    if kind is str:
        strings = frozenset(e for e in enums if isinstance(e, str))
        return strings.__contains__
    members = tuple(enums)

    def one_of(value: Any) -> bool:
        return any(_same(value, e) for e in members)

    return one_of


def _string(schema: dict[str, Any]) -> list[Check]:
    """minLength, maxLength and pattern as one check (the common string node has all three)."""
    low = _limit(schema, "minLength") if "minLength" in schema else None
    high = _limit(schema, "maxLength") if "maxLength" in schema else None
    text = schema.get("pattern")
    if low is None and high is None and not isinstance(text, str):
        return []
    max_length = schema.get("maxLength")
    skip_above = max_length if isinstance(max_length, int) and not isinstance(max_length, bool) else None
    compiled = go_pattern(text) if isinstance(text, str) else None
    has_pattern = isinstance(text, str)

    # RE2's own match, as GoPattern.search calls it, without its two calls per value
    match = compiled._match if compiled is not None and _UNANCHORED is not None else None

    def string(value: str) -> bool:
        global _spent
        size = len(value)
        if (low is not None and size < low) or (high is not None and size > high):
            return False
        if not has_pattern or (skip_above is not None and size > skip_above):
            return True  # as jsonschema: no pattern runs on a value longer than maxLength
        _spent += 1
        if _spent >= SPEND_EVERY:
            _tick("pattern")
        if match is None:
            return compiled is not None and compiled.search(value)
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: GoPattern.search reads it as U+FFFD
            return compiled is not None and compiled.search(value)
        return bool(match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)

    return [string]


def _array(schema: dict[str, Any]) -> list[Check]:
    found: list[Check] = []
    if "minItems" in schema:
        low = _limit(schema, "minItems")
        found.append(lambda v: not len(v) < low)
    if "maxItems" in schema:
        high = _limit(schema, "maxItems")
        found.append(lambda v: not len(v) > high)
    kind = schema.get("x-kubernetes-list-type")
    if kind in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys")
        keys = [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
        found.append(_unique_set if kind == "set" else _unique_map(tuple(keys)))
    if "items" in schema:
        items = schema["items"]
        if not isinstance(items, dict):
            raise Unsure  # tuple-form items, or a boolean (Draft 4 jsonschema crashes on it): not mirrored
        found.append(_each(_Node(items)))
    return found


def _each(node: _Node) -> Check:
    def each(value: list[Any]) -> bool:
        global _spent
        _spent += 1
        if _spent >= SPEND_EVERY:
            _tick("items")
        for item in value:  # noqa: SIM110 (a plain loop: all() over a generator is slower here)
            if not node[type(item)](item):
                return False
        return True

    return each


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _unique_set(value: list[Any]) -> bool:
    if all(type(item) is str for item in value):
        return len(set(value)) == len(value)  # distinct strings have distinct canonical JSON
    return len({_canonical(item) for item in value}) == len(value)


def _unique_map(keys: tuple[str, ...]) -> Check:
    def unique(value: list[Any]) -> bool:
        seen: set[Any] = set()
        count = 0
        for item in value:
            if not isinstance(item, Mapping):
                continue  # as jsonschema's list_type: only objects have map keys
            ident = tuple(item.get(k) for k in keys)
            # str/None tuples compare as their canonical JSON does; others (1 == 1.0 == True) need it
            seen.add(ident if all(v is None or type(v) is str for v in ident)
                     else _canonical({k: item.get(k) for k in keys}))
            count += 1
        return len(seen) == count

    return unique


def _object(schema: dict[str, Any]) -> list[Check]:
    """required, min/maxProperties, properties and additionalProperties as one check."""
    names: tuple[str, ...] = ()
    if "required" in schema and isinstance(schema["required"], list):
        names = tuple(n for n in schema["required"] if isinstance(n, str))
    low = _limit(schema, "minProperties") if "minProperties" in schema else None
    high = _limit(schema, "maxProperties") if "maxProperties" in schema else None
    walks = "properties" in schema or "additionalProperties" in schema
    if not (names or walks) and low is None and high is None:
        return []
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise Unsure
    nodes = {name: _Node(sub) for name, sub in props.items()}
    has_extra = "additionalProperties" in schema
    extra = schema.get("additionalProperties")
    extra_node = _Node(extra) if isinstance(extra, dict) else None
    forbid = has_extra and extra_node is None and not extra
    budgeted = "properties" in schema

    required = frozenset(names)

    def fields(value: dict[str, Any]) -> bool:
        global _spent
        if required and not value.keys() >= required:
            return False
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            return False
        if not walks:
            return True
        if budgeted:
            _spent += 1
            if _spent >= SPEND_EVERY:
                _tick("properties")
        for key, item in value.items():
            node = nodes.get(key)
            if node is None:
                if extra_node is not None:
                    node = extra_node
                elif forbid:
                    return False
                else:
                    continue
            if not node[type(item)](item):
                return False
        return True

    return [fields]


def _numeric(schema: dict[str, Any]) -> list[Check]:
    found: list[Check] = []
    if "minimum" in schema:
        low = _limit(schema, "minimum")
        if schema.get("exclusiveMinimum", False):
            found.append(lambda v: not v <= low)
        else:
            found.append(lambda v: not v < low)
    if "maximum" in schema:
        high = _limit(schema, "maximum")
        if schema.get("exclusiveMaximum", False):
            found.append(lambda v: not v >= high)
        else:
            found.append(lambda v: not v > high)
    if "multipleOf" in schema:
        found.append(_multiple_of(_limit(schema, "multipleOf")))
    return found


def _multiple_of(step: int | float) -> Check:
    def multiple(value: int | float) -> bool:  # jsonschema's multipleOf, step for step
        if isinstance(step, float):
            quotient = value / step
            try:
                failed = int(quotient) != quotient
            except OverflowError:
                failed = (Fraction(value) / Fraction(step)).denominator != 1
        else:
            failed = bool(value % step)
        return not failed

    return multiple


def _subnodes(schema: dict[str, Any], key: str) -> list[_Node]:
    subs = schema[key]
    if not isinstance(subs, list):
        raise Unsure
    return [_Node(sub) for sub in subs]


def _combined(schema: dict[str, Any]) -> list[Check]:
    found: list[Check] = []
    if "allOf" in schema:
        all_of = _subnodes(schema, "allOf")
        found.append(lambda v: all(n[type(v)](v) for n in all_of))
    if "anyOf" in schema:
        any_of = _subnodes(schema, "anyOf")
        found.append(lambda v: any(n[type(v)](v) for n in any_of))
    if "oneOf" in schema:
        one_of = _subnodes(schema, "oneOf")
        found.append(lambda v: sum(1 for n in one_of if n[type(v)](v)) == 1)
    if "not" in schema:
        negated = _Node(schema["not"])
        found.append(lambda v: not negated[type(v)](v))
    return found
