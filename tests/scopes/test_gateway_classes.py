"""Only Gateways of our GatewayClass are judged (``--gateway-class`` / ``--controller-name``): through
``routegate check`` with real ``haproxy -c`` and through the Gate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.results import HAProxyBinary
from validators.changes import Change, Operation
from validators.schema.crds import SchemaSet
from validators.states import MemoryState
from validators.views.scopes import Scope
from webhook.cli.routegate import main
from webhook.gate import assembly

pytestmark = pytest.mark.haproxy

OURS = "haproxy-haptic.org/controller"


def _class(name: str, controller: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": name},
            "spec": {"controllerName": controller}}


def _gateway(name: str, class_name: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"gatewayClassName": class_name,
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}


def _route(name: str, parents: list[str], regex: str = "/a{2,1}") -> dict[str, Any]:
    # "/a{2,1}" passes the schema but HAProxy's PCRE refuses it: only a render and haproxy -c catch it.
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"parentRefs": [{"name": p} for p in parents], "hostnames": [f"{name}.example.com"],
                     "rules": [{"matches": [{"path": {"type": "RegularExpression", "value": regex}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]}}


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"ports": [{"port": 8080}]}}
STATE = [_class("haproxy", OURS), _class("other", "example.com/other-controller"),
         _gateway("ours", "haproxy"), _gateway("theirs", "other"), SERVICE]


def _write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, dict[str, Any]]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    _write(state / "cluster.yaml", STATE)
    routes = _write(tmp_path / "routes.yaml", [
        _route("mine", ["ours"]), _route("foreign", ["theirs"]),
        _route("both", ["ours", "theirs"], regex="/ok/[0-9]+"),
    ])
    code = main(["check", "--state", str(state), "-f", str(routes), "-o", "json", *flags])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    return {r["name"]: r for r in report["results"]}


@pytest.mark.parametrize("flags", [("--gateway-class", "haproxy"), ("--controller-name", OURS)])
def test_check_judges_only_routes_of_our_gateways(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  haproxy_path: str, flags: tuple[str, str]) -> None:
    results = _check(tmp_path, capsys, *flags)
    assert results["mine"]["allowed"] is False
    assert any(f["code"] == "RG0800" for f in results["mine"]["findings"]), results["mine"]
    foreign = results["foreign"]
    assert foreign["allowed"] is True and foreign["findings"] == [], foreign
    assert "allowed unchecked" in " ".join(foreign["warnings"])
    both = results["both"]
    # Judged for its parent of ours only: nothing about the other controller's Gateway, no status for it.
    assert both["allowed"] is True and both["findings"] == [], both
    assert [p["parentRef"]["name"] for p in both["status"]["parents"]] == ["ours"]


def test_without_a_scope_every_class_is_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               haproxy_path: str) -> None:
    results = _check(tmp_path, capsys)
    assert results["mine"]["allowed"] is False and results["foreign"]["allowed"] is False


def _gate(binary: HAProxyBinary, schemas: SchemaSet | None, **settings: Any) -> Any:
    return assembly.build_gate(binary, assembly.GateSettings(**settings), schemas=schemas)


def test_the_gate_allows_a_foreign_route_unchecked_and_denies_ours(binary: HAProxyBinary,
                                                                    schemas: SchemaSet | None) -> None:
    gate = _gate(binary, schemas, gateway_classes=("haproxy",))
    state = MemoryState(STATE, version="1")
    foreign = asyncio.run(gate.review(Change(Operation.CREATE, _route("foreign", ["theirs"])), state=state))
    assert foreign.allowed and not foreign.findings and not foreign.handled
    mine = asyncio.run(gate.review(Change(Operation.CREATE, _route("mine", ["ours"])), state=state))
    assert not mine.allowed and any(f.code == "RG0800" for f in mine.findings)


def test_a_foreign_gateway_and_its_policies_are_not_judged(binary: HAProxyBinary,
                                                           schemas: SchemaSet | None) -> None:
    gate = _gate(binary, schemas, controller_names=(OURS,))
    state = MemoryState([*STATE, _route("foreign", ["theirs"], regex="/ok")], version="1")
    gateway = _gateway("theirs2", "other")
    gateway["spec"]["listeners"][0]["port"] = 99999  # out of range: the schema would deny it
    verdict = asyncio.run(gate.review(Change(Operation.CREATE, gateway), state=state))
    assert verdict.allowed and not verdict.findings
    policy = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
              "metadata": {"name": "web-tls", "namespace": "shop"},
              "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                       "validation": {"hostname": "web.shop", "caCertificateRefs": [
                           {"group": "", "kind": "ConfigMap", "name": "missing-ca"}]}}}
    # Only the other controller's route uses Service web: the policy is not ours.
    verdict = asyncio.run(gate.review(Change(Operation.CREATE, policy), state=state))
    assert verdict.allowed and not verdict.findings and not verdict.handled
    # Once a route of ours uses it, it is judged (the missing CA ConfigMap is reported).
    ours = MemoryState([*STATE, _route("mine", ["ours"], regex="/ok")], version="2")
    verdict = asyncio.run(gate.review(Change(Operation.CREATE, policy), state=ours))
    assert verdict.handled and any(f.code == "RG0515" for f in verdict.findings), verdict


def test_scope_describes_itself_and_defaults_to_every_class() -> None:
    assert Scope().everything and "every GatewayClass" in Scope().describe()
    assert "haproxy" in Scope.of(["haproxy"]).describe()
