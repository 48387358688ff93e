"""Which cluster ``check`` judges against, decided from its flags, and a first connection that fails fast.

Both run before the gate is imported: a check against a cluster that is down must fail in the time
``kubectl`` takes ("connection refused" at once), not after a second or more of imports on a busy CI
runner. Only the standard library, PyYAML and ``kubeconfigfiles`` are imported here.
"""

from __future__ import annotations

import argparse
import os
import sys

from webhook.cluster import kubeconfigfiles
from webhook.cluster.kubeconfigfiles import Source
from webhook.setuperrors import SetupError


def cluster_source(args: argparse.Namespace) -> Source | None:
    """The kubeconfig source ``check`` reads the cluster from, or None: offline.

    Live when ``--kubeconfig``, ``--context``, ``-n``, ``-A``, ``--all`` or ``--in-cluster`` is given or
    ``$KUBECONFIG`` is set; the kubectl plugin also follows ``~/.kube/config``, as kubectl does. ``--state``
    files stand for the cluster, so they win over ``$KUBECONFIG`` and ``-n``; ``--offline`` wins over all."""
    asked = [flag for flag, given in (
        ("--kubeconfig", args.kubeconfig), ("--in-cluster", args.in_cluster), ("--context", args.context),
        ("-A", args.all_namespaces), ("--all", args.all)) if given]
    if args.offline:
        if asked:
            raise SetupError(f"--offline and {asked[0]} contradict each other: give one")
        return None
    if args.in_cluster and args.kubeconfig:
        raise SetupError("--in-cluster and --kubeconfig are two clusters: give one")
    if args.state:
        if asked:
            raise SetupError(f"--state and {asked[0]} are two sources of the cluster state: give one")
        return None
    if args.in_cluster:
        return kubeconfigfiles.IN_CLUSTER
    if args.kubeconfig:
        return kubeconfigfiles.flag_source(args.kubeconfig)
    source = kubeconfigfiles.default_source()
    if asked or args.namespace or os.environ.get("KUBECONFIG"):
        return source
    if getattr(args, "kubectl_plugin", False):
        if kubeconfigfiles.exists(source):
            return source
        print(f"kubectl routegate: no kubeconfig ($KUBECONFIG, ~/.kube/config): judged against "
              f"{'the files' if not args.state else '--state'} only", file=sys.stderr)
    return None


def resolved(args: argparse.Namespace) -> Source | None:
    """``cluster_source``, decided once per run (it may print the kubectl plugin's note)."""
    if not hasattr(args, "cluster_source"):
        args.cluster_source = cluster_source(args)
    source: Source | None = args.cluster_source
    return source


def fail_fast(args: argparse.Namespace) -> None:
    """SetupError, worded as the full probe words it, when the cluster ``check`` would read is down.

    A server that accepts the connection is not judged here: its certificate, credentials and answer
    are the full probe's (``kubeconfigs.probe``), which runs next."""
    source = resolved(args)
    target = kubeconfigfiles.endpoint(source, args.context) if source is not None else None
    if source is None or target is None:
        return
    cause = kubeconfigfiles.unreachable(target.server)
    if cause is not None:
        raise SetupError(f"cannot reach the cluster at {target.where(source)}: {cause}")
