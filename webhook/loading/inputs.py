"""Reading Kubernetes manifests from files, directories and stdin, keeping file and line per object.

``routegate check`` reports ``file:line:column kind ns/name``, so every object remembers where it came
from. Files may come from an untrusted pull request, so reading is defensive:

- libyaml's C parser (``yaml.CSafeLoader``) where it is installed, with a shorter construction path
  (:mod:`webhook.loading.yamlloading`), JSON's C decoder for JSON files;
- YAML aliases are refused in object documents (an 830-byte "billion laughs" document expands to
  10^8 nodes in every later walk), and nesting deeper than :data:`MAX_DEPTH` is refused before the
  composer recurses (libyaml's composer crashes the interpreter past some 50,000 levels);
- every problem is a :class:`Problem` (``file:line:column: message``); :func:`read` keeps going
  with the next document or file, :func:`load` (settings inputs: ``--state``, ``--crds``) raises the
  first one as :class:`InputError`;
- symlinks found under a directory are not followed out of it unless asked (a PR can add
  ``routes/x.yaml -> /etc/...``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from validators.objects import Ref, ref_of
from webhook.loading import jsonmembers, yamlloading

SUFFIXES = (".yaml", ".yml", ".json")
MAX_DEPTH = 100  # Kubernetes objects nest ~20 levels; validators walk objects recursively
COMPOSER_SAFE_DEPTH = 5000  # libyaml's (recursive) composer handles 10,000 levels here, crashes at 10^5
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# "---" at the start of a line ends a document even inside a flow collection (libyaml stops there with a
# syntax error), so no nesting spans two of these chunks.
_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)
_BLOCK_PREFIX = re.compile(r"^[ \t?:-]{%d,}" % COMPOSER_SAFE_DEPTH, re.MULTILINE)  # noqa: UP031 - a quantifier


class InputError(ValueError):
    """A file that cannot be read or parsed; the message names the file (and line)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One input that could not be used, where it is (line 0: the whole file)."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        if not self.line:
            return f"{self.file}: {self.message}"
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


@dataclass(frozen=True, slots=True)
class Located:
    obj: dict[str, Any]
    file: str
    line: int
    column: int = 1
    doc: int = 0  # the document's index in its file
    prefix: tuple[str | int, ...] = ()  # where obj sits in that document (List items, AdmissionReview)
    old: dict[str, Any] | None = None  # an AdmissionReview's oldObject: the state it was judged against
    # A large check names each input's object several times (duplicates, the combined state, its change):
    # read off the object once. Inputs are never changed in place.
    _ref: Ref | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def ref(self) -> Ref:
        ref = self._ref
        if ref is None:
            ref = ref_of(self.obj)
            object.__setattr__(self, "_ref", ref)
        return ref


@dataclass(slots=True)
class Loaded:
    objects: list[Located] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # file -> text, to find field positions later
    # file -> the JSON containers' members found while decoding it (``jsonmembers``), kept with the texts
    members: dict[str, dict[int, jsonmembers.Members]] = field(default_factory=dict)


def expand(paths: Sequence[str], *, follow_symlinks: bool = False,
           warnings: list[str] | None = None) -> list[str]:
    """Files named directly, plus *.yaml/*.yml/*.json under directories (sorted); ``-`` is stdin.

    Under a directory, a symlink whose target lies outside that directory is skipped (with a warning)
    unless ``follow_symlinks``; directory symlinks are never descended into twice."""
    out: list[str] = []
    for name in paths:
        if name == "-":
            out.append(name)
            continue
        path = Path(name)
        if path.is_dir():
            out.extend(_walk(path, follow_symlinks, warnings if warnings is not None else []))
        elif path.is_file():
            out.append(name)
        else:
            raise InputError(f"{name}: no such file or directory")
    return out


