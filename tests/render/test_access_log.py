"""The structured access log (RenderSettings.access_log) carries gw_route, the winning rule's
<namespace>_<name>_<ruleIndex>; checked with haproxy -c and read from a running haproxy's log."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.render.conftest import Check, assert_valid, lines, render, write
from tests.render.test_live import echo_server
from tests.render_l4.livegw import haproxy_process
from validators.objects import Obj

GW = "gateway.networking.k8s.io/v1"


def objects(port: int, backend: int) -> list[Obj]:
    return [{"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "shop"},
             "spec": {"gatewayClassName": "haptic", "listeners": [{"name": "http", "protocol": "HTTP", "port": port}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
             "spec": {"ports": [{"port": backend}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "web", "namespace": "shop", "labels": {"kubernetes.io/service-name": "web"}},
             "addressType": "IPv4", "ports": [{"name": "", "port": backend}],
             "endpoints": [{"addresses": ["127.0.0.1"]}]},
            {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "store", "namespace": "shop"},
             "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["shop.example.com"],
                      "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}],
                                 "backendRefs": [{"name": "web", "port": backend}]},
                                {"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}],
                                 "backendRefs": [{"name": "web", "port": backend}]}]}}]


def test_no_access_log_by_default() -> None:
    assert not any(x.startswith(("log ", "log-format")) for x in lines(render(objects(80, 8080))))


def test_access_log_lines_pass_haproxy(haproxy_check: Check) -> None:
    result = render(objects(80, 8080), access_log="stdout format raw local0")
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert "log stdout format raw local0" in cfg
    assert any(x.startswith("log-format") and '"gw_route":"%[var(txn.gw_rule_id)]"' in x for x in cfg)


def test_an_unsafe_access_log_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="access_log"):
        render(objects(80, 8080), access_log="stdout\nbackend evil")


def test_gw_route_names_the_winning_rule_live(haproxy_paths: list[str], tmp_path: Path) -> None:
    server, backend = echo_server("web")
    try:
        for k, binary in enumerate(haproxy_paths):
            port = free_port()
            where = write(render(objects(port, backend), access_log="stdout format raw local0"), tmp_path / f"r{k}")
            with haproxy_process(binary, where, port) as proc:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/b/x", headers={"Host": "shop.example.com"})
                assert conn.getresponse().status == 200
                conn.close()
                record = None
                assert proc.stdout is not None
                while record is None:  # skip notices and the start probe's empty connection
                    line = proc.stdout.readline().decode(errors="replace")
                    assert line, "haproxy exited without an access log line"
                    if line.startswith("{") and json.loads(line)["path"] == "/b/x":
                        record = json.loads(line)
                assert record["gw_route"] == "shop_store_1" and record["status"] == 200, (binary, record)
    finally:
        server.shutdown()
