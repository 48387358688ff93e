"""What a rule may know besides the object: the state view and facts about the data plane."""

from __future__ import annotations

from dataclasses import dataclass, field

from validators.limits import Limits
from validators.objects import Obj
from validators.states import MemoryState, State


@dataclass(frozen=True, slots=True)
class Context:
    """Read-only inputs shared by every rule of one check.

    ``haproxy_version`` is the detected binary's version (421 became retryable in 3.1);
    ``http_ports`` are the chart-static HTTP and HTTPS ports TCP listeners may not reuse.
    """

    state: State = field(default_factory=MemoryState)
    haproxy_version: tuple[int, ...] = (2, 8)
    http_ports: tuple[int, ...] = (80, 443)
    old: Obj | None = None
    limits: Limits = field(default_factory=Limits)
