"""The structured description that Backend() and RegisterMap() record while templates render.

It is the input of the reload-vs-runtime classifier, so it is complete, sorted and plain data
(``as_dict`` is JSON-serializable and stable: no object addresses, no set ordering).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from haproxy_check.traffic.facts import RoutingFacts

Shape = Literal["dynamic", "structural"]


@dataclass(frozen=True, slots=True)
class ServerDesc:
    name: str
    address: str
    port: int
    weight: int = 1
    options: tuple[str, ...] = ()  # extra server keywords, e.g. ("ssl", "verify", "required")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "port": self.port, "weight": self.weight,
                "options": list(self.options)}


@dataclass(frozen=True, slots=True)
class BackendDesc:
    name: str
    mode: str = "http"
    balance: str = "roundrobin"
    hash_type: str = ""
    profile: str = ""  # name of the named defaults section (haptic-be-<hash>)
    body: tuple[str, ...] = ()
    servers: tuple[ServerDesc, ...] = ()
    default_server: str = ""
    guid: str = ""
    comments: tuple[str, ...] = ()
    shape: Shape = "dynamic"
    shape_reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "mode": self.mode, "balance": self.balance, "hashType": self.hash_type,
            "profile": self.profile, "body": list(self.body),
            "servers": [s.as_dict() for s in self.servers], "defaultServer": self.default_server,
            "guid": self.guid, "comments": list(self.comments), "shape": self.shape,
            "shapeReason": self.shape_reason,
        }


@dataclass(frozen=True, slots=True)
class ProfileDesc:
    name: str
    lines: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lines": list(self.lines)}


@dataclass(frozen=True, slots=True)
class MapDesc:
    path: str
    ordered: bool
    entries: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ordered": self.ordered, "entries": list(self.entries)}


@dataclass(frozen=True, slots=True)
class FileDesc:
    path: str
    kind: Literal["cert", "ca", "other"]
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class Description:
    backends: tuple[BackendDesc, ...] = ()
    profiles: tuple[ProfileDesc, ...] = ()
    maps: tuple[MapDesc, ...] = ()
    files: tuple[FileDesc, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    # sha256 of haproxy.cfg outside the sections Backend() describes (frontends, rules, global): when it
    # differs, the running configuration's structure changed and only a reload applies it
    frame: str = ""
    # who binds where and which route each rule and backend belongs to (``haproxy_check.traffic``): with
    # the maps, what the data plane does with a request. Not part of ``as_dict``: what the data plane
    # loads is the maps and the frame; these say whose they are.
    routing: RoutingFacts = field(default_factory=RoutingFacts, compare=False)

    def as_dict(self, *, backends: bool = True, maps: bool = True) -> dict[str, Any]:
        """``backends=False``, ``maps=False``: every member but those (a caller that serializes them itself)."""
        return {
            **({"backends": [b.as_dict() for b in sorted(self.backends, key=lambda b: b.name)]} if backends else {}),
            "profiles": [p.as_dict() for p in sorted(self.profiles, key=lambda p: p.name)],
            **({"maps": [m.as_dict() for m in sorted(self.maps, key=lambda m: m.path)]} if maps else {}),
            "files": [f.as_dict() for f in sorted(self.files, key=lambda f: f.path)],
            "frame": self.frame,
        }

    @staticmethod
    def from_dict(data: Any) -> Description:
        """The inverse of ``as_dict`` (a ``description.json``); raises ValueError naming the bad field."""
        try:
            return Description(
                backends=tuple(_backend(b) for b in data["backends"]),
                profiles=tuple(ProfileDesc(str(p["name"]), tuple(map(str, p["lines"]))) for p in data["profiles"]),
                maps=tuple(MapDesc(str(m["path"]), bool(m["ordered"]), tuple(map(str, m["entries"])))
                           for m in data["maps"]),
                files=tuple(FileDesc(str(f["path"]), _kind(f["kind"]), str(f["sha256"])) for f in data["files"]),
                # a description written before frames were recorded matches no frame: the safe answer
                frame=str(data.get("frame") or "unrecorded"))  # runtimeplans.UNRECORDED
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a routegate description: missing or malformed {exc}") from exc


def _kind(value: Any) -> Literal["cert", "ca", "other"]:
    return "cert" if value == "cert" else "ca" if value == "ca" else "other"


def _backend(data: Any) -> BackendDesc:
    shape: Shape = "structural" if data["shape"] == "structural" else "dynamic"
    return BackendDesc(
        name=str(data["name"]), mode=str(data["mode"]), balance=str(data["balance"]),
        hash_type=str(data["hashType"]), profile=str(data["profile"]), body=tuple(map(str, data["body"])),
        servers=tuple(ServerDesc(str(s["name"]), str(s["address"]), int(s["port"]), int(s["weight"]),
                                 tuple(map(str, s["options"]))) for s in data["servers"]),
        default_server=str(data["defaultServer"]), guid=str(data["guid"]),
        comments=tuple(map(str, data["comments"])), shape=shape, shape_reason=str(data["shapeReason"]))
