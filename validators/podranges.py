"""The pod-port range of isolated Gateways, as the rules see it (a value: per-object rules read no view)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PodRange:
    """The pod ports ``[base, base + span)`` (``RenderSettings.isolation_pod_port_base/_span``)."""
    base: int = 20000
    span: int = 10000

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and self.base <= port < self.base + self.span

    def __str__(self) -> str:
        return f"{self.base}-{self.base + self.span - 1}"
