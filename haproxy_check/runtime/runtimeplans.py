"""The runtime plan: from the description a data plane runs to the next one, by Runtime API or reload.

Pure data in, data out (seeds 000 and 001). ``plan(old, new, dataplane_version=...)`` compares two
Descriptions (Backend()/RegisterMap() records, plus the digest of the configuration outside them) and
returns either an ordered list of Runtime API commands or RELOAD with every reason. Rules (numbered;
tests and reasons cite them):

  1. no previous description -> RELOAD.
  2. configuration text outside the structured helpers changed (frontends, rules, global) -> RELOAD.
  3. a named defaults profile was added or its settings changed -> RELOAD (later backends reuse it).
  4. a backend was created or deleted: runtime only on HAProxy >= 3.4, for a dynamic backend whose
     profile was already loaded, whose balance/hash settings the profile gives, and whose servers use
     only keywords ``add server`` supports (``add backend NAME from PROFILE``, its servers, ``publish
     backend``; removal: ``unpublish backend``, servers to maintenance, ``wait be-removable``, ``del
     backend``).
  5. an existing backend's mode, profile, guid, balance, hashType, defaultServer or body changed -> RELOAD.
  6. a server was added (``add server`` + ``enable server`` (+ ``enable health`` with checks)) or removed
     (``set server ... state maint``, wait until removable, ``del server``); under ``static-rr`` or
     map-based hashing, or with keywords ``add server`` does not support -> RELOAD.
  7. an existing server's address/port (``set server ... addr``), weight (``set weight``) or maintenance
     state (the ``disabled`` keyword: ``set server ... state``) changed; any other keyword -> RELOAD.
  8. map entries changed in a map the running configuration loads: ``add map`` / ``set map`` / ``del
     map`` per entry for unordered maps; an atomic replace (``prepare map``, ``add map @ver``, ``commit
     map @ver``) for ordered maps (and unordered ones with duplicate keys or many changes). A map the
     running configuration does not load -> RELOAD.
  9. certificate or CA contents changed: ``set ssl cert`` + ``commit ssl cert`` (``ssl ca-file`` for CAs);
     any other file -> RELOAD (HAProxy reads it only at load).
 10. nothing changed -> NONE.

Command order: certificates, new backends, server additions and updates, map additions and updates
(maps read last in a request first, so a new host never points at a rule id not yet mapped), map
deletions (the other way round), server removals, backend removals.

Every value sent is user data: ``cli_word`` escapes what the CLI would split on and refuses control
characters, so no value can end a command or start another; a value that cannot be sent safely makes
the plan a reload.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from haproxy_check import escaping
from haproxy_check.descriptions import BackendDesc, Description, FileDesc, MapDesc, ProfileDesc, ServerDesc

MAX_REASONS = 32
UNRECORDED = "unrecorded"  # the frame of a description.json written before frames were recorded
RUNTIME_BACKENDS = (3, 4)  # add/publish/unpublish/del backend
WAIT_COMMAND = (3, 0)  # `wait srv-removable` (older: retry `del server` until it succeeds)
DYNAMIC_SERVERS = (2, 4)
CA_FILE_UPDATES = (2, 5)
UNSUPPORTED_BY_ADD_SERVER = frozenset({"no-check", "resolvers", "init-addr"})
MAINT_KEYWORD = "disabled"  # a server line keyword that is a state, not a setting
UNORDERED_REPLACE_AFTER = 64  # more single-entry updates than this: one atomic replace instead
REMOVABLE_WAIT = "5s"
REMOVABLE_RETRY = 5.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CLI_SPECIAL = re.compile(r"([\\; ])")
_CHECK_KEYWORDS = frozenset({"check"})
# ``set server B/S addr A port P`` answers, as the binaries give them (tests/haproxy_check/
# test_runtime_answers.py records them live): 2.8 "IP changed from 'x' to 'y', no need to change the
# port ..." / "no need to change the addr, port changed from ..." / "no need to change the addr, no need
# to change the port ..."; 3.2 and 3.4 "IP changed from ...", "port changed from ..." (a port-only move)
# and "nothing changed". Each is success: the server is at the address and port asked for.
SET_ADDR_ANSWER = r"^(IP changed from|port changed from|no need to change the addr|nothing changed$)"
# ``set ssl cert`` answers "Transaction created for certificate F!" (or "updated"), ``set ssl ca-file``
# "transaction created for CA F!" (lower case, 2.8 to 3.4); both commits end in "Success!".
SET_SSL_ANSWER = {"cert": r"^Transaction (created|updated) for certificate ",
                  "ca-file": r"^transaction (created|updated) for CA "}
COMMIT_SSL_ANSWER = r"Success!"


class UnsafeValue(ValueError):
    """A value that cannot travel on the Runtime API as one argument."""


def cli_word(value: str, *, what: str) -> str:
    """``value`` as one argument of a CLI command: backslash, space and ``;`` (the CLI's word and command
    separators) escaped; control characters (a newline would end the command) refused."""
    if not value:
        raise UnsafeValue(f"{what} is empty")
    if _CONTROL.search(value):
        raise UnsafeValue(f"{what} {value!r} has a control character")
    return _CLI_SPECIAL.sub(r"\\\1", value)


def payload_line(value: str, *, what: str) -> str:
    """One line of a ``<<`` payload, sent raw: it must not end the payload (empty) or split (newline)."""
    if not value.strip():
        raise UnsafeValue(f"{what} is empty")
    if _CONTROL.search(value.replace("\t", " ")):
        raise UnsafeValue(f"{what} {value!r} has a control character")
    return value


def _payload_lines(values: tuple[str, ...], *, what: str) -> tuple[str, ...]:
    """``payload_line`` on every value, checked at once (a whole map is tens of thousands of lines); a
    value that fails is found and named by the one-by-one check."""
    if all(map(str.strip, values)) and not _CONTROL.search(" ".join(values).replace("\t", " ")):
        return values
    return tuple(payload_line(v, what=what) for v in values)


class Action(StrEnum):
    NONE = "none"
    RUNTIME = "runtime"
    RELOAD = "reload"


@dataclass(frozen=True, slots=True)
class Command:
    """One Runtime API command and how to tell that it worked.

    ``versioned``: the line's verb takes the map version the preceding ``prepare map`` answered
    (``add map @<ver> ...``, ``commit map @<ver> ...``); ``captures_version``: this is that ``prepare
    map``. ``payload_file``: the payload is that render file's contents (certificates; kept out of the
    printed plan). ``retry``: seconds to repeat the command until its answer is the expected one (a
    server that still has connections cannot be deleted yet)."""

    line: str
    expect: str  # regular expression searched in the answer
    rule: int
    why: str
    payload: tuple[str, ...] = ()
    payload_file: str = ""
    versioned: bool = False
    captures_version: bool = False
    retry: float = 0.0

    def text(self) -> str:
        """The command as printed: ``@<ver>`` for the version, the payload's line count or file."""
        line = self.line
        if self.versioned:
            verb, rest = _split_verb(line)
            line = f"{verb} @<ver> {rest}"
        if self.payload:
            line += f" <<{len(self.payload)} line{'s' if len(self.payload) != 1 else ''}>>"
        elif self.payload_file:
            line += f" <<contents of {self.payload_file}>>"
        return line

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.text(), "rule": self.rule, "why": self.why}
        if self.payload:
            out["payload"] = list(self.payload)
        return out


