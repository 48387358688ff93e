"""The shipped custom Route CRD (manifests/base/route-crd.yaml): its openAPIV3Schema (and CEL rule) accept a
good Route and deny bad ones through the gate's own schema check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from validators.changes import Change, Operation
from validators.checks import Checks
from validators.findings import Severity
from validators.schema.crds import SchemaSet
from validators.states import MemoryState

CRD = Path(__file__).resolve().parents[2] / "manifests" / "base" / "route-crd.yaml"


def route(**spec: Any) -> dict[str, Any]:
    base = {"backend": {"address": "10.0.0.1", "port": 8080}}
    return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route",
            "metadata": {"name": "r", "namespace": "default"}, "spec": {**base, **spec}}


def test_crd_identity() -> None:
    crd = yaml.safe_load(CRD.read_text())
    assert crd["spec"]["group"] == "routegate.io" and crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "Route" and crd["spec"]["names"]["plural"] == "routes"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]


@pytest.mark.parametrize(("obj", "fields"), [
    pytest.param(route(hostnames=["a.example.com", "*.b.example.com"], paths=["/api"],
                       requestHeaders=[{"name": "X-Tenant", "value": "a b;c%"}]), [], id="good route"),
    pytest.param(route(backend={"address": "10.0.0.1"}), ["spec.backend.port"], id="port required"),
    pytest.param(route(backend={"address": "a b", "port": 80}), ["spec.backend.address"], id="address pattern"),
    pytest.param(route(backend={"address": "x", "port": 70000}), ["spec.backend.port"], id="port range"),
    pytest.param(route(requestHeaders=[{"name": "Bad Name", "value": "v"}]), ["spec.requestHeaders[0].name"],
                 id="header name is a token"),
    pytest.param(route(requestHeaders=[{"name": "X", "value": "a\nb"}]),
                 ["spec.requestHeaders[0]", "spec.requestHeaders[0].value"],
                 id="header value without control characters (CEL rule + RG0120)"),
    pytest.param(route(paths=["api"]), ["spec.paths[0]"], id="paths start with /"),
    pytest.param(route(hostnames=["Upper.Example.com"]), ["spec.hostnames[0]"], id="lower-case hostnames"),
])
def test_schema(obj: dict[str, Any], fields: list[str]) -> None:
    checks = Checks(schemas=SchemaSet.from_documents([yaml.safe_load(CRD.read_text())]))
    found = checks.check(Change(Operation.CREATE, obj), MemoryState())
    denied = sorted({f.field for f in found if f.severity is Severity.DENY})
    assert denied == fields, found
