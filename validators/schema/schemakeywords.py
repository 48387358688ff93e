"""jsonschema keyword functions for Kubernetes' OpenAPI v3 dialect (structural CRD schemas).

Draft 4 is the base (OpenAPI 3.0's ``exclusiveMaximum`` is a boolean, as in Draft 4). Overridden or
added here, each a small generator as jsonschema's own keywords are: ``type`` and ``enum`` honour
``nullable``; ``x-kubernetes-int-or-string``; ``x-kubernetes-list-type`` set/map uniqueness; ``format``
with the API server's formats; ``pattern`` with Go semantics on RE2 (linear time, and never on a value
longer than ``maxLength``); ``required`` reporting the missing field's own path, as the API server
does. ``properties``, ``items`` and ``pattern`` check the object's CPU budget (``validators.budgets``).
``$ref`` is dropped: CRD schemas may not use it, and resolving one could mean I/O.

``quickvalid`` mirrors these keywords as a compiled yes/no check (jsonschema then runs only for objects
it does not show clean): a change here needs the same change there (tests/validators/test_quickvalid.py
compares the two).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jsonschema import Draft4Validator, TypeChecker
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from validators import budgets
from validators.schema.schemaformats import FORMATS, go_pattern, pattern_problem

Keyword = Callable[[Validator, Any, Any, Mapping[str, Any]], Iterator[ValidationError]]

PATTERN_UNCHECKED = "x-pattern-unchecked"
DUPLICATE = "x-kubernetes-list-type"


def _is_integer(checker: TypeChecker, instance: Any) -> bool:
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())


def _is_number(checker: TypeChecker, instance: Any) -> bool:
    return isinstance(instance, int | float) and not isinstance(instance, bool)


TYPES = Draft4Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})


def _nullable_none(instance: Any, schema: Mapping[str, Any]) -> bool:
    return instance is None and schema.get("nullable") is True


def type_(
    validator: Validator, types: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if _nullable_none(instance, schema):
        return
    wanted = [types] if isinstance(types, str) else list(types) if isinstance(types, list) else []
    if wanted and not any(validator.is_type(instance, t) for t in wanted if isinstance(t, str)):
        yield ValidationError(f"must be of type {' or '.join(str(t) for t in wanted)}")


def enum(
    validator: Validator, enums: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if _nullable_none(instance, schema) or not isinstance(enums, list):
        return
    if not any(_same(instance, e) for e in enums):
        yield ValidationError("unsupported value")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def int_or_string(
    validator: Validator, on: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if on is not True or _nullable_none(instance, schema):
        return
    if not (isinstance(instance, str) or _is_integer(TYPES, instance)):
        yield ValidationError("must be of type int-or-string")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def list_type(
    validator: Validator, kind: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, list) or kind not in ("set", "map"):
        return
    keys = schema.get("x-kubernetes-list-map-keys")
    keys = [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
    seen: set[str] = set()
    for i, item in enumerate(instance):
        if kind == "map":
            if not isinstance(item, Mapping):
                continue
            ident: Any = {k: item.get(k) for k in keys}
        else:
            ident = item
        key = _canonical(ident)
        if key in seen:
            yield ValidationError("duplicate value", path=(i,), instance=ident, validator=DUPLICATE,
                                  validator_value=kind)
        seen.add(key)


def format_(
    validator: Validator, fmt: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    check = FORMATS.get(fmt) if isinstance(fmt, str) else None
    if check is not None and not _nullable_none(instance, schema) and not check(instance):
        yield ValidationError(f"must be of type {fmt}")


def _too_long(instance: str, schema: Mapping[str, Any]) -> bool:
    limit = schema.get("maxLength")
    return isinstance(limit, int) and not isinstance(limit, bool) and len(instance) > limit


def pattern(
    validator: Validator, text: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, str) or not isinstance(text, str):
        return
    if _too_long(instance, schema):
        return  # maxLength reports it; a pattern never runs on a value longer than the schema allows
    budgets.spend("pattern")
    compiled = go_pattern(text)
    if compiled is None:
        yield ValidationError("pattern not checked", validator=PATTERN_UNCHECKED,
                              validator_value=(text, pattern_problem(text)))
    elif not compiled.search(instance):
        yield ValidationError(f"should match '{text}'")


def _budgeted(keyword: Keyword, where: str) -> Keyword:
    """``keyword`` with the object's CPU budget checked first: the keywords that run once per value."""

    def checked(validator: Validator, value: Any, instance: Any, schema: Mapping[str, Any]
                ) -> Iterator[ValidationError]:
        budgets.spend(where)
        return keyword(validator, value, instance, schema)

    return checked


def required(
    validator: Validator, names: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, Mapping) or not isinstance(names, list):
        return
    for name in names:
        if isinstance(name, str) and name not in instance:
            yield ValidationError("Required value", path=(name,), instance=None)


KEYWORDS: dict[str, Keyword] = {
    **{k: v for k, v in Draft4Validator.VALIDATORS.items() if k not in ("$ref",)},
    "properties": _budgeted(Draft4Validator.VALIDATORS["properties"], "properties"),
    "items": _budgeted(Draft4Validator.VALIDATORS["items"], "items"),
    "type": type_,
    "enum": enum,
    "format": format_,
    "pattern": pattern,
    "required": required,
    "x-kubernetes-int-or-string": int_or_string,
    "x-kubernetes-list-type": list_type,
}
