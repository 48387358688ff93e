"""Fixtures: a running FakeKube and a real kubernetes-asyncio ApiClient loaded from a kubeconfig for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.clusterkit import FakeKube
from webhook.cluster import load_api_client


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
