"""ExternalName Services: a server with the DNS name, resolved by the data plane at run time through the
`resolvers routegate` section (init-addr none); haproxy -c on 2.8 and 3.x, and no DNS query at check time."""

from __future__ import annotations

from pathlib import Path

import pytest

from haproxy_check.check import sandboxes
from tests.haproxy_check.test_no_dns import run_isolated
from tests.render.conftest import Check, assert_valid, lines, render
from tests.render_l4.test_tcproutes_render import section
from validators.crossobject import crossobjects
from validators.objects import Obj
from validators.states import MemoryState

GW = "gateway.networking.k8s.io/v1"


def objects(external: str = "db.example.org") -> list[Obj]:
    return [{"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "shop"},
             "spec": {"gatewayClassName": "haptic", "listeners": [
                 {"name": "http", "protocol": "HTTP", "port": 80}, {"name": "pg", "protocol": "TCP", "port": 5432}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext", "namespace": "shop"},
             "spec": {"type": "ExternalName", "externalName": external}},
            {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "web", "namespace": "shop"},
             "spec": {"parentRefs": [{"name": "edge", "sectionName": "http"}],
                      "rules": [{"backendRefs": [{"name": "ext", "port": 8080}]}]}},
            {"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TCPRoute",
             "metadata": {"name": "pg", "namespace": "shop"},
             "spec": {"parentRefs": [{"name": "edge", "sectionName": "pg"}],
                      "rules": [{"backendRefs": [{"name": "ext", "port": 5432}]}]}}]


def test_external_name_renders_a_runtime_resolved_server(haproxy_check: Check) -> None:
    result = render(objects())
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert "server s1 db.example.org:8080 weight 1 resolvers routegate init-addr none" in cfg
    assert "server s1 db.example.org:5432 weight 1 resolvers routegate init-addr none" in section(
        cfg, "backend gtw_tcp_shop_pg_0")
    assert section(cfg, "resolvers routegate")[:2] == ["resolvers routegate", "parse-resolv-conf"]


def test_an_external_name_needs_no_service_ports() -> None:
    state = MemoryState(objects())
    for route in [*state.list("HTTPRoute"), *state.list("TCPRoute")]:
        assert not [f for f in crossobjects.findings(route, state) if f.code == "RG0516"]
    assert not render(objects()).findings


def test_nameservers_setting(haproxy_check: Check) -> None:
    result = render(objects(), dns_nameservers=("10.96.0.10:53", "10.96.0.11:53"))
    assert_valid(haproxy_check(result))
    assert section(lines(result), "resolvers routegate")[1:3] == ["nameserver dns1 10.96.0.10:53",
                                                                   "nameserver dns2 10.96.0.11:53"]
    with pytest.raises(ValueError, match="dns_nameservers"):
        render(objects(), dns_nameservers=("kube-dns:53",))


@pytest.mark.parametrize("bad", ["bad_name.example.org", "*.example.org", "a b", ""])
def test_an_unusable_name_gives_no_server_and_no_resolvers(bad: str) -> None:
    result = render(objects(bad))
    cfg = lines(result)
    assert not any(x.startswith("server ") for x in cfg)
    assert not any(x.startswith("resolvers") for x in cfg)


def test_no_external_name_no_resolvers() -> None:
    objs = objects()
    objs[1] = {**objs[1], "spec": {"ports": [{"port": 8080}]}}
    assert "resolvers" not in render(objs).config


@pytest.mark.parametrize("mode", [sandboxes.NETWORK_NAMESPACE, sandboxes.NO_INIT_ADDR])
def test_checking_an_external_name_sends_no_dns_query(haproxy_paths: list[str], tmp_path: Path, mode: str) -> None:
    cfg = lines(render(objects()))
    server = next(x for x in cfg if x.startswith("server s1 db.example.org:8080"))
    resolvers = "\n".join(f"  {x}" if i else x for i, x in enumerate(section(cfg, "resolvers routegate")))
    config = ("global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n"
              f"frontend f\n  bind 127.0.0.1:18080\n  default_backend b\nbackend b\n  {server}\n{resolvers}\n")
    for n, binary in enumerate(haproxy_paths):
        where = tmp_path / str(n)
        where.mkdir()
        out = run_isolated(binary, mode, where, config)
        assert out["queries"] == 0, out
        assert out["decided"] and out["ok"], out
