"""``routegate serve --kubeconfig`` as a real process against the fake API server: it syncs, follows
changes made in the cluster and judges reviews against them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import ssl
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cluster.clusterkit import GW, install_gateway_api
from tests.conftest import free_port
from tests.fakekube import FakeKube
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects

pytestmark = pytest.mark.haproxy


def review(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": GW, "version": "v1", "kind": obj["kind"]}, "operation": "CREATE",
        "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"], "object": obj}}


def named(name: str) -> dict[str, Any]:
    return next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == name)  # type: ignore[index,return-value]


async def wait_for(predicate: Any, *, within: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def test_serve_follows_the_cluster_and_judges_against_it(tmp_path: Path, haproxy_path: str) -> None:
    async with FakeKube() as kube:
        install_gateway_api(kube)
        for obj in load_objects(STATE_DIR):
            kube.create(obj)
        kube.create(named("broken"))
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webhook", "serve", "--kubeconfig", kube.write_kubeconfig(tmp_path / "kubeconfig"),
            "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{free_port()}",
            "--cert-dir", str(tmp_path / "certs"),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        base = f"https://127.0.0.1:{port}"
        try:
            await wait_for(lambda: asyncio.sleep(0, (tmp_path / "certs" / "ca.crt").exists()), within=30,
                           what="the generated CA")
            trust = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:

                async def ready() -> bool:
                    with contextlib.suppress(aiohttp.ClientError):
                        async with session.get(base + "/readyz") as resp:
                            return resp.status == 200
                    return False

                async def judge(obj: dict[str, Any], uid: str) -> dict[str, Any]:
                    async with session.post(base + "/validate", data=json.dumps(review(obj, uid))) as resp:
                        assert resp.status == 200
                        out: dict[str, Any] = (await resp.json())["response"]
                        return out

                await wait_for(ready, within=60, what="/readyz after the first sync")
                neighbour = named("shop")  # on the broken route's host: the broken route is in its closure
                neighbour["spec"]["hostnames"] = ["broken.example.com"]
                out = await judge(neighbour, "u1")
                assert out["allowed"] is True
                assert any("already fails" in w and "capture/broken" in w for w in out.get("warnings", [])), out

                kube.delete(f"{GW}/v1", "HTTPRoute", "broken", "capture")

                async def healed() -> bool:
                    return not any("already fails" in w for w in (await judge(neighbour, "u2")).get("warnings", []))

                await wait_for(healed, within=30, what="the deletion to reach the webhook")
                out = await judge(named("broken"), "u3")
                assert out["allowed"] is False
                assert out["status"]["message"].startswith("HTTPRoute capture/broken: spec.rules[1].matches[0]")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    _, err = await proc.communicate()
            except TimeoutError:
                proc.kill()
                pytest.fail("routegate serve did not stop on SIGTERM")
        assert proc.returncode == 0, err.decode()[-2000:]