def _walk(top: Path, follow_symlinks: bool, warnings: list[str]) -> list[str]:
    root = top.resolve()
    found: list[str] = []
    visited: set[str] = set()  # real directories already read: a followed symlink loop ends here
    for current, dirs, files in os.walk(top, followlinks=follow_symlinks):
        here = Path(current)
        real = os.path.realpath(here)
        if real in visited:
            dirs[:] = []
            continue
        visited.add(real)
        for d in sorted(dirs):
            link = here / d
            if link.is_symlink() and not follow_symlinks and not _inside(link, root):
                # not descended into either way (os.walk without followlinks); say why it is not read
                warnings.append(f"{link}: skipped: a symlink to {os.readlink(link)}, outside {top} "
                                "(pass --follow-symlinks to read it)")
        for f in sorted(files):
            path = here / f
            if path.suffix not in SUFFIXES:
                continue
            if path.is_symlink() and not follow_symlinks and not _inside(path, root):
                warnings.append(f"{path}: skipped: a symlink to {os.readlink(path)}, outside {top} "
                                "(pass --follow-symlinks to read it)")
                continue
            if path.is_file():
                found.append(str(path))
    return sorted(found)


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop
        return False


def read(paths: Sequence[str], *, stdin_text: str | None = None, follow_symlinks: bool = False,
         keep_texts: bool = False) -> Loaded:
    """Every object of every input, and every problem found on the way; never raises for input."""
    loaded = Loaded()
    names: list[str] = []
    for name in paths:
        try:
            names.extend(expand([name], follow_symlinks=follow_symlinks, warnings=loaded.warnings))
        except InputError as exc:
            loaded.problems.append(Problem(name, 0, 0, str(exc).removeprefix(f"{name}: ")))
    for name in names:
        if name == "-":
            file, text = "<stdin>", stdin_text if stdin_text is not None else sys.stdin.read()
        else:
            file = name
            try:
                text = Path(name).read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                loaded.problems.append(Problem(name, 0, 0, f"cannot read: not UTF-8 text ({exc.reason} at byte "
                                                           f"{exc.start})"))
                continue
            except OSError as exc:
                loaded.problems.append(Problem(name, 0, 0, f"cannot read: {exc.strerror or exc}"))
                continue
        members: dict[int, jsonmembers.Members] | None = None
        if keep_texts:
            loaded.texts[file] = text
            members = loaded.members[file] = {}
        for item in parse_text(text, file, members):
            if isinstance(item, Problem):
                loaded.problems.append(item)
            else:
                loaded.objects.append(item)
    return loaded


def load(paths: Sequence[str], *, stdin_text: str | None = None) -> list[Located]:
    """Every object, or InputError for the first problem (inputs a setting names: --state, --crds)."""
    loaded = read(paths, stdin_text=stdin_text, follow_symlinks=True)
    if loaded.problems:
        raise InputError(str(loaded.problems[0]))
    return loaded.objects


def is_json(text: str, file: str) -> bool:
    return file.endswith(".json") or text.lstrip()[:1] in ("{", "[")


def parse_text(text: str, file: str, members: dict[int, jsonmembers.Members] | None = None,
               ) -> Iterator[Located | Problem]:
    """The objects of one file, or the problems that stop a document (or, for syntax errors, the file).
    ``members``: where a JSON file's root and List items are found in its text is recorded there."""
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        yield Problem(file, line, 1, "a NUL byte: not a YAML or JSON text")
        return
    if is_json(text, file):
        yield from _parse_json(text, file, members)
        return
    deep = too_deep(text)
    if deep is not None:
        yield Problem(file, deep.line + 1, deep.column + 1, f"invalid YAML: nesting deeper than {MAX_DEPTH} levels")
        return
    # Aliases need an anchor: a text without "&" cannot hold one, and takes the loader without the check.
    loader = (yamlloading.NoAliasLoader if "&" in text else yamlloading.FastSafeLoader)(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            line, column = node.start_mark.line + 1, node.start_mark.column + 1
            try:
                doc = loader.construct_document(node)
            except yaml.YAMLError as exc:
                yield yaml_problem(exc, file, text)
                loader.constructed_objects, loader.recursive_objects = {}, {}
            else:
                if loader.used_slow_path and _depth(doc) > MAX_DEPTH:
                    yield Problem(file, line, column, f"invalid YAML: nesting deeper than {MAX_DEPTH} levels")
                else:
                    yield from objects(doc, file, line, column, index)
            index += 1
    except yaml.YAMLError as exc:
        yield yaml_problem(exc, file, text)
    except RecursionError:
        yield Problem(file, 0, 0, f"nesting deeper than {MAX_DEPTH} levels")
    finally:
        loader.dispose()


def _parse_json(text: str, file: str, members: dict[int, jsonmembers.Members] | None = None,
                ) -> Iterator[Located | Problem]:
    try:
        if members is None:
            doc = json.loads(text)
        else:
            # Decoded piecewise, recording offsets: the keys of each item are separate strings, not shared
            # as one json.loads shares them (more memory), so only where positions are wanted.
            doc, found = jsonmembers.loads(text)
    except json.JSONDecodeError as exc:
        yield Problem(file, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}")
        return
    except RecursionError:
        yield Problem(file, 1, 1, f"invalid JSON: nesting deeper than {MAX_DEPTH} levels")
        return
    if _json_too_deep(text):
        yield Problem(file, 1, 1, f"invalid JSON: nesting deeper than {MAX_DEPTH} levels")
        return
    if members is not None:
        members.update(found)
    lead = len(text) - len(text.lstrip())  # the document starts after leading blank lines
    line = text.count("\n", 0, lead) + 1
    yield from objects(doc, file, line, lead - text.rfind("\n", 0, lead), 0)


_NOT_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'"[]{}')
_INNERMOST = re.compile(rb"\[\]|\{\}")


