"""The AdmissionReview v1 wire contract: parse a request once at the edge, build the response.

Three kinds of answer besides allow: a broken *request* raises :class:`BadReview` (HTTP 400 with a
JSON error); a bad *object* is a Verdict with ``allowed: false``; a review routegate *could not decide*
(busy, out of time, still syncing) is a call failure (:func:`call_failure`, HTTP 503), never an
AdmissionReview. The apiserver applies the webhook's ``failurePolicy`` only when the call fails (a
transport error, a timeout, a non-2xx status, a body it cannot read: its validating dispatcher wraps
any error of ``Do(ctx).Into(response)`` in ``ErrCallingWebhook``); a well-formed ``allowed: false`` is
a rejection whatever its code, so "could not decide" answered that way would block every write even
under ``failurePolicy: Ignore``. Nothing past this module touches the wire dicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from validators.changes import Change, Operation
from validators.objects import Obj
from webhook.gate.verdicts import Decision, Verdict

API_VERSION = "admission.k8s.io/v1"
MAX_WARNING = 256
# Seconds a client is asked to wait before calling again after "could not decide" (Retry-After): a
# burst drains in about that, and client-go retries a 503 carrying it within the webhook's timeout.
RETRY_AFTER = 1
MAX_REASON = 1024  # characters of a call failure's one-line reason (the apiserver logs and returns it)
MAX_WARNINGS_TOTAL = 4096
# Kubernetes objects are a few levels deep (managedFields mirrors the object plus one level); the
# checks walk objects recursively, so a bound far below Python's recursion limit keeps a hostile
# nesting a 400 at the edge instead of a RecursionError deep inside a validator.
MAX_DEPTH = 64
# Kubernetes integers are 64-bit (19 digits); Python refuses int() of 4,300+ digits with a ValueError.
MAX_INT_DIGITS = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# The two checks above, done on a UTF-8 body's bytes by C string methods instead of in Python per
# integer (parse_int) and per value (the depth walk): they cost a review more than json.loads itself.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * (MAX_INT_DIGITS + 1)  # no such run of digits: no integer needs _int
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"{}[]")
_NESTING = {ord("{"): 1, ord("["): 1, ord("}"): -1, ord("]"): -1}


class BadReview(ValueError):
    """The request is not a usable AdmissionReview (HTTP 400, never a 500)."""


@dataclass(frozen=True, slots=True)
class Review:
    uid: str
    change: Change
    kind: str
    namespace: str
    name: str

    @property
    def dry_run(self) -> bool:
        return self.change.dry_run


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BadReview(f"body has an integer with {digits} digits; at most {MAX_INT_DIGITS} are accepted "
                        "(Kubernetes integers are 64-bit)")
    return int(text)


def _constant(name: str) -> Any:
    raise BadReview(f"body is not valid JSON: {name} is not JSON (a number must be finite)")


def _too_deep(doc: Any) -> bool:
    """True when containers nest deeper than MAX_DEPTH (iterative: the check itself cannot recurse)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def _nesting(body: bytes) -> int:
    """How deep the containers of a valid UTF-8 JSON body nest (the root container is 1), as
    :func:`_too_deep` walks it: the largest count of brackets open at once outside strings; or, when
    that is at most MAX_DEPTH, a bound on it that is too."""
    # Backslashes occur only in strings, each starting an escape; dropping the escaped backslashes
    # (pairs, from the left of each run, as the parser takes them) and then the escaped quotes leaves
    # quote bytes that all start or end a string (in UTF-8 no other character contains that byte).
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    # Every container above the deepest one holds something: the containers that are not empty, plus
    # one, bound the depth; counted in C, that settles a real object, whose managedFields is mostly {}.
    bound = brackets.count(b"{") + brackets.count(b"[") - brackets.count(b"{}") - brackets.count(b"[]") + 1
    if bound <= MAX_DEPTH:
        return bound
    return max(accumulate(map(_NESTING.__getitem__, brackets)), default=0)


def _has_long_digits(body: bytes) -> bool:
    return _LONG_DIGITS in body.translate(_DIGITS_AS_ZERO)


def load_json(body: bytes) -> Any:
    """``json.loads`` that turns every way a body can break the parser into BadReview."""
    deep = BadReview(f"body is nested deeper than {MAX_DEPTH} levels")
    utf8 = json.detect_encoding(body) == "utf-8"
    # Without a run of more than MAX_INT_DIGITS digits anywhere, _int would return int(text) for each.
    parse_int = _int if not utf8 or _has_long_digits(body) else None
    try:
        doc = json.loads(body, parse_int=parse_int, parse_constant=_constant)
    except BadReview:
        raise
    except RecursionError:
        raise deep from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, and int/float conversion limits
        raise BadReview(f"body is not valid JSON: {exc}") from None
    if _nesting(body) > MAX_DEPTH if utf8 else _too_deep(doc):
        raise deep
    return doc