def _split_verb(line: str) -> tuple[str, str]:
    words = line.split(" ", 2)
    return " ".join(words[:2]), words[2] if len(words) > 2 else ""


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action
    commands: tuple[Command, ...] = ()
    reasons: tuple[str, ...] = ()  # why a reload (empty otherwise)
    dataplane_version: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"action": str(self.action), "dataplaneVersion": ".".join(map(str, self.dataplane_version)),
                "reasons": list(self.reasons), "commands": [c.as_dict() for c in self.commands]}

    def text(self) -> str:
        version = ".".join(map(str, self.dataplane_version))
        if self.action is Action.RELOAD:
            return "\n".join([f"reload (HAProxy {version}):", *(f"  {r}" for r in self.reasons)]) + "\n"
        if self.action is Action.NONE:
            return "nothing to apply\n"
        lines = [f"runtime (HAProxy {version}, {len(self.commands)} commands):"]
        lines += [f"  {c.text()}" for c in self.commands]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Loaded:
    """What the running configuration loads beyond a partial ``old`` description.

    An admission review plans over its change's closure (``validators.views.closures``): the closure's
    baseline lists only the records its own objects make, while the running configuration also has the
    profiles and maps of every other route. Objects outside the closure render the same before and
    after the change, so planning the closure's records against ``old`` plus these is planning the whole
    configuration: the same action, reasons and number of commands. Such a plan is for the admission
    note only; its atomic map replaces carry the closure's entries, not the whole map's, so only a plan
    over whole descriptions is applied. ``of`` takes them from a whole-state description."""

    profiles: Mapping[str, ProfileDesc] = field(default_factory=dict)
    maps: frozenset[str] = frozenset()

    @classmethod
    def of(cls, description: Description) -> Loaded:
        return cls({p.name: p for p in description.profiles}, frozenset(m.path for m in description.maps))


