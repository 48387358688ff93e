"""TCPRoute rendering: port claims by age, weighted backends, dropped HTTP-port listeners; real haproxy -c."""

from __future__ import annotations

from tests.render.conftest import Check, assert_valid, lines, render
from tests.render_l4.conftest import fixture
from validators.objects import Ref


def section(cfg: list[str], header: str) -> list[str]:
    start = next(i for i, line in enumerate(cfg) if line.startswith(header))
    end = next((i for i in range(start + 1, len(cfg)) if cfg[i].startswith(("frontend ", "backend ", "defaults "))),
               len(cfg))
    return [line for line in cfg[start:end] if line]


def test_tcp_fixture_passes_haproxy_and_oldest_route_owns_the_port(haproxy_check: Check) -> None:
    result = render(fixture("tcp.yaml"))
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert section(cfg, "frontend gateway-tcp-port-5432") == [
        "frontend gateway-tcp-port-5432 from base", "mode tcp", "bind :5432",
        "default_backend gtw_tcp_default_pg-old_0"]
    assert not any("gtw_tcp_default_pg-new_0" in line for line in cfg), "the younger claim must not render"
    assert not any(line.startswith("frontend gateway-tcp-port-80") for line in cfg), "TCP on port 80 is dropped"
    pg = section(cfg, "backend gtw_tcp_default_pg-old_0")
    assert [x for x in pg if x.startswith("server")] == [
        "server s1 10.0.0.1:5432 weight 1", "server s2 10.0.0.2:5432 weight 1"]  # 10.0.0.3 is not ready


def test_weights_are_shared_per_ref_and_weight_zero_stays_without_traffic() -> None:
    cache = section(lines(render(fixture("tcp.yaml"))), "backend gtw_tcp_default_cache_0")
    # redis-a (weight 3, two endpoints) : redis-b (weight 1, one endpoint) = 3:1 overall
    assert [x for x in cache if x.startswith("server")] == [
        "server r0-s1 10.1.0.1:6379 weight 3", "server r0-s2 10.1.0.2:6379 weight 3",
        "server r1-s1 10.2.0.1:6379 weight 2", "server r2-s1 10.3.0.1:6379 weight 0"]
    assert "balance roundrobin" in cache
    assert not any("reject" in x for x in cache)


def test_age_decides_not_the_name_and_the_loser_gets_a_warning() -> None:
    objs = fixture("tcp.yaml")
    for o in objs:  # make pg-new the older one
        if o["metadata"]["name"] == "pg-new":
            o["metadata"]["creationTimestamp"] = "2025-06-01T00:00:00Z"
    cfg = lines(render(objs))
    assert "default_backend gtw_tcp_default_pg-new_0" in cfg
    from validators.crossobject import crossobjects
    from validators.states import MemoryState
    old = next(o for o in objs if o["metadata"]["name"] == "pg-old")
    got = [(f.code, f.field) for f in crossobjects.findings(old, MemoryState(objs))]
    assert got == [("RG0507", "spec.parentRefs[0]")]


def test_listener_without_section_name_gets_a_frontend_per_port_sharing_one_backend(haproxy_check: Check) -> None:
    objs = [o for o in fixture("tcp.yaml") if o["kind"] != "TCPRoute"]
    objs.append({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
                 "metadata": {"name": "all", "namespace": "default"},
                 "spec": {"parentRefs": [{"name": "tcp-edge"}],
                          "rules": [{"backendRefs": [{"name": "pg", "port": 5432}]}]}})
    result = render(objs)
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert [x for x in cfg if x.startswith("default_backend")] == ["default_backend gtw_tcp_default_all_0"] * 2
    assert [x for x in cfg if x.startswith("backend gtw_tcp")] == [
        next(x for x in cfg if x.startswith("backend gtw_tcp_default_all_0"))]
    assert result.origin("haproxy.cfg", cfg.index("frontend gateway-tcp-port-6379 from base") + 1) is not None
    assert result.origin("haproxy.cfg", cfg.index("frontend gateway-tcp-port-6379 from base") + 1).ref == Ref(
        "TCPRoute", "default", "all")


def test_service_that_does_not_exist_yet_gives_a_backend_haproxy_accepts(haproxy_check: Check) -> None:
    objs = [o for o in fixture("tcp.yaml") if o["kind"] not in ("Service", "EndpointSlice")]
    result = render(objs)
    assert_valid(haproxy_check(result))
    pg = section(lines(result), "backend gtw_tcp_default_pg-old_0")
    assert not any(x.startswith("server") for x in pg)
    assert "tcp-request content reject" in pg


def test_tcp_listener_on_a_port_another_protocol_binds_is_not_rendered(haproxy_check: Check) -> None:
    objs = fixture("tcp.yaml")
    gw = next(o for o in objs if o["kind"] == "Gateway")
    gw["spec"]["listeners"].append({"name": "web", "protocol": "HTTP", "port": 6379})
    result = render(objs)
    assert_valid(haproxy_check(result))
    assert not any(x.startswith("frontend gateway-tcp-port-6379") for x in lines(result))
    assert [(f.code, f.field, f.about) for f in result.findings if f.code == "RG0522"] == [
        ("RG0522", "spec.listeners[1].port", "Gateway default/tcp-edge")]
