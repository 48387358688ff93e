"""Per-Gateway listener isolation: two Gateways with HTTP listeners on one port get separate frontends
(the older keeps the port, the other a deterministic pod port) and routes of one never match on the other."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.render import isolation
from tests.conftest import free_port
from tests.render.conftest import Check, assert_valid, lines, map_lines, render
from tests.render.test_live import echo_server
from tests.render_l4.livegw import running
from validators.crossobject import crossobjects
from validators.objects import Obj, Ref
from validators.states import MemoryState

GW = "gateway.networking.k8s.io/v1"


def gateway(name: str, port: int, created: str) -> Obj:
    return {"apiVersion": GW, "kind": "Gateway",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
            "spec": {"gatewayClassName": "haptic", "listeners": [{"name": "http", "protocol": "HTTP", "port": port}]}}


def service(name: str, port: int) -> list[Obj]:
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
             "spec": {"ports": [{"port": port}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": name}},
             "addressType": "IPv4", "ports": [{"name": "", "port": port}], "endpoints": [{"addresses": ["127.0.0.1"]}]}]


def route(name: str, gw: str, svc: str, port: int) -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": gw}], "hostnames": ["app.example.com"],
                     "rules": [{"backendRefs": [{"name": svc, "port": port}]}]}}


def objects(port: int, a: int, b: int) -> list[Obj]:
    return [gateway("older", port, "2024-01-01T00:00:00Z"), gateway("newer", port, "2024-02-01T00:00:00Z"),
            *service("a", a), *service("b", b), route("ra", "older", "a", a), route("rb", "newer", "b", b)]


def test_pod_ports_are_deterministic_and_skip_declared_ports() -> None:
    ref = Ref("Gateway", "default", "newer")
    first = isolation.pod_port(ref, 80, base=20000, span=100, taken=set())
    assert first == isolation.pod_port(ref, 80, base=20000, span=100, taken=set())
    assert 20000 <= first < 20100
    # a taken slot moves on to the next free port, wrapping within the range
    nxt = isolation.pod_port(ref, 80, base=20000, span=100, taken={first})
    assert nxt == 20000 + (first - 20000 + 1) % 100
    with pytest.raises(ValueError, match="not within"):
        isolation.check_range(65000, 1000)


def test_two_gateways_on_one_port_render_two_frontends(haproxy_check: Check) -> None:
    result = render(objects(80, 8080, 8081))
    assert_valid(haproxy_check(result))
    pod = isolation.pod_port(Ref("Gateway", "default", "newer"), 80, base=20000, span=10000, taken={80})
    cfg = lines(result)
    assert "bind :80" in cfg and f"bind :{pod}" in cfg
    assert sorted(map_lines(result, "host.map")) == sorted([f"app.example.com:{pod} app.example.com:{pod}",
                                                            "app.example.com:80 app.example.com:80"])
    # the same host and path on different Gateways is no conflict
    assert not [f for f in result.findings if f.code in ("RG0508", "RG0406")], result.findings
    state = MemoryState(objects(80, 8080, 8081))
    for obj in state.list("HTTPRoute"):
        assert not [f for f in crossobjects.findings(obj, state) if f.code == "RG0508"]
    # the older Gateway keeps :80 whatever the names say; swapping the ages swaps the ports
    swapped = objects(80, 8080, 8081)
    swapped[0]["metadata"]["creationTimestamp"], swapped[1]["metadata"]["creationTimestamp"] = (
        "2024-03-01T00:00:00Z", "2024-01-01T00:00:00Z")
    other = isolation.pod_port(Ref("Gateway", "default", "older"), 80, base=20000, span=10000, taken={80})
    assert f"bind :{other}" in lines(render(swapped))


def get(port: int) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/", headers={"Host": "app.example.com"})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, json.loads(body)["server"] if resp.status == 200 else ""


def test_isolation_live(haproxy_paths: list[str], tmp_path: Path) -> None:
    """The same host on two Gateways' port: each address reaches only its own Gateway's route."""
    a, port_a = echo_server("A")
    b, port_b = echo_server("B")
    try:
        for k, binary in enumerate(haproxy_paths):
            port, pod = free_port(), free_port()
            settings: dict[str, Any] = {"isolation_pod_port_base": pod, "isolation_pod_port_span": 1}
            with running(binary, objects(port, port_a, port_b), tmp_path / f"r{k}", pod, **settings):
                assert get(port) == (200, "A"), binary
                assert get(pod) == (200, "B"), binary
    finally:
        a.shutdown()
        b.shutdown()