@dataclass(slots=True)
class _Draft:
    version: tuple[int, ...]
    files: Mapping[str, bytes] | None
    reload: list[str] = field(default_factory=list)
    certs: list[Command] = field(default_factory=list)
    new_backends: list[Command] = field(default_factory=list)
    servers: list[Command] = field(default_factory=list)
    map_updates: list[tuple[int, str, list[Command]]] = field(default_factory=list)
    map_deletes: list[tuple[int, str, list[Command]]] = field(default_factory=list)
    server_removals: list[Command] = field(default_factory=list)
    old_backends: list[Command] = field(default_factory=list)

    def fail(self, rule: int, text: str) -> None:
        self.reload.append(f"rule {rule}: {text}")

    def plan(self) -> Plan:
        if self.reload:
            return Plan(Action.RELOAD, (), tuple(self.reload[:MAX_REASONS]), self.version)
        commands = [*self.certs, *self.new_backends, *self.servers]
        for _, _, cmds in sorted(self.map_updates, key=lambda t: (t[0], t[1])):
            commands += cmds
        for _, _, cmds in sorted(self.map_deletes, key=lambda t: (-t[0], t[1])):
            commands += cmds
        commands += [*self.server_removals, *self.old_backends]
        if not commands:
            return Plan(Action.NONE, dataplane_version=self.version)
        return Plan(Action.RUNTIME, tuple(commands), (), self.version)


def plan(old: Description | None, new: Description, *, dataplane_version: tuple[int, ...],
         files: Mapping[str, bytes] | None = None, loaded: Loaded | None = None) -> Plan:
    """The plan that takes a data plane running ``old`` to ``new`` (see the module docstring).

    ``files``: the new render's files (certificate payloads); without them certificate commands name
    the file and ``apply`` needs the contents from the caller's render. ``loaded``: when ``old`` and
    ``new`` are part of the configuration (a closure), what the rest of the running one loads."""
    draft = _Draft(tuple(dataplane_version), files)
    if old is None:
        draft.fail(1, "no previous configuration to compare with")
        return draft.plan()
    if not old.frame or not new.frame or UNRECORDED in (old.frame, new.frame):
        draft.fail(2, "the configuration outside Backend() was not recorded (no frame digest)")
    elif old.frame != new.frame:
        draft.fail(2, "frontend or global configuration changed (rules, listeners, or text outside Backend())")
    old_profiles = {**(loaded.profiles if loaded else {}), **{p.name: p for p in old.profiles}}
    for profile in new.profiles:
        if profile.name not in old_profiles:
            draft.fail(3, f"new settings profile {profile.name}")
        elif old_profiles[profile.name] != profile:
            draft.fail(3, f"settings profile {profile.name} changed")
    profile_lines = {**{name: p.lines for name, p in old_profiles.items()}, **{p.name: p.lines for p in new.profiles}}
    _backends(old, new, set(old_profiles), profile_lines, draft)
    _maps(old, new, draft, loaded.maps if loaded else frozenset())
    _files(old, new, draft)
    return draft.plan()