def _brackets_outside_strings(text: str) -> bytes:
    """The brackets of a JSON text that decoded, in order, leaving out those inside strings, with a few
    passes of C string methods (a regex over every string took longer than decoding the text). Every
    backslash in such a text starts an escape, read left to right as ``str.replace`` reads, so once the
    escaped backslashes and then the escaped quotes are gone every quote left opens or closes a string;
    in UTF-8 no byte of a non-ASCII character is a quote or a bracket."""
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    quotes_and_brackets = unescaped.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKET_OR_QUOTE)
    return b"".join(quotes_and_brackets.split(b'"')[::2])


def _json_depth(text: str, brackets: bytes | None = None) -> int:
    """Nesting depth (capped at MAX_DEPTH + 1) of a JSON text that decoded: its brackets outside
    strings (``brackets``, when the caller has them), with every innermost pair removed per pass; a few
    C-speed passes for real objects, where walking the decoded value costs as much as decoding it."""
    if brackets is None:
        brackets = _brackets_outside_strings(text)
    for level in range(MAX_DEPTH + 1):
        if not brackets:
            return level
        brackets = _INNERMOST.sub(b"", brackets)
    return MAX_DEPTH + 1


def _json_too_deep(text: str) -> bool:
    """Whether a JSON text that decoded nests deeper than MAX_DEPTH, by a bound first: a pass of two
    ``bytes.replace`` (every ``[]``, then every ``{}``) removes every innermost pair, so at least one
    level, and at most two (``{[]}`` goes in one pass), so P passes bound the depth D: P <= D <= 2P.
    Real objects (D ~ 12) are decided in a few of those, ten times faster than the exact passes of
    :func:`_json_depth` (a regex each), which decide only what the bound leaves open."""
    brackets = rest = _brackets_outside_strings(text)
    passes = 0
    while rest and passes <= MAX_DEPTH:
        rest = rest.replace(b"[]", b"").replace(b"{}", b"")
        passes += 1
    if passes > MAX_DEPTH:
        return True
    if 2 * passes <= MAX_DEPTH:
        return False
    return _json_depth(text, brackets) > MAX_DEPTH


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value, iteratively (a recursive walk is what we guard against)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, level = stack.pop()
        if level > MAX_DEPTH:
            return level
        deepest = max(deepest, level)
        if isinstance(current, dict):
            stack.extend((v, level + 1) for v in current.values() if isinstance(v, dict | list))
        elif isinstance(current, list):
            stack.extend((v, level + 1) for v in current if isinstance(v, dict | list))
    return deepest


def too_deep(text: str) -> Any:
    """Where the nesting passes MAX_DEPTH in a text too deep to compose safely, or None. Every level
    needs a flow bracket or more block indentation, so a text with fewer brackets than the composer
    handles and no deep indentation is decided without parsing (the constructed documents are measured
    after); only the rest is walked event by event (libyaml's parser keeps its own stack)."""
    brackets = max(chunk.count("[") + chunk.count("{") for chunk in _DOCUMENT_START.split(text))
    if brackets < COMPOSER_SAFE_DEPTH and _BLOCK_PREFIX.search(text) is None:
        return None
    return deep_at(text)


