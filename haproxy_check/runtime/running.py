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
"""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Observed:
    """What the data plane runs, as its Runtime API shows it."""

    backends: frozenset[str]
    servers: dict[str, dict[str, Server]]  # backend -> server name -> state
    maps: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # path -> (key, value) in order


def _entry(line: str) -> tuple[str, str]:
    key, _, value = line.strip().partition(" ")
    return key, value.strip()


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
    maps: dict[str, tuple[tuple[str, str], ...]] = {}
    for path in sorted(set(map_paths)):
        answer = await ask(f"show map {cli_word(path, what='map path')}")
        maps[path] = tuple(_entry(line.split(" ", 1)[1]) for line in answer.splitlines()
                           if line.startswith("0x") and " " in line)
    return Observed(names, servers, maps)


def matches(observed: Observed, description: Description, universe: frozenset[str]) -> bool:
    """Whether the data plane's records are ``description``'s: of the backends in ``universe`` (those
    any candidate describes) exactly its own exist, with its servers, and its maps hold its entries."""
    if observed.backends & universe != {b.name for b in description.backends}:
        return False
    for backend in description.backends:
        want = {s.name: (s.address, s.port, s.weight, MAINT_KEYWORD in s.options) for s in backend.servers}
        if observed.servers.get(backend.name, {}) != want:
            return False
    for described in description.maps:
        live = observed.maps.get(described.path)
        want_entries = tuple(_entry(e) for e in described.entries)
        if live is None:
            return False
        if described.ordered and live != want_entries:
            return False
        if not described.ordered and sorted(live) != sorted(want_entries):
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
    found = [(version, d) for version, d in candidates if matches(observed, d, universe)]
    if not found or len({_unseen(d) for _, d in found}) != 1:
        return None
    return found[0][0]
