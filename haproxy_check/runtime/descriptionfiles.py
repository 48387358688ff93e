"""``description.json`` in a promoted version directory: written O(change), read back after a restart.

The description's map entries are the lines of the map files promoted beside it, byte for byte; written
inline they doubled the version's size (at 10,000 routes ``weighted-multi-backend.map`` alone is about
60 MB) and every change rewrote and hashed them all. A map whose file holds exactly its entries is
written as a reference instead::

    {"path": "maps/host.map", "ordered": false, "entriesFile": "maps/host.map"}

and ``read`` takes the entries from that file of the same version (the same atomic directory, so they
are the entries promoted with it). A map whose file does not hold its entries line for line (an entry
with a newline in it) is written inline, as before; a description.json written before this reads as it is.

``DescriptionJson`` serializes O(change): each backend's and each map's JSON text is reused while the
patched render hands on the very same record (``haproxy_check.render.patching`` keeps an unchanged
backend's ``BackendDesc`` and an unchanged map's entries tuple, and the map file's bytes); a map's
reference is checked against its file only when either changed. ``from_scratch`` is the same bytes
computed without any of that (``tests/reconcile/test_promoted_files.py`` compares them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from haproxy_check.check import scratches
from haproxy_check.descriptions import BackendDesc, Description, MapDesc

FILE = "description.json"
ENTRIES_FILE = "entriesFile"
_MEMBERS = tuple(Description().as_dict())  # description.json's members, in as_dict's order


def lines_of(data: bytes) -> tuple[str, ...]:
    """A map file's entries, one per line (the inverse of the renderer's ``"\\n".join(lines) + "\\n"``)."""
    text = data.decode()
    return tuple(text.split("\n")[:-1]) if text else ()


def holds(m: MapDesc, data: bytes | None) -> bool:
    """Whether the map file ``data`` holds exactly ``m``'s entries, line for line."""
    if data is None:
        return False
    try:
        return lines_of(data) == m.entries
    except UnicodeDecodeError:
        return False


def map_member(m: MapDesc, by_file: bool) -> dict[str, Any]:
    if not by_file:
        return m.as_dict()
    return {"path": m.path, "ordered": m.ordered, ENTRIES_FILE: m.path}


def _json_bytes(members: Mapping[str, str]) -> bytes:
    """One line per top-level member, as ``webhook.reconcile.reconciler._json_bytes`` writes JSON for humans."""
    return ("{\n" + ",\n".join(f"  {json.dumps(k)}: {members[k]}" for k in _MEMBERS if k in members)
            + "\n}\n").encode()


def from_scratch(description: Description, files: Mapping[str, bytes]) -> bytes:
    """description.json for ``description`` promoted beside ``files``, computed from nothing."""
    data = description.as_dict(maps=False)
    maps = [map_member(m, holds(m, files.get(m.path))) for m in sorted(description.maps, key=lambda m: m.path)]
    return _json_bytes({**{k: json.dumps(v) for k, v in data.items()}, "maps": json.dumps(maps)})


class DescriptionJson:
    """``from_scratch``'s bytes, with the unchanged backends' and maps' texts reused (module docstring).
    When no member changed, the previous bytes themselves are handed on, so ``promotion.FileDigests``
    does not hash them again."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[BackendDesc, str]] = {}  # id -> (the record, held so the id stays its)
        # (path, ordered) -> (the entries, the map file's bytes, the member's text), held by identity
        self._maps: dict[tuple[str, bool], tuple[tuple[str, ...], bytes | None, str]] = {}
        self._last: tuple[list[str], list[str], dict[str, str], bytes] | None = None
        self._backends: tuple[tuple[BackendDesc, ...] | None, list[str]] = (None, [])  # the last tuple, its texts

    def of(self, description: Description, files: Mapping[str, bytes]) -> bytes:
        if description.backends is self._backends[0]:  # the patch kept every backend: the very same tuple
            backends = self._backends[1]
        else:
            texts: dict[int, tuple[BackendDesc, str]] = {}
            backends = []
            for backend in sorted(description.backends, key=lambda b: b.name):
                known = self._texts.get(id(backend))
                text = known[1] if known is not None and known[0] is backend else json.dumps(backend.as_dict())
                texts[id(backend)] = (backend, text)
                backends.append(text)
            self._texts = texts
            self._backends = (description.backends, backends)
        maps: dict[tuple[str, bool], tuple[tuple[str, ...], bytes | None, str]] = {}
        map_texts = []
        for m in sorted(description.maps, key=lambda m: m.path):
            data = files.get(m.path)
            seen = self._maps.get((m.path, m.ordered))
            if seen is not None and seen[0] is m.entries and seen[1] is data:
                text = seen[2]
            else:
                text = json.dumps(map_member(m, holds(m, data)))
            maps[(m.path, m.ordered)] = (m.entries, data, text)
            map_texts.append(text)
        self._maps = maps
        rest = {k: json.dumps(v) for k, v in description.as_dict(backends=False, maps=False).items()}
        last = self._last
        if last is not None and rest == last[2] and (backends is last[0] or _same(backends, last[0])) \
                and _same(map_texts, last[1]):
            return last[3]
        data = _json_bytes({"backends": "[" + ", ".join(backends) + "]", "maps": "[" + ", ".join(map_texts) + "]",
                            **rest})
        self._last = (backends, map_texts, rest, data)
        return data


def _same(texts: list[str], before: list[str]) -> bool:
    """The very texts of last time (each reused by identity), in the same order."""
    return len(texts) == len(before) and all(a is b for a, b in zip(texts, before, strict=True))


def parse(data: Any, read: Callable[[str], bytes]) -> Description:
    """A description.json's content, its referenced map entries read with ``read`` (a path relative to
    its directory). Raises ValueError naming what is wrong, OSError when a referenced file cannot be read."""
    if isinstance(data, dict) and isinstance(data.get("maps"), list):
        maps = []
        for m in data["maps"]:
            if isinstance(m, dict) and "entries" not in m and isinstance(m.get(ENTRIES_FILE), str):
                try:
                    entries = list(lines_of(read(m[ENTRIES_FILE])))
                except UnicodeDecodeError as exc:
                    raise ValueError(f"{m[ENTRIES_FILE]}: {exc}") from exc
                m = {**{k: v for k, v in m.items() if k != ENTRIES_FILE}, "entries": entries}
            maps.append(m)
        data = {**data, "maps": maps}
    return Description.from_dict(data)


def read(directory: Path) -> Description:
    """The description promoted in ``directory`` (a version directory, or a ``render --out`` one).
    Blocking I/O. Raises OSError, ValueError (malformed, naming the field or file)."""

    def relative(path: str) -> bytes:
        try:
            return directory.joinpath(*scratches.safe_relative(path).parts).read_bytes()
        except scratches.UnsafePath as exc:
            raise ValueError(f"{FILE}: {exc}") from exc

    return parse(json.loads((directory / FILE).read_bytes()), relative)
