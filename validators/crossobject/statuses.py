"""Gateway API-shaped route status (status.parents[].conditions) from the shared attachment and
reference logic: what the render result carries as the outcome of attachment and resolution.

Pure; JSON-serializable output, stable order (parentRefs order, conditions Accepted then ResolvedRefs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from validators.crossobject import backendrefs
from validators.findings import format_path
from validators.objects import Obj, as_list, dig, kind_of, ref_of
from validators.states import State
from validators.views import attachments


def resolved_condition(route: Obj, state: State) -> dict[str, str]:
    """ResolvedRefs for the whole route: False with the first unresolved backendRef's reason."""
    bad = backendrefs.unresolved(backendrefs.backend_refs(route, state))
    if not bad:
        return {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "Resolved"}
    first = bad[0]
    where = format_path(first.path)
    return {"type": "ResolvedRefs", "status": "False", "reason": first.reason,
            "message": f"{where}: {first.message}"}


def route_status(route: Obj, state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
                 ) -> dict[str, Any]:
    """``{"parents": [{"parentRef": ..., "conditions": [Accepted, ResolvedRefs]}, ...]}``."""
    _, statuses = attachments.attach(route, state, http_ports=http_ports)
    resolved = resolved_condition(route, state)
    parent_refs = as_list(dig(route, "spec", "parentRefs"))
    return {"parents": [
        {"parentRef": parent_refs[st.parent_index],
         "conditions": [{"type": "Accepted", "status": "True" if st.accepted else "False", "reason": st.reason,
                         "message": st.message}, dict(resolved)]}
        for st in statuses if st.reason != attachments.FOREIGN_PARENT  # the other controller's to report
    ]}


def statuses(state: State, *, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS) -> dict[str, Any]:
    """Status of every route in the state, keyed ``"<Kind> <ns>/<name>"``."""
    return {str(ref_of(r)): route_status(r, state, http_ports=http_ports)
            for kind in attachments.ROUTE_KINDS for r in state.list(kind) if kind_of(r) == kind}
