"""Findings: the one value every check produces.

A finding is frozen and carries a path relative to the object it is about; the caller adds a prefix
with :meth:`Finding.under`, as jsonschema's ``descend`` does. Presentation (which object, which
words around it) is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

PathPart = str | int


class Severity(StrEnum):
    DENY = "deny"
    WARN = "warn"


@dataclass(frozen=True, slots=True)
class Finding:
    code: str  # stable, documented: "RG0101"
    message: str  # one sentence, names the offending value and what is allowed; no object name
    path: tuple[PathPart, ...] = ()
    severity: Severity = Severity.DENY
    subject: bool = True  # False when the finding is about another object than the one under review
    about: str = ""  # "Kind ns/name" of the object the finding is about, when that is not the subject

    def under(self, *prefix: PathPart) -> Finding:
        return replace(self, path=(*prefix, *self.path))

    def with_severity(self, severity: Severity) -> Finding:
        return replace(self, severity=severity)

    @property
    def field(self) -> str:
        """The path as Kubernetes writes it: ``spec.rules[0].backendRefs[1].port``."""
        return format_path(self.path)

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": str(self.severity), "path": self.field, "message": self.message}


def format_path(path: Iterable[PathPart]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def parse_path(text: str) -> tuple[PathPart, ...]:
    """Inverse of :func:`format_path` for simple paths (``a.b[0].c``)."""
    out: list[PathPart] = []
    for chunk in text.replace("]", "").split("."):
        if not chunk:
            continue
        head, *indexes = chunk.split("[")
        if head:
            out.append(head)
        out.extend(int(i) for i in indexes if i.isdigit())
    return tuple(out)


def denies(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.DENY]


def warns(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.WARN]


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """Most specific first (deepest path), then by path and code: a stable order for messages."""
    return sorted(findings, key=lambda f: (-len(f.path), f.field, f.code, f.message))
