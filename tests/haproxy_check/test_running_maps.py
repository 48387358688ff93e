"""``running`` compares the data plane's maps with a description's by digests of their normalized entries
(``running.MapSeen``) instead of keeping every entry as a ``(key, value)`` tuple: the same answers as the
tuple comparison it replaced, on seeded random maps (spacing, duplicates, order, one entry changed, one
missing or extra), ordered and not, read through ``observe`` from ``show map`` answers."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from haproxy_check.descriptions import Description, MapDesc
from haproxy_check.runtime import running, runtimeapi

PATH = "/etc/haproxy/maps/m.map"
WORDS = ("a", "b", "/api", "x.example.com", "gw_h_team-00_route-0_svc-0_8080", "0:rid", "a\tb", "")


def _reference(answer: str, entries: tuple[str, ...], ordered: bool) -> bool:
    """The comparison before ``MapSeen``: every entry as a (key, value) tuple, lists compared."""
    def entry(line: str) -> tuple[str, str]:
        key, _, value = line.strip().partition(" ")
        return key, value.strip()

    live = tuple(entry(line.split(" ", 1)[1]) for line in answer.splitlines() if line.startswith("0x") and " " in line)
    want = tuple(entry(e) for e in entries)
    return live == want if ordered else sorted(live) == sorted(want)


def _line(rng: random.Random) -> str:
    key = rng.choice(WORDS[:-1]).replace("\t", "") or "k"
    value = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
    return rng.choice(("", " ")) + key + rng.choice((" ", "  ", " \t")) + value + rng.choice(("", " ", "\t"))


def _variant(rng: random.Random, entries: list[str]) -> list[str]:
    out = list(entries)
    how = rng.choice(("same", "shuffled", "respaced", "changed", "missing", "extra", "duplicated"))
    if how == "shuffled":
        rng.shuffle(out)
    elif how == "respaced" and out:
        at = rng.randrange(len(out))
        key, _, value = out[at].strip().partition(" ")
        out[at] = f"  {key}   {value.strip()}  "
    elif how == "changed" and out:
        out[rng.randrange(len(out))] = _line(rng)
    elif how == "missing" and out:
        del out[rng.randrange(len(out))]
    elif how == "extra":
        out.insert(rng.randint(0, len(out)), _line(rng))
    elif how == "duplicated" and out:
        at = rng.randrange(len(out))
        out[rng.randrange(len(out))] = out[at]
    return out


def _answer(rng: random.Random, lines: list[str]) -> str:
    """``show map`` as HAProxy prints it: the entry's address, then the line; a header line, a blank one, and
    lines that are no entry (no space after the address, no address)."""
    return ("# id (file) description\n0xdeadbeef\nx0x1 a b\n"
            + "".join(f"0x{rng.getrandbits(48):x} {line}\n" for line in lines) + "\n")


@pytest.mark.parametrize("seed", range(12))
def test_digests_answer_as_the_tuples_did(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    agreed = differed = 0
    for _ in range(150):
        described = [_line(rng) for _ in range(rng.randint(0, 12))]
        live = _variant(rng, described)
        answer = _answer(rng, live)

        async def send_bytes(socket_path: str, line: str, *args: Any, shown: str = answer,
                             **kwargs: Any) -> bytearray:
            return bytearray(shown.encode() if line.startswith("show map") else b"")

        async def send(socket_path: str, line: str, *args: Any, **kwargs: Any) -> str:
            return (await send_bytes(socket_path, line, *args, **kwargs)).decode()

        monkeypatch.setattr(runtimeapi, "send_bytes", send_bytes)
        monkeypatch.setattr(runtimeapi, "send", send)
        observed = asyncio.run(running.observe("/unused.sock", [PATH]))
        for ordered in (True, False):
            description = Description(maps=(MapDesc(PATH, ordered, tuple(described)),))
            want = _reference(answer, tuple(described), ordered)
            assert running.matches(observed, description, frozenset()) is want, (ordered, described, live)
            agreed += want
            differed += not want
    assert agreed > 50 and differed > 50  # both answers were put to the test


def test_candidates_share_the_digest_of_a_map_they_share() -> None:
    entries = tuple(f"{n}:r b{n % 3}" for n in range(100))
    observed = running.Observed(frozenset(), {}, {PATH: running.seen(entries)})
    same = Description(maps=(MapDesc(PATH, False, entries),))
    other = Description(maps=(MapDesc(PATH, False, entries[:-1]),), frame="other")
    known: dict[int, Any] = {}
    assert running.matches(observed, same, frozenset(), known)
    assert not running.matches(observed, other, frozenset(), known)
    assert set(known) == {id(entries), id(other.maps[0].entries)}
    assert running.which(observed, [("v2", other), ("v1", same)]) == "v1"
