"""Cluster state for the webhook: reflectors over the Kubernetes API and read-only snapshots.

The server builds ``ClusterState(await load_api_client(kubeconfig))``, runs ``run()`` as a task and
judges each review against ``snapshot()`` once ``ready``.

The names below are imported on first use: they bring kubernetes-asyncio (most of a second), which
``webhook.cluster.kubeconfigfiles`` must not pay when ``check`` only finds out that a cluster is down.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webhook.cluster.clients import ClusterConfigError, load_api_client
    from webhook.cluster.clusterstate import ClusterState
    from webhook.cluster.stores import ClusterSnapshot

__all__ = ["ClusterConfigError", "ClusterSnapshot", "ClusterState", "load_api_client"]

_HOMES = {"ClusterConfigError": "clients", "load_api_client": "clients", "ClusterState": "clusterstate",
          "ClusterSnapshot": "stores"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
