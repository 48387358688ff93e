"""The schema check: prune, default, then validate an object against its CRD schema, and run CEL.

Mirrors the API server's order (decode, prune unknown fields, default, validate OpenAPI, validate CEL)
so that a forged AdmissionReview or an offline file gets the verdict the API server would give.
Validators are compiled once per schema and cached by schema identity; a new :class:`SchemaSet`
(new schema objects) simply compiles anew. Messages read like the API server's field errors, without
the field path (the finding carries it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from jsonschema import Draft4Validator
from jsonschema import validators as jsv
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from validators import codes
from validators.cel.celchecks import CelValidator
from validators.findings import Finding, PathPart, Severity
from validators.schema import quickvalid, structural
from validators.schema.schemakeywords import DUPLICATE, KEYWORDS, PATTERN_UNCHECKED, TYPES
from validators.texts import quote

KubeValidator = jsv.create(
    meta_schema=Draft4Validator.META_SCHEMA,
    validators=KEYWORDS,
    type_checker=TYPES,
    id_of=lambda schema: "",
)
CACHE_SIZE = 64
MAX_QUOTE = 120


class CelRules(Protocol):
    def validate(self, obj: Any, *, old: Any = None, budget_seconds: float = 0.5, shaped: bool = False,
                 plain_nodes: int | None = -1) -> list[Finding]: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    defaulted: Any  # the object as the API server would store it (pruned, defaulted)
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class Compiled:
    schema: Mapping[str, Any]
    validator: Validator
    cel: CelRules | None = None
    cel_error: str = ""
    clean: quickvalid.Check = quickvalid.never_clean  # True only when ``validator`` finds nothing
    shape: Callable[[Any], structural.Structured] | None = None  # structural.apply compiled for ``schema``


_cache: OrderedDict[int, Compiled] = OrderedDict()
_cache_lock = threading.Lock()  # the Gate runs checks in worker threads (asyncio.to_thread)


def compiled(schema: Mapping[str, Any], *, kind: str) -> Compiled:
    """The cached compiled form of ``schema`` (identity-keyed, LRU of :data:`CACHE_SIZE`).

    The entry keeps the schema alive, so its ``id`` cannot be reused by another schema while cached.
    """
    with _cache_lock:
        hit = _cache.get(id(schema))
        if hit is not None and hit.schema is schema:
            _cache.move_to_end(id(schema))
            return hit
        entry = Compiled(schema, KubeValidator(dict(schema)), *_compile_cel(schema, kind),
                         clean=quickvalid.compile_clean(schema), shape=structural.compile_apply(schema))
        _cache[id(schema)] = entry
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
        return entry


def _compile_cel(schema: Mapping[str, Any], kind: str) -> tuple[CelRules | None, str]:
    try:
        validator: CelRules = CelValidator.compile(schema, kind=kind)
    except Exception as e:  # a broken CEL rule must not break the schema check
        return None, f"{type(e).__name__}: {e}"
    return validator, ""


def check(obj: Any, schema: Mapping[str, Any], *, kind: str, old: Any = None,
          budget_seconds: float = 0.5, quick: bool = True) -> Outcome:
    """Prune, default, validate and run CEL rules; never raises for any JSON-like ``obj``.

    With ``quick`` (the default) pruning and defaulting run compiled for the schema, and jsonschema
    runs only when the compiled yes/no check (:mod:`quickvalid`) does not show the object clean;
    ``quick=False`` runs :func:`structural.apply` and jsonschema always, the from-scratch path the
    differential tests compare against. The Outcome is the same."""
    entry = compiled(schema, kind=kind)
    shape = entry.shape if quick and entry.shape is not None else (lambda o: structural.apply(o, schema))
    shaped = shape(obj)
    found = [
        Finding(codes.UNKNOWN_FIELD,
                f"unknown field {quote(str(path[-1]))}: not declared in the schema; the API server prunes it",
                path, Severity.WARN)
        for path in shaped.unknown
    ]
    if not (quick and entry.clean(shaped.value)):
        found += _schema_findings(entry.validator, shaped.value)
    found += _cel_findings(entry, shaped, old, shape, budget_seconds)
    return Outcome(shaped.value, tuple(found))


def _schema_findings(validator: Validator, value: Any) -> Iterator[Finding]:
    try:
        errors = list(validator.iter_errors(value))
    except RecursionError:
        yield Finding(codes.SCHEMA_INVALID, "Invalid value: the object is nested too deeply to validate")
        return
    for error in errors:
        yield to_finding(error)


def _cel_findings(entry: Compiled, shaped: structural.Structured, old: Any,
                  shape: Callable[[Any], structural.Structured], budget_seconds: float) -> list[Finding]:
    if entry.cel_error:
        return [Finding(codes.SCHEMA_UNCHECKED, f"CEL rules not checked: {entry.cel_error}", (),
                        Severity.WARN)]
    if entry.cel is None:
        return []
    try:
        old_value = shape(old).value if old is not None else None
        return list(entry.cel.validate(shaped.value, old=old_value, budget_seconds=budget_seconds, shaped=True,
                                       plain_nodes=shaped.plain_nodes))
    except Exception as e:  # CEL trouble is reported, never raised
        return [Finding(codes.SCHEMA_UNCHECKED, f"CEL rules not checked: {type(e).__name__}: {e}", (),
                        Severity.WARN)]


def _short(value: Any) -> str:
    text = quote(value)
    return text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 3] + "..."


def to_finding(error: ValidationError) -> Finding:
    """One jsonschema error as the API server would word it."""
    path: tuple[PathPart, ...] = tuple(error.absolute_path)
    keyword, limit, value = error.validator, error.validator_value, error.instance
    if keyword == DUPLICATE:
        return Finding(codes.DUPLICATE_ITEM, f"Duplicate value: {_short(value)}", path)
    if keyword == PATTERN_UNCHECKED:
        text, why = limit if isinstance(limit, tuple) else (limit, "")
        return Finding(codes.SCHEMA_UNCHECKED, f"pattern {text!r} is not valid RE2 syntax ({why}): not checked; "
                       "the API server rejects a CRD with such a pattern", path, Severity.WARN)
    return Finding(codes.SCHEMA_INVALID, message(error), path)


def message(error: ValidationError) -> str:
    keyword, limit, value = error.validator, error.validator_value, error.instance
    invalid = f"Invalid value: {_short(value)}"
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if keyword == "required":
        return "Required value"
    if keyword == "enum" and isinstance(limit, list):
        return f"Unsupported value: {_short(value)}: supported values: " + ", ".join(quote(v) for v in limit)
    if keyword == "maximum":
        strict = schema.get("exclusiveMaximum") is True
        return f"{invalid}: must be less than {'' if strict else 'or equal to '}{limit}"
    if keyword == "minimum":
        strict = schema.get("exclusiveMinimum") is True
        return f"{invalid}: must be greater than {'' if strict else 'or equal to '}{limit}"
    if keyword == "maxLength":
        return f"Too long: may not be more than {limit} bytes"
    if keyword == "minLength":
        return f"{invalid}: should be at least {limit} chars long"
    if keyword in ("maxItems", "maxProperties"):
        count = len(value) if isinstance(value, list | Mapping) else value
        return f"Too many: {count}: must have at most {limit} items"
    if keyword in ("minItems", "minProperties"):
        return f"{invalid}: should have at least {limit} items"
    if keyword == "multipleOf":
        return f"{invalid}: must be a multiple of {limit}"
    if keyword == "anyOf":
        return f"{invalid}: must validate at least one schema (anyOf)"
    if keyword == "oneOf":
        return f"{invalid}: must validate one and only one schema (oneOf)"
    if keyword == "not":
        return f"{invalid}: must not validate the schema (not)"
    if keyword == "additionalProperties":
        return f"Forbidden: {error.message}"
    return f"{invalid}: {error.message}"
