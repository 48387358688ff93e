"""The bundled CRD schemas (used without --crds) are exactly the sources they were made from."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import REPO, need_shared
from webhook.gate import assembly


def crds(path: Path) -> dict[str, object]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(path.read_text())
            if d and d.get("kind") == "CustomResourceDefinition"}


def bundled() -> dict[str, object]:
    return {d["metadata"]["name"]: d for d in assembly.bundled_crd_documents()}


def test_the_route_crd_in_the_bundle_is_the_one_in_manifests() -> None:
    route = crds(REPO / "manifests" / "base" / "route-crd.yaml")
    assert route, "manifests/base/route-crd.yaml holds the Route CRD"
    for name, doc in route.items():
        assert bundled()[name] == doc, "run scripts/bundle_crds.py after changing the Route CRD"


def test_the_gateway_api_crds_in_the_bundle_are_v1_6_1_experimental() -> None:
    source = crds(need_shared("gateway-api", "v1.6.1", "experimental-install.yaml"))
    mine = bundled()
    assert set(source) <= set(mine)
    assert all(mine[name] == doc for name, doc in source.items())


def test_without_crds_the_schemas_come_from_the_bundle() -> None:
    schemas = assembly.load_schemas([])
    assert schemas.get("gateway.networking.k8s.io", "v1", "HTTPRoute") is not None
    assert schemas.get("routegate.io", "v1alpha1", "Route") is not None