def deep_at(text: str) -> Any:
    """Where the nesting of ``text`` passes MAX_DEPTH, walked event by event, or None (also for a text
    that is invalid before that point: the loader reports that error with its position)."""
    try:
        return _deepest_event(text, _Base)
    except yaml.YAMLError:
        # libyaml may refuse deep nesting itself (newer releases scan a flow collection's brackets ahead
        # and stop at a limit of their own, in their own words): the pure-Python parser keeps no such
        # limit, so it finds where *our* limit is passed and the message stays routegate's, whatever
        # the PyYAML release. Only texts libyaml refused take this slower path.
        try:
            return _deepest_event(text, yaml.SafeLoader)
        except yaml.YAMLError:
            return None


def _deepest_event(text: str, loader: Any) -> Any:
    """The start mark of the first collection nested deeper than MAX_DEPTH, or None."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return event.start_mark
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def yaml_problem(exc: yaml.YAMLError, file: str, text: str | None = None) -> Problem:
    """The problem to report for a YAML error in ``file``. With the ``text``, an error that nesting past
    MAX_DEPTH explains is reported in routegate's words: libyaml may stop at a limit of its own first."""
    deep = deep_at(text) if text is not None else None
    if deep is not None:
        return Problem(file, deep.line + 1, deep.column + 1, f"invalid YAML: nesting deeper than {MAX_DEPTH} levels")
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if isinstance(exc, yaml.reader.ReaderError):
        return Problem(file, 0, 0, f"invalid YAML: {exc}")
    if mark is None:
        return Problem(file, 0, 0, f"invalid YAML: {problem}")
    return Problem(file, mark.line + 1, mark.column + 1, f"invalid YAML: {problem}")


def objects(doc: Any, file: str, line: int, column: int = 1, index: int = 0) -> Iterator[Located | Problem]:
    """The Kubernetes objects of one decoded document: itself, a List's items, an AdmissionReview's
    ``request.object`` (with ``oldObject`` as the old state)."""
    if doc is None:
        return
    if not isinstance(doc, dict):
        yield Problem(file, line, column, f"a document must be a mapping (a Kubernetes object), not "
                                          f"{type(doc).__name__}")
        return
    kind = doc.get("kind")
    if kind == "AdmissionReview" and isinstance(doc.get("request"), dict):
        request = doc["request"]
        obj, old = request.get("object"), request.get("oldObject")
        if not isinstance(obj, dict):
            yield Problem(file, line, column, "AdmissionReview without request.object (a DELETE review "
                                              "has nothing to judge offline)")
            return
        checked = _checked(obj, file, line, column, index, ("request", "object"))
        if isinstance(checked, Located) and isinstance(old, dict):
            checked = Located(checked.obj, file, line, column, index, checked.prefix, old)
        yield checked
        return
    if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list):
            yield Problem(file, line, column, f"{kind}: items is not a list")
            return
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                yield Problem(file, line, column, f"{kind}: items[{i}] is not an object")
                continue
            yield _checked(item, file, line, column, index, ("items", i))
        return
    yield _checked(doc, file, line, column, index, ())


def _checked(doc: dict[str, Any], file: str, line: int, column: int, index: int,
             prefix: tuple[str | int, ...]) -> Located | Problem:
    meta = doc.get("metadata")
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if (type(api) is str and api and type(kind) is str and kind and type(meta) is dict
            and type(meta.get("name")) is str and meta["name"]):
        return Located(doc, file, line, column, index, prefix)  # the common case, without the checks' texts
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in prefix).lstrip(".")
    at = f"{where}: " if where else ""
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            return Problem(file, line, column, f"{at}not a Kubernetes object: it has no {key}")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        if isinstance(meta, dict) and meta.get("generateName"):
            return Problem(file, line, column, f"{at}{doc['kind']} has only metadata.generateName: the name "
                                               "the API server will pick cannot be checked")
        return Problem(file, line, column, f"{at}{doc['kind']} has no metadata.name")
    return Located(doc, file, line, column, index, prefix)