# ---------------------------------------------------------------- backends and servers


def _backends(old: Description, new: Description, loaded: set[str], profiles: Mapping[str, Sequence[str]],
              draft: _Draft) -> None:
    before = {b.name: b for b in old.backends}
    after = {b.name: b for b in new.backends}
    for name in sorted(after.keys() - before.keys()):
        backend = after[name]
        why = _why_not_runtime_backend(backend, loaded, profiles, draft.version)
        if why:
            draft.fail(4, f"backend {name} created: {why}")
            continue
        try:
            draft.new_backends += _create_backend(backend, profiles.get(backend.profile, ()))
        except UnsafeValue as exc:
            draft.fail(4, f"backend {name} created: {exc}")
    for name in sorted(before.keys() - after.keys()):
        backend = before[name]
        why = _why_not_runtime_backend(backend, loaded, profiles, draft.version)
        if why:
            draft.fail(4, f"backend {name} deleted: {why}")
            continue
        draft.old_backends += _delete_backend(backend, draft.version)
    for name in sorted(before.keys() & after.keys()):
        if before[name] is after[name] or before[name] == after[name]:
            continue  # unchanged (often the very record: the incremental render reuses it)
        _backend_change(before[name], after[name], profiles.get(after[name].profile, ()), draft)


def _why_not_runtime_backend(backend: BackendDesc, loaded: set[str], profiles: Mapping[str, Sequence[str]],
                             version: tuple[int, ...]) -> str:
    if version < RUNTIME_BACKENDS:
        return f"HAProxy {_v(version)} cannot add or delete backends at runtime (3.4+)"
    if backend.shape == "structural":
        return f"structural backend ({backend.shape_reason or 'non-empty body'})"
    if backend.profile not in loaded:
        return f"its profile {backend.profile} is not loaded yet"
    lines = profiles.get(backend.profile, ())
    # `add backend` takes these from the profile; the backend section states its own
    if _profile_setting(lines, "balance", "roundrobin") != backend.balance:
        return f"add backend takes its balance from the profile, which does not say balance {backend.balance}"
    if _profile_setting(lines, "hash-type", "") != backend.hash_type:
        return f"add backend takes hash-type from the profile, which does not say hash-type {backend.hash_type}"
    if backend.guid:
        return "add backend cannot set a guid"
    for server in backend.servers:
        why = _why_not_add_server(backend, server, lines)
        if why:
            return why
    return ""


def _profile_setting(lines: Sequence[str], keyword: str, default: str) -> str:
    """What a backend created from this profile gets for ``keyword`` (the last line saying it)."""
    found = default
    for line in lines:
        if line.startswith(keyword + " "):
            found = line[len(keyword) + 1:].strip()
    return found


def _why_not_add_server(backend: BackendDesc, server: ServerDesc, profile: Sequence[str]) -> str:
    if backend.balance.startswith("static-rr"):
        return f"server {server.name}: add server does not work under balance static-rr"
    if backend.hash_type and "consistent" not in backend.hash_type:
        return f"server {server.name}: add server does not work with map-based hashing ({backend.hash_type})"
    bad = sorted((set(server.options) | set(_default_server(profile))) & UNSUPPORTED_BY_ADD_SERVER)
    if bad:
        return f"server {server.name}: keyword {bad[0]} is not supported by add server"
    return ""


