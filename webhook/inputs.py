"""Reading Kubernetes manifests from files, directories and stdin, keeping file and line per object.

``routegate check`` reports ``file:line kind ns/name``, so every object remembers where it came from.
Unparseable YAML is an input error that names the file and line (exit 2), never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SUFFIXES = (".yaml", ".yml", ".json")


class InputError(ValueError):
    """A file that cannot be read or parsed; the message names the file (and line)."""


@dataclass(frozen=True, slots=True)
class Located:
    obj: dict[str, Any]
    file: str
    line: int


def expand(paths: Sequence[str]) -> list[str]:
    """Files named directly, plus *.yaml/*.yml/*.json under directories (sorted); ``-`` is stdin."""
    out: list[str] = []
    for name in paths:
        if name == "-":
            out.append(name)
            continue
        path = Path(name)
        if path.is_dir():
            out.extend(str(p) for p in sorted(path.rglob("*")) if p.suffix in SUFFIXES and p.is_file())
        elif path.is_file():
            out.append(name)
        else:
            raise InputError(f"{name}: no such file or directory")
    return out


def load(paths: Sequence[str], *, stdin_text: str | None = None) -> list[Located]:
    objects: list[Located] = []
    for name in expand(paths):
        if name == "-":
            text = stdin_text if stdin_text is not None else sys.stdin.read()
            objects.extend(parse_text(text, "<stdin>"))
            continue
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{name}: cannot read: {exc}") from None
        objects.extend(parse_text(text, name))
    return objects


# libyaml's C parser where PyYAML was built with it: the pure-Python one takes minutes for 10,000 routes.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_text(text: str, file: str) -> Iterator[Located]:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        # JSON is parsed as JSON (as the API server does), many times faster than as YAML; text that is
        # not valid JSON (a YAML flow mapping, a broken file) goes through YAML, whose errors name the line.
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:
            yield from _objects(doc, file, text.count("\n", 0, len(text) - len(stripped)) + 1)
            return
    loader = _LOADER(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            line = node.start_mark.line + 1
            doc = loader.construct_document(node)
            yield from _objects(doc, file, line)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else file
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    finally:
        loader.dispose()


def _objects(doc: Any, file: str, line: int) -> Iterator[Located]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise InputError(f"{file}:{line}: a document must be a mapping (a Kubernetes object), not "
                         f"{type(doc).__name__}")
    if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
        for item in doc.get("items") or []:
            yield from _objects(item, file, line)
        return
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            raise InputError(f"{file}:{line}: object has no {key}")
    if not isinstance(doc.get("metadata"), dict) or not isinstance(doc["metadata"].get("name"), str):
        raise InputError(f"{file}:{line}: {doc['kind']} has no metadata.name")
    yield Located(doc, file, line)
