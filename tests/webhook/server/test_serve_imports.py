"""What a server that judges files imports: not the Kubernetes client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_serving_without_a_cluster_does_not_load_the_kubernetes_client() -> None:
    # The generated client's models are ~19 MiB of a server that judges files; it is imported only
    # with an API server to talk to.
    code = ("import sys, webhook.server.serving, webhook.reconcile.reconciling, webhook.reconcile.reconciler, "
            "webhook.reconcile.events; "
            "print(sorted(m for m in sys.modules if m.startswith('kubernetes_asyncio'))[:3])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"
