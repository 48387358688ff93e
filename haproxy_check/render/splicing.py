"""Splicing: the previous full render's files with one change's closure output swapped in, as text.

``haproxy_check.render.patching`` renders the change's closure before and after the change (``O`` and
``N``); this module applies ``O -> N`` to the previous full output ``P``. The units it moves are the
ones the renderer itself orders, and it places them by the renderer's own order:

- ``haproxy.cfg``: sections (a header line at column 0 and its body). A section O and N both have
  and that differs is replaced only when P's text equals O's: the section is then wholly made of
  closure members (a frontend that also holds rules of routes outside the closure is "partial" and
  refused). A new section is inserted only into a family whose order is its name
  (``backend gw_h_*``: ``600-http-backends`` sorts by name; ``defaults haptic-be-*``: profile
  sections sorted by name). A profile section leaves only when no backend ``from`` it remains.
- unordered maps (``RegisterMap`` sorts and de-duplicates them): a sorted set of lines.
- ``weighted-multi-backend.map``: ordered by (rule id, slot), both read off the line.
- other ordered maps (``path-regex.map``, ``https-listener-wildcard.map``): their order is a
  precedence the text does not carry: a change to them is refused.
- other files (certificates, CAs): whole files by path.

Whatever cannot be placed by these rules raises ``Unspliceable`` naming why; the caller renders in full.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONFIG = "haproxy.cfg"
WEIGHTED = "maps/weighted-multi-backend.map"
# section families whose order in haproxy.cfg is their name's (keyword, name prefix, sort key)
_FAMILIES: tuple[tuple[str, str, Callable[[str], str]], ...] = (
    ("backend", "gw_h_", str.lower),  # 600-http-backends: jinja2's dictsort, case-insensitive
    ("defaults", "haptic-be-", str),  # Recorder.profile_sections: sorted by name
)


class Unspliceable(Exception):
    """The change cannot be placed into the previous output by the splicing rules (the reason)."""


@dataclass(slots=True)
class Sections:
    """haproxy.cfg as its sections, in order: (header line, the section's whole text)."""

    keys: list[str]
    texts: list[str]

    @classmethod
    def of(cls, text: str) -> Sections:
        keys: list[str] = []
        texts: list[str] = []
        start = 0
        lines = text.split("\n")
        pos = 0
        header = ""
        for line in lines:
            if line and not line[0].isspace() and line[0] != "#":
                if pos > start or keys:
                    keys.append(header)
                    texts.append(text[start:pos])
                start, header = pos, line
            pos += len(line) + 1
        end = len(text)
        if end > start or keys or header:
            keys.append(header)
            texts.append(text[start:end])
        return cls(keys, texts)

    def text(self) -> str:
        return "".join(self.texts)

    def by_key(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, text in zip(self.keys, self.texts, strict=True):
            if key in out:
                raise Unspliceable(f"section {key!r} comes twice")
            out[key] = text
        return out


def _name(key: str) -> tuple[str, str]:
    parts = key.split()
    return (parts[0], parts[1]) if len(parts) > 1 else (parts[0] if parts else "", "")


def _family(key: str) -> tuple[str, str, Callable[[str], str]] | None:
    keyword, name = _name(key)
    for family in _FAMILIES:
        if keyword == family[0] and name.startswith(family[1]):
            return family
    return None


def splice_config(previous: Sections, before: str, after: str) -> tuple[Sections, set[str], set[str]]:
    """``previous`` with the closure's sections changed from ``before`` to ``after``; also the profile
    names that left and came (the description follows them)."""
    old, new = Sections.of(before).by_key(), Sections.of(after).by_key()
    if old.keys() == new.keys() and all(old[k] == new[k] for k in old):
        return previous, set(), set()
    keys, texts = list(previous.keys), list(previous.texts)
    where = {key: i for i, key in enumerate(keys)}
    if len(where) != len(keys):
        raise Unspliceable("a section header comes twice in the previous configuration")
    removed: list[str] = []
    added: list[str] = []
    for key in sorted(old.keys() | new.keys()):
        o, n = old.get(key), new.get(key)
        if o == n:
            continue
        i = where.get(key)
        p = texts[i] if i is not None else None
        if o is not None and n is not None:
            if p is None:
                raise Unspliceable(f"section {key!r} is not in the previous configuration")
            texts[i] = n if p == o else in_place(key, p, o, n)  # type: ignore[index]
        elif o is not None:
            if p != o:
                raise Unspliceable(f"section {key!r} also holds objects outside the closure")
            removed.append(key)
        else:
            assert n is not None
            if p is not None:
                if p != n:
                    raise Unspliceable(f"new section {key!r} differs from the one in the configuration")
                continue  # shared (a profile other backends use too)
            added.append(key)
    gone_profiles: set[str] = set()
    drop = set()
    for key in removed:
        keyword, name = _name(key)
        if keyword == "defaults" and name.startswith("haptic-be-"):
            gone_profiles.add(name)
            continue  # decided below, once the backends are in place
        drop.add(key)
    if drop:
        keep = [i for i, key in enumerate(keys) if key not in drop]
        keys, texts = [keys[i] for i in keep], [texts[i] for i in keep]
    for key in added:
        family = _family(key)
        if family is None:
            raise Unspliceable(f"new section {key!r}: its place in the configuration is not its name's")
        _insert(keys, texts, key, new[key], family)
    config = "".join(texts)
    left: set[str] = set()
    for name in sorted(gone_profiles):
        if f" from {name}\n" in config:
            continue  # other backends still use it
        i = keys.index(f"defaults {name}")
        del keys[i], texts[i]
        left.add(name)
    came = {_name(k)[1] for k in added if _name(k)[0] == "defaults"}
    return Sections(keys, texts), left, came


_SELECT = re.compile(r"    http-request set-var\(txn\.gw_sel\) str\(([0-9]+)\|")


def in_place(key: str, previous: str, before: str, after: str) -> str:
    """A section that also holds lines of objects outside the closure (a Gateway's frontend holds every
    attached route's advanced match lines): the closure's lines changed in place, where that keeps the
    renderer's order. Only an advanced match line may change, under the same comment (route, rule,
    match and what it matches: the precedence key's method, header and query counts) and with the same
    score (the key's first member); the key's other members (age, namespace, name) are the patcher's
    to keep (``patching`` renders in full when a changed object's age moved). Anything else (a line
    more or less, a block that comes or goes) is refused."""
    old, new = before.split("\n"), after.split("\n")
    if len(old) != len(new):
        raise Unspliceable(f"section {key!r} also holds objects outside the closure, and its lines changed")
    lines = previous.split("\n")
    at: dict[str, int] = {}
    for j, line in enumerate(lines):
        at[line] = -1 if line in at else j  # -1: more than once
    for j, (o, n) in enumerate(zip(old, new, strict=True)):
        if o == n:
            continue
        so, sn = _SELECT.match(o), _SELECT.match(n)
        if (so is None or sn is None or so.group(1) != sn.group(1) or j == 0 or old[j - 1] != new[j - 1]
                or not old[j - 1].startswith("    # ")):
            raise Unspliceable(f"section {key!r} also holds objects outside the closure, and a line changed "
                               "that is not an advanced match line keeping its place")
        k = at.get(o, -1)
        if k <= 0 or lines[k - 1] != old[j - 1]:
            raise Unspliceable(f"section {key!r}: a changed line is not once in the previous section")
        lines[k] = n
    return "\n".join(lines)


def _insert(keys: list[str], texts: list[str], key: str, text: str,
            family: tuple[str, str, Callable[[str], str]]) -> None:
    keyword, prefix, order = family
    members = [i for i, k in enumerate(keys) if _family(k) is family]
    if not members:
        raise Unspliceable(f"new section {key!r}: no section of its family to place it by")
    if members[-1] - members[0] + 1 != len(members):
        raise Unspliceable(f"the {keyword} {prefix}* sections are not together")
    names = [order(_name(keys[i])[1]) for i in members]
    at = bisect.bisect_left(names, order(_name(key)[1]))
    pos = members[0] + at
    keys.insert(pos, key)
    texts.insert(pos, text)


def map_lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text else []


def map_text(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def _weighted_key(line: str) -> tuple[str, int]:
    slot, _, rest = line.partition(":")
    return (rest.split(" ", 1)[0], int(slot))


def splice_map(path: str, ordered: bool, previous: list[str], before: str, after: str) -> list[str]:
    """``previous`` (the map's lines) with the closure's lines changed from ``before`` to ``after``."""
    if before == after:
        return previous
    old, new = map_lines(before), map_lines(after)
    old_set = set(old)
    gone = old_set - set(new)
    came = [line for line in new if line not in old_set]
    if ordered and path != WEIGHTED:
        return _ordered_in_place(path, previous, old, new)
    key: Callable[[str], Any] = _weighted_key if path == WEIGHTED else _plain
    lines = list(previous)
    for line in sorted(gone, key=key):
        i = bisect.bisect_left(lines, key(line), key=key)
        if i >= len(lines) or lines[i] != line:
            raise Unspliceable(f"{path}: line {line!r} of the closure is not in the previous map")
        del lines[i]
    for line in came:
        i = bisect.bisect_left(lines, key(line), key=key)
        if i < len(lines) and lines[i] == line:
            continue  # an object outside the closure writes it too (unordered maps are de-duplicated)
        lines.insert(i, line)
    return lines


def _ordered_in_place(path: str, previous: list[str], old: list[str], new: list[str]) -> list[str]:
    """An ordered map whose order is a precedence the lines do not carry (``path-regex.map``): the
    closure's lines changed in place, when each keeps its value (``score|rule id|prefix length|what it
    matches``: the precedence key but for the route's age, which the patcher keeps) and its place
    among the closure's lines; a line more or less, or one whose value changed, is refused."""
    if len(old) != len(new):
        raise Unspliceable(f"{path}: an ordered map whose order the lines do not carry gained or lost lines")
    at: dict[str, int] = {}
    for j, line in enumerate(previous):
        at[line] = -1 if line in at else j
    lines = list(previous)
    for o, n in zip(old, new, strict=True):
        if o == n:
            continue
        if o.rsplit(" ", 1)[-1] != n.rsplit(" ", 1)[-1]:
            raise Unspliceable(f"{path}: a line of an ordered map changed its value (its precedence)")
        k = at.get(o, -1)
        if k < 0:
            raise Unspliceable(f"{path}: a changed line is not once in the previous map")
        lines[k] = n
    return lines


def _plain(line: str) -> str:
    return line


def splice_files(previous: Mapping[str, bytes], before: Mapping[str, bytes], after: Mapping[str, bytes],
                 ) -> dict[str, bytes]:
    """Whole files by path (certificates, CAs, other payloads)."""
    out = dict(previous)
    for path in before.keys() | after.keys():
        o, n = before.get(path), after.get(path)
        if o == n:
            continue
        p = previous.get(path)
        if o is not None and p != o:
            raise Unspliceable(f"{path}: differs from the closure's own version")
        if n is None:
            out.pop(path, None)
        else:
            if o is None and p is not None and p != n:
                raise Unspliceable(f"{path}: written differently outside the closure")
            out[path] = n
    return out
