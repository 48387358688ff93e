"""Cluster state for the webhook: reflectors over the Kubernetes API and read-only snapshots.

The server builds ``ClusterState(await load_api_client(kubeconfig))``, runs ``run()`` as a task and
judges each review against ``snapshot()`` once ``ready``.
"""

from webhook.cluster.clients import ClusterConfigError, load_api_client
from webhook.cluster.clusterstate import ClusterState
from webhook.cluster.stores import ClusterSnapshot

__all__ = ["ClusterConfigError", "ClusterSnapshot", "ClusterState", "load_api_client"]
