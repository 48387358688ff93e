"""Values that leave haproxy_check: what a render produced and what ``haproxy -c`` said of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from haproxy_check.descriptions import Description
from validators.findings import Finding, PathPart
from validators.objects import Ref


@dataclass(frozen=True, slots=True)
class Origin:
    """Which object and field produced a line of rendered output."""

    ref: Ref
    path: tuple[PathPart, ...] = ()


@dataclass(frozen=True, slots=True)
class RenderResult:
    """The rendered files (relative path -> bytes) and how to trace them back to objects.

    ``origins`` maps (file, 1-based line) to the object field that produced the line. ``findings``
    are render-time observations (dropped listeners, placeholder certificates, ...), each with
    ``about`` naming the object they concern. ``statuses`` is the outcome of attachment and reference
    resolution for the subject, Gateway API-shaped (``{"HTTPRoute ns/name": {"parents": [{"parentRef",
    "conditions"}]}}``); ``validators.crossobject.statuses.statuses(state)`` gives every route's.
    """

    files: Mapping[str, bytes]
    origins: Mapping[tuple[str, int], Origin] = field(default_factory=dict)
    description: Description = field(default_factory=Description)
    findings: tuple[Finding, ...] = ()
    statuses: Mapping[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> str:
        return self.files["haproxy.cfg"].decode()

    def origin(self, file: str, line: int) -> Origin | None:
        return self.origins.get((file, line))


@dataclass(frozen=True, slots=True)
class Alert:
    """One problem ``haproxy -c`` reported, cleaned to one line and traced to its origin."""

    message: str
    file: str = ""
    line: int = 0
    level: str = "ALERT"  # ALERT or WARNING
    origin: Origin | None = None
    context: tuple[str, ...] = ()  # a few lines of the rendered config around ``line``


@dataclass(frozen=True, slots=True)
class HAProxyBinary:
    path: str
    version: str  # "2.8.5", "3.2.4", ...

    @property
    def version_tuple(self) -> tuple[int, ...]:
        parts: list[int] = []
        for chunk in self.version.split("-")[0].split("."):
            if not chunk.isdigit():
                break
            parts.append(int(chunk))
        return tuple(parts)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What one ``haproxy -c`` run said.

    ``decided`` is False when the run did not end in a judgement (a signal, an exit code no ALERT
    explains, exit 0 with an ALERT, output that is not HAProxy's): then ``ok`` is False too, ``alerts``
    is empty and ``error`` says what happened. Such a result is "could not decide", never an allow and
    never a deny, and a baseline that ended that way excuses nothing.
    """

    ok: bool
    binary: HAProxyBinary
    alerts: tuple[Alert, ...] = ()
    warnings: tuple[Alert, ...] = ()
    duration: float = 0.0
    timed_out: bool = False
    exit_code: int | None = None
    decided: bool = True
    error: str = ""


class RenderError(Exception):
    """A render that cannot produce a configuration (template error, unrepresentable value).

    ``origin`` names the object field at fault when known, so the gate can deny the subject with a
    field path instead of failing the review.
    """

    def __init__(self, message: str, *, origin: Origin | None = None, template_file: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.origin = origin
        #: ``/path/to/file.cfg.j2:LINE`` of a template's failure (the message names the template only, so
        #: no server path reaches an admission answer); the CLI shows it.
        self.template_file = template_file
