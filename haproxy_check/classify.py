"""Reload or runtime? A pure classifier over two renders (seed 000, HAPTIC's deployplan).

Data in, data out, no I/O, so every rule is table tested. The verdict is a closed enum; ``reasons``
lists every change that cannot be applied at runtime (capped at MAX_REASONS). Missing or unreadable
input falls back to the safest answer, RELOAD.

Rules (numbered; tests cite them):
  1. no previous render (or none at all) -> RELOAD.
  2. configuration text outside the structured helpers changed (frontends, rules, global) -> RELOAD.
  3. a named defaults profile was added or its settings changed -> RELOAD (later backends reuse it).
  4. a backend was created or deleted: RUNTIME only on HAProxy >= 3.4, for a dynamic backend whose
     profile was already loaded and whose servers use only keywords ``add server`` supports.
  5. an existing backend's mode, profile, guid, balance, hashType, defaultServer or body changed
     -> RELOAD (a structural backend's body change included).
  6. a server was added or removed: RUNTIME (``add server`` / ``del server``), except under
     ``static-rr`` or map-based hashing, or with keywords ``add server`` does not support -> RELOAD.
  7. an existing server's address, port or weight changed -> RUNTIME; any other keyword -> RELOAD.
  8. map entries changed in a map the running config already loads -> RUNTIME (ordered maps are
     replaced atomically, still without a reload).
  9. certificate or CA file contents changed -> RUNTIME (``set ssl cert`` / ``set ssl ca-file``).
 10. nothing changed -> NONE.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from haproxy_check.descriptions import BackendDesc, Description, ServerDesc

MAX_REASONS = 32
RUNTIME_BACKENDS = (3, 4)
UNSUPPORTED_BY_ADD_SERVER = frozenset({"no-check", "resolvers", "init-addr"})
_SECTION = re.compile(r"^(global|defaults|frontend|backend|listen|userlist|peers|resolvers|cache|program|"
                      r"http-errors|ring|log-forward|mailers|crt-store|traces)\b\s*(\S*)")


class ApplyClass(StrEnum):
    NONE = "none"
    RUNTIME = "runtime"
    RELOAD = "reload"


@dataclass(frozen=True, slots=True)
class Rendered:
    """What the classifier needs of one render: its description and its haproxy.cfg text."""

    description: Description
    config: str


@dataclass(frozen=True, slots=True)
class ApplyDecision:
    apply: ApplyClass
    reasons: tuple[str, ...] = ()
    runtime: tuple[str, ...] = ()  # what would be applied at runtime, for the curious


class _Plan:
    def __init__(self) -> None:
        self.reload: list[str] = []
        self.runtime: list[str] = []

    def failf(self, rule: int, text: str) -> None:
        self.reload.append(f"rule {rule}: {text}")

    def notef(self, rule: int, text: str) -> None:
        self.runtime.append(f"rule {rule}: {text}")

    def decision(self) -> ApplyDecision:
        if self.reload:
            return ApplyDecision(ApplyClass.RELOAD, tuple(self.reload[:MAX_REASONS]), tuple(self.runtime[:MAX_REASONS]))
        if self.runtime:
            return ApplyDecision(ApplyClass.RUNTIME, (), tuple(self.runtime[:MAX_REASONS]))
        return ApplyDecision(ApplyClass.NONE)


def outside_helpers(rendered: Rendered) -> str:
    """haproxy.cfg without the sections Backend() describes (backends and their profiles)."""
    owned = {("backend", b.name) for b in rendered.description.backends}
    owned |= {("defaults", p.name) for p in rendered.description.profiles}
    kept: list[str] = []
    skipping = False
    for line in rendered.config.splitlines():
        match = _SECTION.match(line)
        if match:
            skipping = (match.group(1), match.group(2)) in owned
        if not skipping and line.strip() and not line.lstrip().startswith("#"):
            kept.append(line.rstrip())
    return "\n".join(kept)


def classify(prev: Rendered | None, nxt: Rendered | None, *, version: tuple[int, ...]) -> ApplyDecision:
    plan = _Plan()
    if prev is None or nxt is None:
        plan.failf(1, "no previous configuration to compare with")
        return plan.decision()
    if outside_helpers(prev) != outside_helpers(nxt):
        plan.failf(2, "frontend or global configuration changed (rules, listeners, or text outside Backend())")
    old_profiles = {p.name: p for p in prev.description.profiles}
    for profile in nxt.description.profiles:
        if old_profiles.get(profile.name) != profile:
            plan.failf(3, f"new settings profile {profile.name}")
    _backends(prev.description, nxt.description, set(old_profiles), version, plan)
    _maps(prev.description, nxt.description, plan)
    _files(prev.description, nxt.description, plan)
    return plan.decision()


def _backends(prev: Description, nxt: Description, profiles: set[str], version: tuple[int, ...],
              plan: _Plan) -> None:
    before = {b.name: b for b in prev.backends}
    after = {b.name: b for b in nxt.backends}
    for name in sorted(after.keys() - before.keys()):
        why = _why_not_runtime_create(after[name], profiles, version)
        (plan.failf(4, f"backend {name} created: {why}") if why
         else plan.notef(4, f"backend {name} created at runtime"))
    for name in sorted(before.keys() - after.keys()):
        why = _why_not_runtime_create(before[name], profiles, version)
        (plan.failf(4, f"backend {name} deleted: {why}") if why
         else plan.notef(4, f"backend {name} deleted at runtime"))
    for name in sorted(before.keys() & after.keys()):
        _backend_change(before[name], after[name], plan)


def _why_not_runtime_create(backend: BackendDesc, loaded_profiles: set[str], version: tuple[int, ...]) -> str:
    if version < RUNTIME_BACKENDS:
        return f"HAProxy {'.'.join(map(str, version))} cannot add or delete backends at runtime (3.4+)"
    if backend.shape == "structural":
        return f"structural backend ({backend.shape_reason or 'non-empty body'})"
    if backend.profile not in loaded_profiles:
        return f"its profile {backend.profile} is not loaded yet"
    bad = sorted({o for s in backend.servers for o in s.options} & UNSUPPORTED_BY_ADD_SERVER)
    if bad:
        return f"server keyword {bad[0]} is not supported by add server"
    return ""


def _backend_change(old: BackendDesc, new: BackendDesc, plan: _Plan) -> None:
    name = new.name
    for field, a, b in (("mode", old.mode, new.mode), ("profile", old.profile, new.profile),
                        ("guid", old.guid, new.guid), ("balance", old.balance, new.balance),
                        ("hashType", old.hash_type, new.hash_type),
                        ("defaultServer", old.default_server, new.default_server),
                        ("body", old.body, new.body)):
        if a != b:
            plan.failf(5, f"backend {name}: {field} changed")
    old_servers = {s.name: s for s in old.servers}
    new_servers = {s.name: s for s in new.servers}
    static_hash = new.balance.startswith("static-rr") or (bool(new.hash_type) and "consistent" not in new.hash_type)
    for server in sorted(new_servers.keys() - old_servers.keys()):
        _server_membership(name, new_servers[server], "added", static_hash, plan)
    for server in sorted(old_servers.keys() - new_servers.keys()):
        _server_membership(name, old_servers[server], "removed", False, plan)
    for server in sorted(old_servers.keys() & new_servers.keys()):
        _server_change(name, old_servers[server], new_servers[server], plan)


def _server_membership(backend: str, server: ServerDesc, what: str, static_hash: bool, plan: _Plan) -> None:
    bad = sorted(set(server.options) & UNSUPPORTED_BY_ADD_SERVER)
    if static_hash:
        plan.failf(6, f"backend {backend}: server {server.name} {what} under static-rr or map-based hashing")
    elif bad:
        plan.failf(6, f"backend {backend}: server {server.name} {what} with keyword {bad[0]}")
    else:
        plan.notef(6, f"backend {backend}: server {server.name} {what}")


def _server_change(backend: str, old: ServerDesc, new: ServerDesc, plan: _Plan) -> None:
    if old.options != new.options:
        plan.failf(7, f"backend {backend}: server {new.name} keywords changed")
    elif (old.address, old.port, old.weight) != (new.address, new.port, new.weight):
        plan.notef(7, f"backend {backend}: server {new.name} address/port/weight changed")


def _maps(prev: Description, nxt: Description, plan: _Plan) -> None:
    before = {m.path: m for m in prev.maps}
    for new in nxt.maps:
        old = before.get(new.path)
        if old is None:
            if new.entries:
                plan.notef(8, f"map {new.path} filled")
            continue
        if old.entries != new.entries and (new.ordered or set(old.entries) != set(new.entries)):
            plan.notef(8, f"map {new.path} entries changed")


def _files(prev: Description, nxt: Description, plan: _Plan) -> None:
    before: Mapping[str, str] = {f.path: f.sha256 for f in prev.files}
    for new in nxt.files:
        if new.path in before and before[new.path] != new.sha256:
            plan.notef(9, f"{new.kind} file {new.path} contents changed")
