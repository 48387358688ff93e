"""What a rule may know besides the object: the state view and facts about the data plane."""

from __future__ import annotations

from dataclasses import dataclass, field

from validators.limits import Limits
from validators.objects import Obj
from validators.podranges import PodRange
from validators.states import MemoryState, State


@dataclass(frozen=True, slots=True)
class Context:
    """Read-only inputs shared by every rule of one check.

    ``haproxy_version`` is the version the render writes for: the older of the checker's and the data
    plane's (``validators.dataplanes``; 421 and 429 became retryable in 3.1); ``dataplane_version`` is the
    data plane's as configured (None: the checker's is assumed);
    ``http_ports`` are the chart-static HTTP and HTTPS ports TCP listeners may not reuse; ``pod_ports``
    the range of isolated Gateways' pod ports no listener may declare (``validators.views.podports``).
    """

    state: State = field(default_factory=MemoryState)
    haproxy_version: tuple[int, ...] = (2, 8)
    http_ports: tuple[int, ...] = (80, 443)
    old: Obj | None = None
    limits: Limits = field(default_factory=Limits)
    dataplane_version: tuple[int, ...] | None = None
    pod_ports: PodRange = field(default_factory=PodRange)
