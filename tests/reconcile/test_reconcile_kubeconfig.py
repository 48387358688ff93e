"""``routegate reconcile --kubeconfig`` as a real process against the fake API server: it promotes the
cluster's state, keeps last-known-good when a stored route breaks haproxy -c, writes one Warning Event
on that route (not repeated), and promotes again once the route is fixed."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.runtime.promotion import Promoter
from tests.cluster.clusterkit import install_gateway_api
from tests.conftest import free_port
from tests.fakekube import FakeKube
from tests.reconcile.conftest import DATA
from webhook.loading import inputs

pytestmark = pytest.mark.haproxy


def _objects(path: Path) -> list[dict[str, Any]]:
    return [i.obj for i in inputs.load([str(path)])]


async def _until(check: Any, proc: asyncio.subprocess.Process, within: float = 60) -> None:
    async with asyncio.timeout(within):
        while True:
            if proc.returncode is not None:
                pytest.fail("routegate reconcile exited")
            if check():
                return
            await asyncio.sleep(0.1)


async def test_reconcile_against_a_cluster(tmp_path: Path) -> None:
    out = tmp_path / "out"
    promoter = Promoter(out)
    async with FakeKube() as kube:
        install_gateway_api(kube)
        for obj in _objects(DATA / "state"):
            kube.create(obj)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webhook", "reconcile", "--kubeconfig", kube.write_kubeconfig(tmp_path / "kc"),
            "--output-dir", str(out), "--stats-socket", str(tmp_path / "admin.sock"), "--debounce", "0.2",
            "--metrics-listen", f"127.0.0.1:{free_port()}",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "HOME": str(tmp_path)})
        try:
            await _until(lambda: promoter.last_known_good() is not None, proc)
            first = promoter.last_known_good()
            [broken] = _objects(DATA / "inputs" / "bad-regex.yaml")
            kube.create(broken)
            events = kube.objects[("", "events")]
            await _until(lambda: len(events) == 1, proc)
            [event] = events.values()
            assert event["reason"] == "HAProxyRejected" and event["involvedObject"]["name"] == "broken"
            assert event["involvedObject"]["uid"] == kube.get(
                "gateway.networking.k8s.io", "httproutes", "capture", "broken")["metadata"]["uid"]  # type: ignore[index]
            assert promoter.last_known_good() == first
            fixed = copy.deepcopy(broken)
            fixed["spec"]["rules"][1]["matches"][0]["path"]["value"] = "/a{1,2}"
            kube.update(fixed)
            await _until(lambda: (promoter.last_known_good() or first) != first, proc)
            assert len(events) == 1 and next(iter(events.values()))["count"] == 1
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 15) == 0
