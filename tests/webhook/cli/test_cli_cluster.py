"""``routegate check --kubeconfig``: files judged against a live cluster (the fake API server), read-only,
and ``--all`` auditing every stored object. ``run_check`` runs the CLI's ``main`` in process, on a thread of
its own beside the fake API server's loop; ``--all`` without a kubeconfig is a real process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.cluster.clusterkit import install_gateway_api
from tests.fakekube import FakeKube
from tests.webhook.clirun import env, in_process
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects

pytestmark = pytest.mark.haproxy


async def run_check(*args: str) -> tuple[int, str, str]:
    result = await asyncio.to_thread(in_process, "check", *args, timeout=180, HOME=os.environ.get("HOME", "/tmp"))
    return result.returncode, result.stdout, result.stderr


async def test_files_against_the_live_cluster_and_an_audit(tmp_path: Path, haproxy_path: str) -> None:
    async with FakeKube() as kube:
        install_gateway_api(kube)
        for obj in load_objects(STATE_DIR):
            kube.create(obj)
        broken = next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == "broken")
        kube.create(broken)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")

        code, out, err = await run_check("--kubeconfig", kubeconfig, "-f", str(INPUTS / "good.yaml"), "-o", "json")
        assert code == 0, out + err
        assert out.startswith("{"), out[:2000]
        [result] = json.loads(out)["results"]
        assert result["name"] == "shop" and result["allowed"]
        # judged against the cluster: the route attaches to the cluster's Gateway
        assert [c["status"] for c in result["status"]["parents"][0]["conditions"]] == ["True", "True"]

        code, out, err = await run_check("--kubeconfig", kubeconfig, "--all")
        assert code == 1, out + err
        assert "<cluster>: HTTPRoute capture/broken: denied" in out

        code, out, err = await run_check("--kubeconfig", kubeconfig, "--context", "no-such-context", "--all")
        assert code == 2 and "--kubeconfig" in err and "Traceback" not in err


async def test_all_needs_a_kubeconfig(tmp_path: Path) -> None:
    """``--all`` reads the cluster kubectl would (here none: no $KUBECONFIG, no ~/.kube/config)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook", "check", "--all", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**{k: v for k, v in env().items() if k != "KUBECONFIG"},
                                             "HOME": str(tmp_path)})
    _, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 2
    assert err.decode().splitlines() == [f"routegate: kubeconfig {tmp_path}/.kube/config: no such file"]
    code, _, err = await run_check("--all", "--state", str(STATE_DIR))
    assert code == 2 and "--state and --all are two sources" in err
