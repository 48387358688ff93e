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
from webhook import assembly
from webhook.cluster import load_api_client
from webhook.gates import Gate

DATA = Path(__file__).resolve().parents[1] / "data" / "webhook"


@pytest.fixture(scope="session")
def binary(haproxy_path: str) -> HAProxyBinary:
    return asyncio.run(binaries.detect(haproxy_path))


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
