"""Two custom Routes with the same host and path: the one rendered (first by namespace/name) and the
one that loses both get a conflict warning (RG0523), as HTTPRoutes do (``routegate check``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy

GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": "default"},
           "spec": {"gatewayClassName": "haproxy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}


def _route(name: str, paths: list[str]) -> dict[str, Any]:
    return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"backend": {"address": "10.0.0.1", "port": 8080}, "hostnames": ["shop.example.com"],
                     "paths": paths}}


def test_the_same_host_and_path_in_two_routes_is_a_conflict(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             haproxy_path: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "gw.yaml").write_text(yaml.safe_dump(GATEWAY))
    routes = tmp_path / "routes.yaml"
    routes.write_text(yaml.safe_dump_all([_route("alpha", ["/api"]), _route("beta", ["/other", "/api/"]),
                                          _route("gamma", ["/elsewhere"])]))
    code = main(["check", "--state", str(state), "-f", str(routes), "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    found = {r["name"]: [f for f in r["findings"] if f["code"] == "RG0523"] for r in report["results"]}
    assert [(f["path"], f["severity"]) for f in found["beta"]] == [("spec.paths[1]", "warn")]
    assert "already claimed by Route shop/alpha" in found["beta"][0]["message"]
    assert "shop.example.com path /api" in found["beta"][0]["message"]
    assert len(found["alpha"]) == 1 and "also claimed by Route shop/beta" in found["alpha"][0]["message"]
    assert found["gamma"] == []