def _default_server(profile: Sequence[str]) -> list[str]:
    """The profile's ``default-server`` keywords: a runtime ``add server`` does not inherit them."""
    words: list[str] = []
    for line in profile:
        if line.startswith("default-server "):
            words += line.split()[1:]
    return words


def _server_target(backend: str, server: str) -> str:
    return f"{cli_word(backend, what='backend name')}/{cli_word(server, what='server name')}"


def _add_server(backend: BackendDesc, server: ServerDesc, profile: Sequence[str], why: str) -> list[Command]:
    target = _server_target(backend.name, server.name)
    keywords = [*_default_server(profile), *(o for o in server.options if o != MAINT_KEYWORD)]
    words = " ".join(cli_word(k, what=f"server {server.name} keyword") for k in keywords)
    address = escaping.server_address_and_port(server.address, server.port)
    address = cli_word(address, what=f"server {server.name} address")
    line = f"add server {target} {address} weight {int(server.weight)}" + (f" {words}" if words else "")
    cmds = [Command(line, r"New server registered\.", 6, why)]
    if MAINT_KEYWORD not in server.options:
        cmds.append(Command(f"enable server {target}", r"^$", 6, f"{why}: out of maintenance"))
        if _CHECK_KEYWORDS & set(keywords):
            cmds.append(Command(f"enable health {target}", r"^$", 6, f"{why}: health checks on"))
    return cmds


def _remove_server(backend: str, server: ServerDesc, version: tuple[int, ...], why: str) -> list[Command]:
    target = _server_target(backend, server.name)
    cmds = [Command(f"set server {target} state maint", r"^$", 6, f"{why}: drain")]
    if version >= WAIT_COMMAND:
        cmds.append(Command(f"wait {REMOVABLE_WAIT} srv-removable {target}", r"^Done\.$", 6,
                            f"{why}: wait until removable"))
        cmds.append(Command(f"del server {target}", r"Server deleted\.", 6, why))
    else:  # no `wait` before 3.0: repeat the delete while connections remain
        cmds.append(Command(f"del server {target}", r"Server deleted\.", 6, why, retry=REMOVABLE_RETRY))
    return cmds


def _create_backend(backend: BackendDesc, profile: Sequence[str]) -> list[Command]:
    name = cli_word(backend.name, what="backend name")
    why = f"backend {backend.name} created from loaded profile {backend.profile}"
    cmds = [Command(f"add backend {name} from {cli_word(backend.profile, what='profile name')} mode "
                    f"{cli_word(backend.mode, what='mode')}", r"New backend registered\.", 4, why)]
    for server in backend.servers:
        cmds += _add_server(backend, server, profile, f"backend {backend.name}: server {server.name} added")
    cmds.append(Command(f"publish backend {name}", r"Backend published\.", 4, f"{why}: published"))
    return cmds


def _delete_backend(backend: BackendDesc, version: tuple[int, ...]) -> list[Command]:
    """Unpublish (frontends stop choosing it), then its servers the way rule 6 removes one (HAProxy
    deletes only a backend without servers), then the backend once removable."""
    name = cli_word(backend.name, what="backend name")
    why = f"backend {backend.name} deleted"
    cmds = [Command(f"unpublish backend {name}", r"Backend unpublished\.", 4, f"{why}: unpublished")]
    for server in backend.servers:
        cmds += [replace(c, rule=4) for c in
                 _remove_server(backend.name, server, version, f"{why}: server {server.name} removed")]
    cmds.append(Command(f"wait {REMOVABLE_WAIT} be-removable {name}", r"^Done\.$", 4, f"{why}: wait until removable"))
    cmds.append(Command(f"del backend {name}", r"Backend deleted\.", 4, why))
    return cmds


