"""Per-Gateway listener isolation: which Gateways' HTTP/HTTPS listeners get a dedicated pod port.

A port serves one Gateway's routes only. When several Gateways have HTTP/HTTPS listeners on one port,
the oldest keeps ``:<port>``; every other one gets a dedicated pod port, which the Gateway's own Service
maps its public port to (seed 004: "dedicated pod ports that isolate the Gateway's routes"). The
assignment is ``validators.views.podports`` (stored state alone, age order, a range listeners may not
declare: no newer object can move an existing Gateway's address; docs/ISOLATION.md); here is what a
render of a partial view adds to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from validators import codes
from validators.findings import Finding, Severity
from validators.objects import Ref
from validators.states import State
from validators.views import podports
from validators.views.attachments import Listener

check_range = podports.check_range
pod_port = podports.pod_port


def outside_listeners(state: State, http_ports: Sequence[int]) -> Sequence[Listener]:
    """The listeners of the whole state that a partial view leaves out and ``assign`` must still count.

    A review renders a closure (``validators.views.closures.Closure``, possibly under views that change
    its members: the proposed change, hidden culprits, a batch): it lists only some Gateways, yet the
    address of each depends on the others on its port (the oldest pair owns ``:<port>``) and on the
    older pairs' pod ports. The closure names the listeners of its non-members; any other State lists
    everything already."""
    seen: object = state
    while seen is not None:
        outside = getattr(seen, "outside_listeners", None)
        if callable(outside):
            return outside(http_ports)  # type: ignore[no-any-return]
        seen = getattr(seen, "base", None)
    return ()


def assign(state: State, listeners: Sequence[Listener], *, base: int, span: int) -> dict[tuple[Ref, int], int]:
    """(Gateway, listener port) -> pod port, for every Gateway that does not own its port's address."""
    return podports.assign(state, listeners, base=base, span=span)


def pod_range(settings: object) -> podports.PodRange | None:
    """The pod-port range of the render settings (None: settings without one, e.g. a bare model test)."""
    base, span = getattr(settings, "isolation_pod_port_base", None), getattr(settings, "isolation_pod_port_span", None)
    return podports.PodRange(base, span) if isinstance(base, int) and isinstance(span, int) else None


def unbound(lst: Listener, settings: object) -> Finding | None:
    """A listener declaring a pod port is not bound (it would share a pod port with an isolated Gateway's
    frontend: the kernel would split that port's connections between them). Admission denies it (RG0126)."""
    reserved = pod_range(settings)
    if reserved is None or lst.port not in reserved:
        return None
    return Finding(codes.POD_PORT_RESERVED, f"listener {lst.name!r} on port {lst.port} is not rendered: ports "
                   f"{reserved} are the pod ports of isolated Gateways", (*lst.path, "port"), Severity.WARN,
                   subject=False, about=str(lst.source))
