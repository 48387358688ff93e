"""A real gate (real validators, renderer and haproxy) for the webhook and CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from haproxy_check.results import HAProxyBinary
from tests.conftest import SHARED
from validators.schema.crds import SchemaSet
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.loading import inputs

DATA = Path(__file__).resolve().parents[1] / "data" / "webhook"
STATE_DIR = DATA / "state"
INPUTS = DATA / "inputs"
CRDS = SHARED / "gateway-api" / "v1.6.1" / "experimental-install.yaml" if SHARED else None


@pytest.fixture(scope="session")
def schemas() -> SchemaSet | None:
    if CRDS is None or not CRDS.exists():
        return None
    return assembly.load_schemas([str(CRDS)])


@pytest.fixture(scope="session")
def binary(haproxy_path: str) -> HAProxyBinary:
    import asyncio

    from haproxy_check.check import binaries

    return asyncio.run(binaries.detect(haproxy_path))


@pytest.fixture
def gate(binary: HAProxyBinary, schemas: SchemaSet | None) -> Gate:
    return assembly.build_gate(binary, assembly.GateSettings(), schemas=schemas)


def load_objects(path: Path) -> list[dict[str, object]]:
    return [assembly.with_namespace(item.obj) for item in inputs.load([str(path)])]