def _backend_change(old: BackendDesc, new: BackendDesc, profile: Sequence[str], draft: _Draft) -> None:
    name = new.name
    changed = False
    for what, a, b in (("mode", old.mode, new.mode), ("profile", old.profile, new.profile),
                       ("guid", old.guid, new.guid), ("balance", old.balance, new.balance),
                       ("hashType", old.hash_type, new.hash_type),
                       ("defaultServer", old.default_server, new.default_server), ("body", old.body, new.body)):
        if a != b:
            draft.fail(5, f"backend {name}: {what} changed")
            changed = True
    if changed:
        return
    old_servers = {s.name: s for s in old.servers}
    new_servers = {s.name: s for s in new.servers}
    try:
        for server in (s for s in new.servers if s.name not in old_servers):
            why = f"backend {name}: server {server.name} added"
            if draft.version < DYNAMIC_SERVERS:
                draft.fail(6, f"{why}: HAProxy {_v(draft.version)} has no dynamic servers")
                continue
            refusal = _why_not_add_server(new, server, profile)
            if refusal:
                draft.fail(6, f"backend {name}: {refusal}")
                continue
            draft.servers += _add_server(new, server, profile, why)
        for server in (s for s in old.servers if s.name not in new_servers):
            why = f"backend {name}: server {server.name} removed"
            if draft.version < DYNAMIC_SERVERS:
                draft.fail(6, f"{why}: HAProxy {_v(draft.version)} has no dynamic servers")
                continue
            draft.server_removals += _remove_server(name, server, draft.version, why)
        for server in (s for s in new.servers if s.name in old_servers):
            _server_change(name, old_servers[server.name], server, draft)
    except UnsafeValue as exc:
        draft.fail(6, f"backend {name}: {exc}")


def _server_change(backend: str, old: ServerDesc, new: ServerDesc, draft: _Draft) -> None:
    def settings(s: ServerDesc) -> tuple[str, ...]:
        return tuple(o for o in s.options if o != MAINT_KEYWORD)

    if settings(old) != settings(new):
        draft.fail(7, f"backend {backend}: server {new.name} keywords changed")
        return
    target = _server_target(backend, new.name)
    where = f"backend {backend}: server {new.name}"
    if (old.address, old.port) != (new.address, new.port):
        draft.servers.append(Command(
            f"set server {target} addr {cli_word(new.address, what='server address')} port {int(new.port)}",
            SET_ADDR_ANSWER, 7, f"{where} moved to {new.address}:{new.port}"))
    if old.weight != new.weight:
        draft.servers.append(Command(f"set weight {target} {int(new.weight)}", r"^$", 7,
                                     f"{where} weight {old.weight} -> {new.weight}"))
    was, now = MAINT_KEYWORD in old.options, MAINT_KEYWORD in new.options
    if was != now:
        draft.servers.append(Command(f"set server {target} state {'maint' if now else 'ready'}", r"^$", 7,
                                     f"{where} {'into' if now else 'out of'} maintenance"))


# ---------------------------------------------------------------- maps


def _map_rank(path: str) -> int:
    """How early a request reads the map: host maps first, then path maps, then per-rule values."""
    name = path.rsplit("/", 1)[-1]
    if name.startswith(("host", "https-listener")):
        return 2
    if name.startswith(("path-", "route-crd-")):
        return 1
    return 0


_ENTRY = re.compile(r"\s*(\S+)\s*(.*?)\s*$")


def _entry(line: str) -> tuple[str, str]:
    """A map line as HAProxy reads it: the key up to the first blank, the value the rest, trimmed."""
    if "\n" not in line:  # the common case, at C speed: str.split's blanks are the regex's \s (str.isspace)
        parts = line.split(None, 1)
        if not parts:
            return ("", "")
        return (parts[0], parts[1].rstrip() if len(parts) > 1 else "")
    match = _ENTRY.match(line)
    return (match.group(1), match.group(2)) if match else ("", "")


_KEYS: OrderedDict[int, tuple[tuple[str, ...], frozenset[str] | None]] = OrderedDict()
_KEYS_KEPT = 64  # about two versions of every map of a few Gateways; a miss reads the map once