def parse(body: bytes) -> Review:
    doc = load_json(body)
    if not isinstance(doc, dict):
        raise BadReview(f"body must be a JSON object (an AdmissionReview), not {type(doc).__name__}")
    if doc.get("apiVersion") != API_VERSION:
        raise BadReview(f"apiVersion must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be 'AdmissionReview', got {doc.get('kind')!r}")
    req = doc.get("request")
    if not isinstance(req, dict):
        raise BadReview("request is missing or not an object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or not a non-empty string")
    operation = req.get("operation")
    if not isinstance(operation, str) or operation not in Operation.__members__:
        raise BadReview(f"request.operation must be one of CREATE, UPDATE, DELETE, CONNECT; got {operation!r}")
    gvk = req.get("kind")
    if not isinstance(gvk, dict) or not isinstance(gvk.get("kind"), str):
        raise BadReview("request.kind must be an object with a string 'kind'")
    raw_obj = _object(req, "object")
    raw_old = _object(req, "oldObject")
    op = Operation(operation)
    if op in (Operation.CREATE, Operation.UPDATE, Operation.CONNECT) and raw_obj is None:
        raise BadReview(f"request.object is required for {op}")
    if op is Operation.DELETE and raw_old is None and raw_obj is None:
        raise BadReview("request.oldObject is required for DELETE")
    namespace = _text(req.get("namespace"))
    name = _text(req.get("name"))
    group = gvk.get("group") or ""
    api_version = f"{group}/{gvk.get('version')}" if group else str(gvk.get("version") or "v1")
    obj = _complete(raw_obj, kind=gvk["kind"], api_version=api_version, namespace=namespace, name=name)
    old = _complete(raw_old, kind=gvk["kind"], api_version=api_version, namespace=namespace, name=name)
    if op is Operation.DELETE and old is None:
        old, obj = obj, None
    dry_run = req.get("dryRun") is True
    change = Change(op, obj if op is not Operation.DELETE else None, old, dry_run=dry_run)
    return Review(uid=uid, change=change, kind=gvk["kind"], namespace=namespace, name=name)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object(req: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = req.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadReview(f"request.{key} must be an object or null, not {type(value).__name__}")
    return value


def _complete(obj: dict[str, Any] | None, *, kind: str, api_version: str, namespace: str,
              name: str) -> Obj | None:
    """Fill identity the apiserver leaves implicit (kind, apiVersion, namespace, generateName'd name)."""
    if obj is None:
        return None
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    needs_meta = (namespace and not metadata.get("namespace")) or (name and not metadata.get("name"))
    if "kind" in obj and "apiVersion" in obj and not needs_meta and isinstance(obj.get("metadata"), dict):
        return obj
    filled = dict(obj)
    filled.setdefault("kind", kind)
    filled.setdefault("apiVersion", api_version)
    meta = dict(metadata)
    if namespace and not meta.get("namespace"):
        meta["namespace"] = namespace
    if name and not meta.get("name"):
        meta["name"] = name
    filled["metadata"] = meta
    return filled


def clean_warnings(lines: list[str]) -> list[str]:
    """Deduplicated, control characters removed (the apiserver drops such a warning), each <= 256
    characters and all together <= 4096."""
    out: list[str] = []
    seen: set[str] = set()
    total = 0
    for line in lines:
        text = " ".join(_CONTROL.sub(" ", line).split())
        if len(text) > MAX_WARNING:
            text = text[: MAX_WARNING - 1] + "…"
        if not text or text in seen:
            continue
        if total + len(text) > MAX_WARNINGS_TOTAL:
            break
        seen.add(text)
        out.append(text)
        total += len(text)
    return out


def respond(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview answering a judgement (allow or deny); "could not decide" is no judgement
    and is answered with :func:`call_failure` instead."""
    if verdict.decision is Decision.ERROR:
        raise ValueError("could not decide is a call failure (call_failure), not an AdmissionReview")
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message}
    warnings = clean_warnings(verdict.warnings)
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def one_line(text: str, limit: int = MAX_REASON) -> str:
    """``text`` on one line without control characters, at most ``limit`` characters."""
    line = " ".join(_CONTROL.sub(" ", text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def call_failure(message: str) -> dict[str, Any]:
    """The body of a 503 that tells the apiserver the call failed (its ``failurePolicy`` decides): a
    ``metav1.Status``, which client-go decodes from an error response, so the one-line reason is what
    the apiserver logs and, under ``failurePolicy: Fail``, returns to the user."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": one_line(message), "reason": "ServiceUnavailable", "code": 503,
            "details": {"retryAfterSeconds": RETRY_AFTER}}
