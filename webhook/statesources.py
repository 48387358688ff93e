"""The state a long-running command (``serve``, ``reconcile``) follows: the cluster's watches
(``--kubeconfig`` or in-cluster configuration), else the manifests of ``--state``, loaded once.

Apart from ``serving`` so that ``reconciling`` reads it without importing the admission server.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from webhook.gate.assembly import load_state
from webhook.process import sharedstrings
from webhook.setuperrors import SetupError
from webhook.sources import StateSource, StaticSource


async def state_source(args: argparse.Namespace, tasks: list[Awaitable[Any]]) -> tuple[StateSource, Any]:
    """The watching ClusterState (``--kubeconfig`` or in-cluster) and its API client, else the files of
    ``--state`` (client None); the source's run goes to ``tasks``."""
    if args.kubeconfig or in_cluster():
        from webhook.cluster import ClusterConfigError, ClusterState, load_api_client

        try:
            api = await load_api_client(args.kubeconfig)
        except ClusterConfigError as exc:
            raise SetupError(f"--kubeconfig: {exc}") from None
        if api is not None:
            cluster = ClusterState(api, stale_after=args.max_state_staleness)
            tasks.append(cluster.run())
            return cluster, api
    if args.kubeconfig:
        raise SetupError(f"--kubeconfig {args.kubeconfig}: no usable cluster configuration")
    state, objects = load_state(args.state)
    # Held for the server's lifetime: one string per distinct value (before any index reads the objects).
    sharedstrings.share_strings(objects)
    return StaticSource(state, origin=args.state or ""), None


def in_cluster() -> bool:
    return Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