def _known_keys(entries: tuple[str, ...]) -> tuple[bool, frozenset[str] | None]:
    """(whether remembered, the map's keys or None when two lines share a key). Remembered per entries
    tuple (holding it keeps its id from being reused): a map is planned from twice, as the new version
    and then as the running one."""
    found = _KEYS.get(id(entries))
    if found is not None and found[0] is entries:
        _KEYS.move_to_end(id(entries))
        return True, found[1]
    return False, None


def _remember_keys(entries: tuple[str, ...], keys: frozenset[str] | None) -> frozenset[str] | None:
    _KEYS[id(entries)] = (entries, keys)
    while len(_KEYS) > _KEYS_KEPT:
        _KEYS.popitem(last=False)
    return keys


def _keys(entries: tuple[str, ...]) -> frozenset[str] | None:
    """The map's keys, None when two lines share one (O(map) once per entries tuple)."""
    known, keys = _known_keys(entries)
    if known:
        return keys
    listed = [_entry(e)[0] for e in entries]
    found = frozenset(listed)
    return _remember_keys(entries, found if len(found) == len(listed) else None)


def _keys_after(new: tuple[str, ...], old: tuple[str, ...], old_keys: frozenset[str],
                old_only: Mapping[str, str], new_only: Sequence[tuple[str, str, str]]) -> frozenset[str] | None:
    """The keys of ``new`` from those of ``old`` and the lines that differ (O(change) but for set copies in C):
    the lines both hold keep their keys. Counted lines tell a repeated common line (then read it all)."""
    known, keys = _known_keys(new)
    if known:
        return keys
    if len(new) != len(old) - len(old_only) + len(new_only):
        return _keys(new)
    added = [k for _, k, _ in new_only]
    common = old_keys.difference(old_only)
    fresh = frozenset(added)
    unique = len(fresh) == len(added) and common.isdisjoint(fresh)
    return _remember_keys(new, common | fresh if unique else None)


def _maps(old: Description, new: Description, draft: _Draft, elsewhere: frozenset[str]) -> None:
    before = {m.path: m for m in old.maps}
    for current in new.maps:
        previous = before.get(current.path)
        if previous is None and current.path in elsewhere:
            # loaded by the rest of the configuration: ``old``'s objects had no entries in it
            previous = MapDesc(current.path, current.ordered, ())
        if previous is None:
            draft.fail(8, f"map {current.path} is not loaded by the running configuration")
            continue
        try:
            _map_change(previous, current, draft)
        except UnsafeValue as exc:
            draft.fail(8, f"map {current.path}: {exc}")


def _map_change(old: MapDesc, new: MapDesc, draft: _Draft) -> None:
    rank = _map_rank(new.path)
    if old.entries == new.entries:
        return
    old_keys = _keys(old.entries) if not new.ordered else None
    if old_keys is not None:
        # O(change): only the lines that differ are read. With unique keys on both sides, a line both
        # versions hold adds, changes and removes nothing, and a differing line's key is in the other
        # version only if a differing line of that version has it.
        old_lines, new_lines = set(old.entries), set(new.entries)
        old_only = dict(_entry(e) for e in old.entries if e not in new_lines)
        new_only = [(e, *_entry(e)) for e in new.entries if e not in old_lines]
        if _keys_after(new.entries, old.entries, old_keys, old_only, new_only) is None:
            draft.map_updates.append((rank, new.path, _replace_map(new)))
            return
        new_only_keys = {k for _, k, _ in new_only}
        added = [e for e, k, _ in new_only if k not in old_only]
        changed = [(k, v) for _, k, v in new_only if k in old_only and old_only[k] != v]
        removed = [k for k in old_only if k not in new_only_keys]
        if not added and not changed and not removed:
            return  # the same entries in another order: an unordered map's lookups do not change
        if len(changed) + len(removed) <= UNORDERED_REPLACE_AFTER:
            path = cli_word(new.path, what="map path")
            updates: list[Command] = []
            if added:
                updates.append(Command(f"add map {path}", r"^$", 8, f"map {new.path}: {len(added)} entries added",
                                       payload=tuple(payload_line(e, what=f"map {new.path} entry") for e in added)))
            updates += [Command(f"set map {path} {cli_word(k, what='map key')} {cli_word(v, what='map value')}",
                                r"^$", 8, f"map {new.path}: {k} set") for k, v in changed]
            deletes = [Command(f"del map {path} {cli_word(k, what='map key')}", r"^$", 8,
                               f"map {new.path}: {k} removed") for k in removed]
            if updates:
                draft.map_updates.append((rank, new.path, updates))
            if deletes:
                draft.map_deletes.append((rank, new.path, deletes))
            return
    draft.map_updates.append((rank, new.path, _replace_map(new)))


