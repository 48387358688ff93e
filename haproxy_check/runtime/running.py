"""Which promoted version a running data plane has loaded, read over its stats socket.

A reconcile process that starts (or loses track after a reload it could not signal) does not know
what the data plane runs: HAProxy may have started on a version promoted before the pid file existed,
or been reloaded by a wrapper. The planner needs that version's description to plan the next change at
runtime; without it every next change is a reload (rule 1).

What the Runtime API shows is compared with each kept version's description: ``show backend`` (which
of the backends the versions describe exist), ``show servers state`` (each described server's address,
port, weight and maintenance state) and ``show map`` (each described map's entries, in order for an
ordered map). The newest version that matches is the answer, provided every matching version has the
same configuration outside those records (frame, profiles, files: what the socket cannot show);
otherwise, or when nothing matches, the answer is None (unknown: the caller reloads).

A map is kept as what the comparison needs, not as its entries: how many, a SHA-256 of its entries (each
``key value``, normalized as the socket prints it) in order, and a keyed multiset hash of them for a map
whose order does not matter (``MapSeen``), each made in one pass over the answer's lines. At 10,000
routes the data plane's maps hold about a million entries: kept as ``(key, value)`` tuples, with the same
tuples made again from every candidate's description, reading them took over 500 MiB at once, more than
half the reconciler's steady state again.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from haproxy_check.descriptions import Description
from haproxy_check.runtime import runtimeapi
from haproxy_check.runtime.runtimeplans import MAINT_KEYWORD, cli_word

# what one ``show`` may answer: every server or map entry of a large configuration (a truncated answer
# would match no version, and the caller reloads)
ANSWER_LIMIT = 256 << 20
# srv_admin_state bits of a server in maintenance: forced (``set server ... state maint``, and the
# ``disabled`` keyword, which sets it with 0x04, "from the configuration") or inherited (a tracked server).
# 0x04 alone stays after ``set server ... state ready`` on a server configured ``disabled``: it serves
# (2.8 and 3.4 answer 5 for a ``disabled`` server, 4 once it is made ready).
_MAINT_BITS = 0x01 | 0x02

Server = tuple[str, int, int, bool]  # address, port, weight, in maintenance
# a ``show map`` line: the entry's address, a space, then the entry as the map file has it
_MAP_LINE = re.compile(rb"^0x[^ \n]* ([^\n]*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Observed:
    """What the data plane runs, as its Runtime API shows it."""

    backends: frozenset[str]
    servers: dict[str, dict[str, Server]]  # backend -> server name -> state
    maps: dict[str, MapSeen] = field(default_factory=dict)  # path -> its entries, as compared


@dataclass(frozen=True, slots=True)
class MapSeen:
    """A map's entries as ``matches`` compares them: their number, and digests of their normalized lines
    in order (an ordered map: first match wins) and as a multiset (any other; duplicates count)."""

    count: int
    in_order: bytes
    as_set: int


def _entry(line: str) -> tuple[str, str]:
    key, _, value = line.strip().partition(" ")
    return key, value.strip()


# per process: whoever writes map entries cannot aim two different sets of them at one sum
_SET_KEY = os.urandom(16)
_SET_MODULUS = 1 << 128


def seen(entries: Iterable[str]) -> MapSeen:
    """``entries`` (map lines, ``key value``) as compared, in one pass with nothing kept per entry: each
    normalized as ``_entry`` reads it, a SHA-256 over them in order (each after its length: no two
    sequences hash alike), and for the multiset the sum of their keyed 128-bit BLAKE2b digests (equal for
    the same entries in any order, duplicates counted; a sort of a million entries would hold them all)."""
    count, as_set = 0, 0
    in_order = hashlib.sha256()
    for line in entries:
        key, value = _entry(line)
        data = f"{key} {value}".encode(errors="surrogatepass")  # keys have no space: (key, value) <-> line
        in_order.update(len(data).to_bytes(8, "little"))
        in_order.update(data)
        as_set += int.from_bytes(hashlib.blake2b(data, digest_size=16, key=_SET_KEY).digest(), "little")
        count += 1
    return MapSeen(count, in_order.digest(), as_set % _SET_MODULUS)


def _seen_answer(answer: bytes | bytearray) -> MapSeen:
    # a line break never occurs inside a UTF-8 sequence: decoding each line is decoding the whole
    return seen(found[1].decode(errors="replace") for found in _MAP_LINE.finditer(answer))


async def observe(socket_path: str, map_paths: Iterable[str], *, timeout: float = runtimeapi.COMMAND_TIMEOUT,
                  ) -> Observed:
    """Ask the data plane; raises ``runtimeapi.SocketError`` when it does not answer."""
    async def ask(command: str) -> str:
        return await runtimeapi.send(socket_path, command, timeout=timeout, limit=ANSWER_LIMIT)

    names = frozenset(line.strip() for line in (await ask("show backend")).splitlines()
                      if line.strip() and not line.startswith("#"))
    servers: dict[str, dict[str, Server]] = {}
    header: list[str] = []
    for line in (await ask("show servers state")).splitlines():
        if line.startswith("# be_id"):
            header = line[2:].split()
            continue
        words = line.split()
        if not header or len(words) < len(header) or not words[0].isdigit():
            continue
        row = dict(zip(header, words, strict=False))
        try:
            state = (row["srv_addr"], int(row["srv_port"]), int(row["srv_uweight"]),
                     bool(int(row["srv_admin_state"]) & _MAINT_BITS))
        except (KeyError, ValueError):
            continue
        servers.setdefault(row["be_name"], {})[row["srv_name"]] = state
    maps: dict[str, MapSeen] = {}
    for path in sorted(set(map_paths)):
        answer = await runtimeapi.send_bytes(socket_path, f"show map {cli_word(path, what='map path')}",
                                             timeout=timeout, limit=ANSWER_LIMIT)
        # one line at a time off the answer's bytes (``0x<entry address> <key> <value>``), each decoded on
        # its own: no text of the whole answer, no list of its lines (nor io.StringIO, which holds its text
        # at 4 bytes a character); off the event loop (seconds for a million entries)
        maps[path] = await asyncio.to_thread(_seen_answer, answer)
        del answer
    return Observed(names, servers, maps)


def matches(observed: Observed, description: Description, universe: frozenset[str],
            described: dict[int, tuple[tuple[str, ...], MapSeen]] | None = None) -> bool:
    """Whether the data plane's records are ``description``'s: of the backends in ``universe`` (those
    any candidate describes) exactly its own exist, with its servers, and its maps hold its entries.
    ``described``: each map's ``seen`` by its entries' identity, shared by the candidates (versions share
    an unchanged map's entries)."""
    if observed.backends & universe != {b.name for b in description.backends}:
        return False
    for backend in description.backends:
        want = {s.name: (s.address, s.port, s.weight, MAINT_KEYWORD in s.options) for s in backend.servers}
        if observed.servers.get(backend.name, {}) != want:
            return False
    known = described if described is not None else {}
    for desc in description.maps:
        live = observed.maps.get(desc.path)
        if live is None:
            return False
        cached = known.get(id(desc.entries))
        if cached is None or cached[0] is not desc.entries:  # held beside: the id stays theirs
            cached = known[id(desc.entries)] = (desc.entries, seen(desc.entries))
        entries = cached[1]
        if live.count != entries.count:
            return False
        if (entries.in_order != live.in_order) if desc.ordered else (entries.as_set != live.as_set):
            return False
    return True


def _unseen(description: Description) -> tuple[object, ...]:
    """What the socket cannot show: two versions equal in this and in what it shows are one to plan from."""
    return (description.frame, description.profiles, description.files,
            tuple((b.name, b.mode, b.balance, b.hash_type, b.profile, b.body, b.default_server, b.guid,
                   tuple((s.name, s.options) for s in b.servers)) for b in description.backends))


def which(observed: Observed, candidates: Sequence[tuple[str, Description]]) -> str | None:
    """The newest of ``candidates`` (newest first) the data plane runs, or None (see the module docstring)."""
    universe = frozenset(b.name for _, d in candidates for b in d.backends)
    described: dict[int, tuple[tuple[str, ...], MapSeen]] = {}
    found = [(version, d) for version, d in candidates if matches(observed, d, universe, described)]
    if not found or len({_unseen(d) for _, d in found}) != 1:
        return None
    return found[0][0]
