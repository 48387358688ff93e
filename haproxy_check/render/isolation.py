"""Per-Gateway listener isolation: which Gateways' HTTP/HTTPS listeners get a dedicated pod port.

A port serves one Gateway's routes only. When several Gateways have HTTP/HTTPS listeners on one port,
the oldest (creationTimestamp, then namespace/name) keeps ``:<port>``; every other one gets a dedicated
pod port, which the Gateway's own Service maps its public port to (seed 004: "dedicated pod ports that
isolate the Gateway's routes"). The pod port is deterministic and depends on the Gateway alone unless two
collide: ``base + crc32("<namespace>/<name>:<port>") % span``, then the next free port upwards (wrapping
within the range), taken in age order and never a port any listener declares. Adding a Gateway therefore
moves no existing Gateway's pod port except on such a collision.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from validators.objects import Ref
from validators.states import State
from validators.views.attachments import Listener, age_key


def check_range(base: int, span: int) -> None:
    """The pod port range must be ports (a setting error, before any render)."""
    if not (isinstance(base, int) and isinstance(span, int) and base >= 1 and span >= 1
            and base + span - 1 <= 65535):
        raise ValueError(f"isolation pod ports {base}..{base + span - 1} are not within 1..65535")


def pod_port(gateway: Ref, port: int, *, base: int, span: int, taken: set[int]) -> int:
    """The first free port from the Gateway's hash slot (``taken`` gains it)."""
    slot = zlib.crc32(f"{gateway.namespace}/{gateway.name}:{port}".encode()) % span
    for step in range(span):
        candidate = base + (slot + step) % span
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    raise ValueError(f"no free pod port in {base}..{base + span - 1} for {gateway} port {port}")


def outside_listeners(state: State, http_ports: Sequence[int]) -> Sequence[Listener]:
    """The listeners of the whole state that a partial view leaves out and ``assign`` must still count.

    A review renders a closure (``validators.views.closures.Closure``, possibly under views that change
    its members: the proposed change, hidden culprits, a batch): it lists only some Gateways, yet the
    address of each depends on all of them (the oldest owns ``:<port>``; pod ports resolve collisions in
    age order across every Gateway and skip every declared port). The closure names the listeners of
    its non-members; any other State lists everything already."""
    seen: object = state
    while seen is not None:
        outside = getattr(seen, "outside_listeners", None)
        if callable(outside):
            return outside(http_ports)  # type: ignore[no-any-return]
        seen = getattr(seen, "base", None)
    return ()


def assign(state: State, listeners: Sequence[Listener], *, base: int, span: int) -> dict[tuple[Ref, int], int]:
    """(Gateway, listener port) -> pod port, for every Gateway that does not own its port's address."""
    gateways: dict[int, set[Ref]] = {}
    for lst in listeners:
        if lst.protocol in ("HTTP", "HTTPS"):
            gateways.setdefault(lst.port, set()).add(lst.gateway)
    taken = {lst.port for lst in listeners}

    def age(ref: Ref) -> tuple[str, str, str]:
        obj = state.get("Gateway", ref.namespace, ref.name)
        return age_key(obj) if obj is not None else ("", ref.namespace, ref.name)

    out: dict[tuple[Ref, int], int] = {}
    for port, refs in sorted(gateways.items()):
        for ref in sorted(refs, key=age)[1:]:
            out[(ref, port)] = pod_port(ref, port, base=base, span=span, taken=taken)
    return out