def _replace_map(new: MapDesc) -> list[Command]:
    """Swap the whole map at once: lookups see the old entries until the commit, then the new ones, in
    the new order."""
    path = cli_word(new.path, what="map path")
    why = f"map {new.path} replaced atomically ({len(new.entries)} entries{', ordered' if new.ordered else ''})"
    cmds = [Command(f"prepare map {path}", r"^New version created: (\d+)$", 8, why, captures_version=True)]
    if new.entries:
        cmds.append(Command(f"add map {path}", r"^$", 8, why, versioned=True,
                            payload=_payload_lines(new.entries, what=f"map {new.path} entry")))
    cmds.append(Command(f"commit map {path}", r"^$", 8, why, versioned=True))
    return cmds


# ---------------------------------------------------------------- files


def _files(old: Description, new: Description, draft: _Draft) -> None:
    before: Mapping[str, FileDesc] = {f.path: f for f in old.files}
    for current in new.files:
        previous = before.get(current.path)
        if previous is None or previous.sha256 == current.sha256:
            continue  # a new file is referenced by new configuration text (rule 2 decides)
        if current.kind == "other":
            draft.fail(9, f"file {current.path} changed; HAProxy reads it only when loading")
            continue
        if current.kind == "ca" and draft.version < CA_FILE_UPDATES:
            draft.fail(9, f"CA file {current.path} changed; HAProxy {_v(draft.version)} cannot update CA files")
            continue
        store = "cert" if current.kind == "cert" else "ca-file"
        try:
            draft.certs += _update_file(store, current, draft.files)
        except UnsafeValue as exc:
            draft.fail(9, f"{current.kind} file {current.path}: {exc}")


def _update_file(store: str, file: FileDesc, files: Mapping[str, bytes] | None) -> list[Command]:
    path = cli_word(file.path, what="file path")
    why = f"{file.kind} file {file.path} contents changed"
    payload: tuple[str, ...] = ()
    if files is not None and file.path in files:
        payload = pem_payload(files[file.path], what=file.path)
    return [Command(f"set ssl {store} {path}", SET_SSL_ANSWER[store], 9, why, payload=payload,
                    payload_file=file.path),
            Command(f"commit ssl {store} {path}", COMMIT_SSL_ANSWER, 9, f"{why}: committed")]


def pem_payload(data: bytes, *, what: str) -> tuple[str, ...]:
    """A PEM file as payload lines (blank lines dropped: one would end the payload)."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise UnsafeValue(f"{what} is not PEM text") from exc
    lines = tuple(line.rstrip("\r") for line in text.splitlines() if line.strip())
    for line in lines:
        payload_line(line, what=what)
    if not lines:
        raise UnsafeValue(f"{what} is empty")
    return lines


def _v(version: Iterable[int]) -> str:
    return ".".join(map(str, version))


def parse_version(text: str) -> tuple[int, ...]:
    """``3.4`` / ``3.4.7`` / ``3.4.7-1`` -> (3, 4[, 7]); ValueError otherwise."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:[-+~].*)?", text.strip())
    if not match:
        raise ValueError(f"HAProxy version {text!r} is not MAJOR.MINOR[.PATCH]")
    return tuple(int(g) for g in match.groups() if g is not None)
