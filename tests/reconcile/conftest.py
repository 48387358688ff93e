"""A real gate (bundled CRDs, real haproxy) and the fake API server for the reconcile tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.check import binaries
from haproxy_check.results import HAProxyBinary
from tests.fakekube import FakeKube
from webhook.cluster import load_api_client
from webhook.gate import assembly
from webhook.gate.gates import Gate

DATA = Path(__file__).resolve().parents[1] / "data" / "webhook"


@pytest.fixture(scope="session")
def binary(haproxy_path: str) -> HAProxyBinary:
    return asyncio.run(binaries.detect(haproxy_path))


def not_reexecutable(binary: str) -> str:
    """Why a master-worker reload of ``binary`` cannot work here ("" when it can): a 3.x binary fetched
    without patchelf runs through a loader wrapper, and the master re-executes the bare binary."""
    try:
        with open(binary, "rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        return f"{binary}: {exc}"
    if head.startswith(b"#!") and b"--library-path" in head:
        return f"{binary} runs through a loader wrapper (fetched without patchelf): rerun scripts/get-haproxy3"
    return ""


@pytest.fixture
def haproxy3(haproxy_paths: list[str]) -> str:
    """The HAProxy 3.x binary (.haproxy3/haproxy), re-executable for reload tests; skipped with the
    reason when it is missing or cannot reload."""
    found = [p for p in haproxy_paths[1:] if asyncio.run(binaries.detect(p)).version_tuple >= (3, 0)]
    if not found:
        pytest.skip("no HAProxy 3.x binary: scripts/get-haproxy3 fetches one into .haproxy3")
    why = not_reexecutable(found[0])
    if why:
        pytest.skip(why)
    return found[0]


@pytest.fixture(scope="module")
def gate(binary: HAProxyBinary) -> Gate:
    return assembly.build_gate(binary, assembly.GateSettings())


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube() as fake:
        yield fake


@pytest.fixture
async def api(kube: FakeKube, tmp_path: Path) -> AsyncIterator[Any]:
    client = await load_api_client(kube.write_kubeconfig(tmp_path / "kubeconfig"))
    assert client is not None
    yield client
    await client.close()
