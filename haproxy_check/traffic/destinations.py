"""The values a routing answer is made of: a request, the class of requests it stands for, and where
it ends (a destination: a rule's backends, a redirect, an error, or nothing).

Both the HTTP table (``tables``) and the TLS/TCP entry points (``connections``) answer in these values,
so they live below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROBE = "rg-probe"  # the label a sample host or path is made of, where the class allows any
BACKEND, REDIRECT, ERROR, NOT_FOUND, REJECTED, NO_LISTENER = (
    "backend", "redirect", "error", "no route", "rejected", "no listener")
WEIGHTED, FAIL = "@weighted", "@500"
HTTPS_ENGINE = "https listeners"  # a TLS connection decrypted by the HTTP engine's HTTPS frontend


@dataclass(frozen=True, slots=True, order=True)
class Backend:
    name: str
    service: str = ""  # "ns/name:port"
    share: int = 100  # of 100 weight slots
    address: str = ""  # "<address>:<port>" of a literal server (a custom Route's), where no Service is

    @property
    def owner(self) -> str:
        return self.service.split("/", 1)[0] if "/" in self.service else ""


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request ends: a rule's backends, a redirect, an error, or nothing."""

    outcome: str
    rule: str = ""  # "HTTPRoute ns/name rule 3"
    owner: str = ""  # the route's namespace
    backends: tuple[Backend, ...] = ()
    detail: str = ""  # a redirect's status, an error's

    @property
    def owners(self) -> frozenset[str]:
        return frozenset(o for o in (self.owner, *(b.owner for b in self.backends)) if o)

    def text(self) -> str:
        """``gw_h_ns_r_a_80 (ns)``; ``no route``; ``redirect 301 by HTTPRoute ns/r rule 2 (ns)``."""
        who = f" ({self.owner})" if self.owner else ""
        if self.outcome == BACKEND:
            if len(self.backends) == 1:
                return f"{self.backends[0].name}{who}"
            return ", ".join(f"{b.name} {b.share}%" for b in self.backends) + who
        if self.outcome == HTTPS_ENGINE:
            return f"{self.rule}{who}"
        if self.outcome in (REDIRECT, ERROR):
            return f"{self.outcome} {self.detail} by {self.rule}{who}".replace("  ", " ")
        return self.outcome

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "rule": self.rule, "owner": self.owner, "detail": self.detail,
                "backends": [{"name": b.name, "service": b.service, "owner": b.owner, "share": b.share}
                             for b in self.backends]}


@dataclass(frozen=True, slots=True)
class Request:
    """One concrete request, as a probe sends it."""

    port: int
    host: str
    path: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    query: str = ""  # without the '?'

    @property
    def target(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path


@dataclass(frozen=True, slots=True, order=True)
class RequestClass:
    """The requests one map entry or advanced line matches, on one entry point."""

    entry: str  # "HTTP :80"
    host: str  # "a.com", "*.a.com", "*"
    path: str  # "/x" (Exact), "/p*" (PathPrefix), "~<regex>" (RegularExpression)
    matchers: tuple[str, ...] = ()  # "method POST", "header x-env=canary", "query v~^1"

    def text(self) -> str:
        more = f" [{', '.join(self.matchers)}]" if self.matchers else ""
        return f"{self.host} {self.path}{more}" if self.path else f"{self.host}{more}"

    def as_dict(self) -> dict[str, Any]:
        return {"entry": self.entry, "host": self.host, "path": self.path, "matchers": list(self.matchers)}
