"""One finding per fact (``routegate check``): a missing Service was RG0402 and RG0501, an unsupported
redirect statusCode the schema enum (RG0002) and RG0110; each is now reported once, by its most
specific rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy

GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": "shop"},
           "spec": {"gatewayClassName": "haproxy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}


def _route(name: str, rule: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"{name}.example.com"], "rules": [rule]}}


def _findings(tmp_path: Path, capsys: pytest.CaptureFixture[str], route: dict[str, Any]) -> list[dict[str, Any]]:
    state = tmp_path / "state"
    state.mkdir()
    (state / "gw.yaml").write_text(yaml.safe_dump(GATEWAY))
    (tmp_path / "route.yaml").write_text(yaml.safe_dump(route))
    main(["check", "--state", str(state), "-f", str(tmp_path / "route.yaml"), "-o", "json"])
    found: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["results"][0]["findings"]
    return found


def test_a_missing_service_is_one_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          haproxy_path: str) -> None:
    found = _findings(tmp_path, capsys, _route("lost", {"backendRefs": [{"name": "nowhere", "port": 80}]}))
    about = [f for f in found if f["path"] == "spec.rules[0].backendRefs[0]"]
    assert [f["code"] for f in about] == ["RG0501"], found
    assert "does not exist" in about[0]["message"] and "no servers until the Service exists" in about[0]["message"]


def test_an_unsupported_redirect_status_is_one_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       haproxy_path: str) -> None:
    found = _findings(tmp_path, capsys, _route("moved", {"filters": [
        {"type": "RequestRedirect", "requestRedirect": {"statusCode": 305}}]}))
    about = [f for f in found if f["path"].endswith("requestRedirect.statusCode")]
    assert [(f["code"], f["severity"]) for f in about] == [("RG0110", "deny")], found


@pytest.mark.parametrize(("ref", "code"), [({"name": "nowhere"}, "RG0509"),
                                           ({"name": "t", "namespace": "other"}, "RG0510")])
def test_a_missing_or_unpermitted_listener_secret_is_one_finding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_path: str, ref: dict[str, str], code: str) -> None:
    """It was RG0405 (the render's placeholder) and RG0509 / RG0510 on the same certificateRefs entry."""
    gateway = {**GATEWAY, "spec": {"gatewayClassName": "haproxy", "listeners": [
        {"name": "https", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [ref]}}]}}
    (tmp_path / "gw.yaml").write_text(yaml.safe_dump(gateway))
    main(["check", "-f", str(tmp_path / "gw.yaml"), "-o", "json"])
    found = json.loads(capsys.readouterr().out)["results"][0]["findings"]
    about = [f["code"] for f in found if f["path"] == "spec.listeners[0].tls.certificateRefs[0]"]
    assert about == [code], found
