"""Random and mutated AdmissionReview bodies: the generator behind ``bench/bench_fuzz.py`` and the
bounded hypothesis test of the suite.

Each case is ``(body, headers)``. Mutations start from real reviews (the apiserver captures in the
shared fixtures and the webhook test inputs) and break them at every layer: bytes (flips, cuts,
invalid UTF-8), JSON (deep nesting, huge integers, NaN, duplicate keys), the AdmissionReview envelope
(wrong types, missing fields), the object (a hostile value at a random path), and the transport
(valid and corrupted gzip/deflate). ``random.Random`` drives everything, so a seed replays a case.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from tests.conftest import SHARED
from tests.webhook.conftest import INPUTS, load_objects

Case = tuple[bytes, dict[str, str]]
JSON_HEADERS = {"Content-Type": "application/json"}

HOSTILE_STRINGS = (
    "", " ", "a b", "\x00", "\r\nX-Injected: 1", "\n    bind :1", "${HOME}", '"${HOME}"', "%[src]",
    "fe80::1%eth0", "user:pass@evil.example.com/", "//evil.example.com", "../../etc/passwd",
    "(?:.*)|", ")|(.*", r"\Q)\E", "(?#)", "(*ACCEPT)", "(?i)", "[", "\\", "{{ 7*7 }}", "{% raw %}",
    "\u202e", "\ud7ff", "é" * 300, "x" * 70_000, "a," * 2000, "*." * 200 + "example.com",
)
HOSTILE_NUMBERS: tuple[Any, ...] = (0, -1, 2**31, 2**63, -(2**63) - 1, 10**40, 1e308, -1e-308, 0.5, 65536, 99999)


@cache
def seed_reviews() -> tuple[dict[str, Any], ...]:
    """Real AdmissionReviews: the captured fixtures plus a CREATE for every webhook test input."""
    found: list[dict[str, Any]] = []
    folder = SHARED / "fixtures" / "admission-reviews" if SHARED else None
    if folder is not None and folder.is_dir():
        found += [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]
    for i, obj in enumerate(load_objects(INPUTS)):
        meta: Any = obj.get("metadata") or {}
        kind = str(obj.get("kind", ""))
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        found.append({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"seed-{i}", "kind": {"group": group, "version": version, "kind": kind},
            "operation": "CREATE", "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
            "object": obj, "oldObject": None}})
    return tuple(found)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return doc


def _delete(doc: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return doc


def hostile_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(HOSTILE_STRINGS)
    if roll < 0.45:
        return rng.choice(HOSTILE_NUMBERS)
    if roll < 0.55:
        return rng.choice((None, True, False, [], {}))
    if roll < 0.65 and depth < 3:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(1, 4))]
    if roll < 0.75 and depth < 3:
        keys = [rng.choice(HOSTILE_STRINGS[:12]) or "k" for _ in range(rng.randint(1, 3))]
        return {key: hostile_value(rng, depth + 1) for key in keys}
    if roll < 0.85:
        nested: Any = rng.choice(HOSTILE_STRINGS)
        for _ in range(rng.randint(30, 80)):
            nested = [nested] if rng.random() < 0.5 else {"a": nested}
        return nested
    return "".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(1, 40)))


def _structural(rng: random.Random, doc: Any) -> bytes:
    """A hostile value, a deletion or a type swap at a random path of a real review."""
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        path = rng.choice(paths)
        roll = rng.random()
        if roll < 0.6:
            doc = _set(doc, path, hostile_value(rng))
        elif roll < 0.8 and path:
            doc = _delete(doc, path)
        else:
            doc = _set(doc, path, rng.choice(("x", 1, None, [], {}, ["HTTPRoute"])))
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode()


def _envelope(rng: random.Random, doc: dict[str, Any]) -> bytes:
    req = doc.get("request") if isinstance(doc.get("request"), dict) else {}
    field = rng.choice(("apiVersion", "kind", "request", "uid", "operation", "kindgvk", "object", "oldObject",
                        "namespace", "name", "dryRun"))
    value = rng.choice((None, "", 0, [], {}, "DELETE", "CONNECT", "PATCH", "admission.k8s.io/v1beta1", True,
                        "x" * 1000))
    if field in ("apiVersion", "kind", "request"):
        doc[field] = value
    elif field == "kindgvk":
        req["kind"] = rng.choice(({"kind": value}, {"group": value, "version": value, "kind": "HTTPRoute"}, value))
    elif field == "uid":
        req["uid"] = value
    else:
        req[field] = value
    return json.dumps(doc).encode()


def _bytes(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    roll = rng.random()
    if roll < 0.25 and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif roll < 0.45:
        data = data[: rng.randrange(len(data) + 1)]
    elif roll < 0.6 and data:
        at = rng.randrange(len(data))
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif roll < 0.7 and data:
        a = rng.randrange(len(data))
        data[a:a] = data[a: a + rng.randint(1, 200)] * rng.randint(2, 20)
    elif roll < 0.8:
        data = bytearray(rng.choice((b"\xff\xfe", b"\xef\xbb\xbf", b"\xc3\x28"))) + data
    else:
        data = data.replace(b'"', b"'", rng.randint(1, 5))
    return bytes(data)


def _syntax(rng: random.Random) -> bytes:
    """JSON that breaks parsers rather than schemas."""
    depth = rng.choice((65, 200, 1000, 5000, 100_000))
    choices: list[Callable[[], bytes]] = [
        lambda: b"[" * depth + b"]" * depth,
        lambda: b'{"a":' * depth + b"1" + b"}" * depth,
        lambda: b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": ' + b"[" * depth,
        lambda: b'{"n": ' + b"9" * rng.choice((101, 4300, 4301, 50_000)) + b"}",
        lambda: b'{"n": ' + rng.choice((b"NaN", b"Infinity", b"-Infinity", b"1e99999", b"-0", b"0x10")) + b"}",
        lambda: b'{"a": 1, "a": 2, "kind": "AdmissionReview", "kind": "x"}',
        lambda: b'"' + b"\\u" + rng.choice((b"d800", b"dfff", b"zzzz", b"")) + b'"',
        lambda: rng.choice((b"", b"null", b"true", b"0", b'"x"', b"[]", b"{}", b" \n ")),
        lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))),
    ]
    return rng.choice(choices)()


def _encoded(rng: random.Random, body: bytes) -> Case:
    encoding = rng.choice(("gzip", "deflate"))
    packed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    roll = rng.random()
    if roll < 0.4:
        packed = packed[: rng.randrange(1, max(2, len(packed)))]
    elif roll < 0.7:
        packed = bytes(b ^ 0x5A if rng.random() < 0.05 else b for b in packed)
    return packed, {**JSON_HEADERS, "Content-Encoding": encoding}


def case(rng: random.Random) -> Case:
    """One fuzz case, chosen and built from ``rng`` alone."""
    seeds = seed_reviews()
    doc = copy.deepcopy(rng.choice(seeds))
    roll = rng.random()
    # Weights: a case the gate judges in full costs a haproxy -c (tens of ms); one refused at the
    # edge costs about a millisecond. Enough of the first kind to exercise the gate, most of the
    # second so that a run reaches 100,000 cases in minutes.
    if roll < 0.10:
        return _structural(rng, doc), JSON_HEADERS
    if roll < 0.32:
        return _envelope(rng, doc), JSON_HEADERS
    if roll < 0.60:
        return _bytes(rng, json.dumps(doc).encode()), JSON_HEADERS
    if roll < 0.85:
        return _syntax(rng), JSON_HEADERS
    if roll < 0.99:
        return _encoded(rng, rng.choice((_structural(rng, doc), json.dumps(doc).encode())))
    return json.dumps(doc).encode(), JSON_HEADERS  # unmodified: the gate judges it for real


def check_answer(status: int, body: bytes, sent: bytes) -> str:
    """"" when the answer keeps the contract, else what is wrong with it. A 503 is the contract's call
    failure ("could not decide", busy): a metav1.Status with a one-line message, never another 5xx."""
    if status == 503:
        try:
            failure = json.loads(body)
        except ValueError:
            return f"HTTP 503 with a body that is not JSON: {body[:120]!r}"
        ok = (isinstance(failure, dict) and failure.get("kind") == "Status" and failure.get("code") == 503
              and isinstance(failure.get("message"), str) and "\n" not in failure["message"])
        return "" if ok else f"HTTP 503 without a one-line Status: {body[:200]!r}"
    if status >= 500:
        return f"HTTP {status}"
    if status not in (200, 400, 408, 413):
        return f"unexpected HTTP {status}"
    try:
        answer = json.loads(body)
    except ValueError:
        return f"HTTP {status} with a body that is not JSON: {body[:120]!r}"
    if status != 200:
        return "" if isinstance(answer, dict) and isinstance(answer.get("error"), str) else f"no JSON error: {answer}"
    response = answer.get("response") if isinstance(answer, dict) else None
    if not isinstance(response, dict) or not isinstance(response.get("allowed"), bool):
        return f"HTTP 200 without an AdmissionReview response: {body[:200]!r}"
    try:
        uid = json.loads(sent)["request"]["uid"]
    except Exception:
        uid = None
    if not isinstance(response.get("uid"), str) or (isinstance(uid, str) and response["uid"] != uid):
        return f"HTTP 200 with uid {response.get('uid')!r}, sent {uid!r}"
    return ""
