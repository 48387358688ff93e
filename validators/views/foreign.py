"""The stub a scoped state (validators.views.scopes) shows for another controller's Gateway or ListenerSet."""

from __future__ import annotations

from typing import Any


class Foreign(dict[str, Any]):
    """A Gateway or ListenerSet of another GatewayClass's controller: its metadata only, no listeners.

    A distinct type rather than a marker field, so no manifest can make its own Gateway look foreign."""


def is_foreign(obj: object) -> bool:
    return isinstance(obj, Foreign)
