"""The runtime plan's map diff reads only the lines that differ (O(change)); differential test against the
whole-map diff it replaced (every line parsed, keys compared as dicts), on random maps and changes."""

from __future__ import annotations

import random
import re
from typing import Any

from haproxy_check.descriptions import MapDesc
from haproxy_check.runtime import runtimeplans
from haproxy_check.runtime.runtimeplans import UNORDERED_REPLACE_AFTER, Command, UnsafeValue, _Draft, cli_word

_ENTRY = re.compile(r"\s*(\S+)\s*(.*?)\s*$")


def _reference_entry(line: str) -> tuple[str, str]:
    match = _ENTRY.match(line)
    return (match.group(1), match.group(2)) if match else ("", "")


def _reference(old: MapDesc, new: MapDesc) -> tuple[str, list[str]] | None:
    """What the whole-map diff decided: None (nothing), ("replace", []) or ("update", command lines)."""
    if old.entries == new.entries:
        return None
    old_pairs = [_reference_entry(e) for e in old.entries]
    new_pairs = [_reference_entry(e) for e in new.entries]
    old_keys, new_keys = dict(old_pairs), dict(new_pairs)
    if not new.ordered and len(old_keys) == len(old_pairs) and len(new_keys) == len(new_pairs):
        if old_keys == new_keys:
            return None
        added = [e for e, (k, _) in zip(new.entries, new_pairs, strict=True) if k not in old_keys]
        changed = [(k, v) for k, v in new_pairs if k in old_keys and old_keys[k] != v]
        removed = [k for k, _ in old_pairs if k not in new_keys]
        if len(changed) + len(removed) <= UNORDERED_REPLACE_AFTER:
            path = "maps/m.map"
            return ("update", [f"add {e}" for e in added]
                    + [f"set map {path} {cli_word(k, what='map key')} {cli_word(v, what='map value')}"
                       for k, v in changed]
                    + [f"del map {path} {cli_word(k, what='map key')}" for k in removed])
    return ("replace", [])


def _planned(old: MapDesc, new: MapDesc) -> tuple[str, list[str]] | None:
    draft = _Draft((3, 4), None)
    runtimeplans._map_change(old, new, draft)
    updates = [c for _, _, cmds in draft.map_updates for c in cmds]
    deletes = [c for _, _, cmds in draft.map_deletes for c in cmds]
    if not updates and not deletes:
        return None
    if any(c.line.startswith("prepare map") for c in updates):
        return ("replace", [])
    return ("update", _words(updates) + _words(deletes))


def _words(commands: list[Command]) -> list[str]:
    out = []
    for c in commands:
        if c.line.startswith("add map"):
            out += [f"add {line}" for line in c.payload]
        else:
            out.append(c.line)
    return out


def _outcome(how: Any, a: MapDesc, b: MapDesc) -> Any:
    try:
        return how(a, b)
    except UnsafeValue as exc:  # a value the CLI cannot carry: the plan says reload (runtimeplans._maps)
        return ("unsafe", str(exc))


KEYS = [f"/k{i}" for i in range(40)]
VALUES = ["a", "b", "be_x", "1", "v w", "x y z"]


def _line(rng: random.Random) -> str:
    key, value = rng.choice(KEYS), rng.choice(VALUES)
    return rng.choice([f"{key} {value}", f"  {key}\t{value}  ", f"{key}  {value}", f"{key}", f"{key} {value} "])


def test_map_diff_reads_only_changed_lines_and_decides_as_the_whole_map_diff() -> None:
    rng = random.Random(28)
    chained: MapDesc | None = None
    for _ in range(3000):
        size = rng.randrange(0, 30)
        old = list(dict.fromkeys(_line(rng) for _ in range(size)))
        if rng.random() < 0.7:  # mostly unique keys: the update path
            seen: set[str] = set()
            old = [e for e in old if not (e.split()[0] in seen or seen.add(e.split()[0]))]  # type: ignore[func-returns-value]
        if chained is not None and rng.random() < 0.5:  # plan on from the last new map (its keys remembered)
            old = list(chained.entries)
        new = list(old)
        for _ in range(rng.randrange(0, 5)):
            op = rng.random()
            if op < 0.3 and new:
                new.pop(rng.randrange(len(new)))
            elif op < 0.6:
                new.insert(rng.randrange(len(new) + 1), _line(rng))
            elif op < 0.8 and new:
                i = rng.randrange(len(new))
                new[i] = new[i].split()[0] + " " + rng.choice(VALUES)
            else:
                rng.shuffle(new)
        ordered = rng.random() < 0.2
        a = chained if chained is not None and list(chained.entries) == old else MapDesc("maps/m.map", ordered,
                                                                                        tuple(old))
        a = MapDesc("maps/m.map", ordered, a.entries)
        b = MapDesc("maps/m.map", ordered, tuple(new))
        assert _outcome(_planned, a, b) == _outcome(_reference, a, b), (old, new)
        chained = b


def test_map_entry_split_is_the_regex_split() -> None:
    rng = random.Random(7)
    alphabet = ["a", "b", " ", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x85", "\u2003", "\u00a0", "/", "\n"]
    for _ in range(20000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
        assert runtimeplans._entry(line) == _reference_entry(line), repr(line)
