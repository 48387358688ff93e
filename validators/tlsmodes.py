"""Passthrough and Terminate TLS listeners on one port: a conflict only when their hostnames overlap.

One port carries both modes through an SNI split (a TCP frontend reads the ClientHello's server name and
passes it through, or hands it to the terminating frontend), so the modes clash only where one server
name could belong to either: equal hostnames, a wildcard covering the other's name, or a listener
without a hostname (it takes every name).
"""

from __future__ import annotations

from collections.abc import Iterable


def _covers(wild: str, host: str) -> bool:
    suffix = wild[1:]  # "*.a.com" -> ".a.com": at least one more label
    return host.endswith(suffix) and len(host) > len(suffix)


def hostnames_overlap(a: str | None, b: str | None) -> bool:
    """Whether some server name matches both listener hostnames (None matches every name)."""
    if a is None or b is None:
        return True
    a, b = a.lower(), b.lower()
    return a == b or (a.startswith("*.") and _covers(a, b)) or (b.startswith("*.") and _covers(b, a))


def conflicted(mode: str, hostname: str | None, others: Iterable[tuple[str, str | None]]) -> bool:
    """Whether a listener of ``mode``/``hostname`` clashes with any (mode, hostname) on its port."""
    return any(m != mode and hostnames_overlap(hostname, h) for m, h in others)
