"""A passthrough route never takes a name a more specific HTTPS listener on the same port terminates (Gateway
API: the most specific listener hostname wins). The render keeps the name with the HTTPS listener, admission
denies the route naming it (RG0128), and a real HAProxy terminates that name while passing the rest through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.render.conftest import Check, assert_valid, map_lines, render
from tests.render.test_live import echo_server
from tests.render_l4.conftest import tls_secret
from tests.render_l4.livegw import GW, running, service, sockets_prefix, tls_get, tls_server
from validators import codes
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.objects import Obj
from validators.states import MemoryState


def edge(port: int, passthrough_host: str | None = None) -> Obj:
    pt: dict[str, Any] = {"name": "pt", "protocol": "TLS", "port": port, "tls": {"mode": "Passthrough"},
                          "allowedRoutes": {"namespaces": {"from": "All"}}}
    if passthrough_host:
        pt["hostname"] = passthrough_host
    return {"apiVersion": GW, "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "infra", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"gatewayClassName": "haptic", "allowedListeners": {"namespaces": {"from": "All"}},
                     "listeners": [{"name": "secure", "protocol": "HTTPS", "port": port,
                                    "hostname": "secure.example.com",
                                    "tls": {"certificateRefs": [{"name": "secure"}]}}, pt]}}


def secure_route(svc_port: int) -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "secure", "namespace": "infra"},
            "spec": {"parentRefs": [{"name": "edge", "sectionName": "secure"}], "hostnames": ["secure.example.com"],
                     "rules": [{"backendRefs": [{"name": "secure", "port": svc_port}]}]}}


def tenant_route(hosts: list[str], svc_port: int, parent: dict[str, Any] | None = None) -> Obj:
    return {"apiVersion": GW, "kind": "TLSRoute", "metadata": {"name": "grab", "namespace": "tenant"},
            "spec": {"parentRefs": [parent or {"name": "edge", "namespace": "infra", "sectionName": "pt"}],
                     "hostnames": hosts, "rules": [{"backendRefs": [{"name": "tenant", "port": svc_port}]}]}}


def state(port: int, hosts: list[str], secure_port: int = 9001, tenant_port: int = 9002) -> list[Obj]:
    return [edge(port), tls_secret("secure", "secure.example.com", "infra"), *service("secure", secure_port, "infra"),
            *service("tenant", tenant_port, "tenant"), secure_route(secure_port), tenant_route(hosts, tenant_port)]


def test_the_https_listener_keeps_its_name(haproxy_check: Check) -> None:
    result = render(state(443, ["secure.example.com", "tenant.example.com"]))
    assert_valid(haproxy_check(result))
    assert sorted(map_lines(result, "tls-sni-443.map")) == ["secure.example.com routegate_https_443",
                                                            "tenant.example.com gtw_tls_tenant_grab_0"]
    found = [(f.code, f.about) for f in result.findings if f.code == codes.PASSTHROUGH_OVER_HTTPS]
    assert found == [(codes.PASSTHROUGH_OVER_HTTPS, "TLSRoute tenant/grab")]
    # a wildcard route keeps the rest of its names; the HTTPS listener's exact name goes to the HTTP engine first
    wild = render(state(443, ["*.example.com"]))
    assert map_lines(wild, "tls-sni-443.map") == ["secure.example.com routegate_https_443"]
    assert map_lines(wild, "tls-sni-wild-443.map") == [".example.com gtw_tls_tenant_grab_0"]
    # without the conflict, nothing is added
    plain = render(state(443, ["tenant.example.com"]))
    assert map_lines(plain, "tls-sni-443.map") == ["tenant.example.com gtw_tls_tenant_grab_0"]
    assert map_lines(plain, "tls-sni-wild-443.map") == []


def review(objs: list[Obj], route: Obj) -> list[tuple[str, str, str]]:
    found = Checks(schemas=None).check(Change(Operation.CREATE, route), MemoryState(objs))
    return [(f.code, str(f.severity), f.field) for f in found if f.code == codes.PASSTHROUGH_OVER_HTTPS]


def test_admission_denies_the_route_naming_the_https_listeners_host() -> None:
    objs = state(443, ["tenant.example.com"])[:-1]
    route = tenant_route(["tenant.example.com", "secure.example.com"], 9002)
    assert review(objs, route) == [(codes.PASSTHROUGH_OVER_HTTPS, "deny", "spec.hostnames[1]")]
    found = Checks(schemas=None).check(Change(Operation.CREATE, route), MemoryState(objs))
    message = next(f.message for f in found if f.code == codes.PASSTHROUGH_OVER_HTTPS)
    for part in ("secure.example.com", "HTTPS listener 'secure'", "Gateway infra/edge", "namespace 'infra'"):
        assert part in message, message
    # a wildcard that only overlaps the listener's name: a warning (the render keeps the name apart)
    assert review(objs, tenant_route(["*.example.com"], 9002)) == [
        (codes.PASSTHROUGH_OVER_HTTPS, "warn", "spec.hostnames[0]")]
    assert review(objs, tenant_route(["tenant.example.com"], 9002)) == []


def test_a_tenants_own_listener_set_listener_is_judged_the_same() -> None:
    objs = state(443, ["tenant.example.com"])[:-1]
    objs[0]["spec"]["listeners"] = objs[0]["spec"]["listeners"][:1]  # the Gateway: HTTPS only
    objs.append({"apiVersion": GW, "kind": "ListenerSet",
                 "metadata": {"name": "mine", "namespace": "tenant", "creationTimestamp": "2025-01-01T00:00:00Z"},
                 "spec": {"parentRef": {"name": "edge", "namespace": "infra"},
                          "listeners": [{"name": "pt", "protocol": "TLS", "port": 443, "hostname": "*.example.com",
                                         "tls": {"mode": "Passthrough"}}]}})
    parent = {"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "mine", "sectionName": "pt"}
    route = tenant_route(["secure.example.com"], 9002, parent)
    assert review(objs, route) == [(codes.PASSTHROUGH_OVER_HTTPS, "deny", "spec.hostnames[0]")]
    result = render([*objs, route])
    assert map_lines(result, "tls-sni-443.map") == ["secure.example.com routegate_https_443"]


def test_passthrough_precedence_live(haproxy_paths: list[str], tmp_path: Path) -> None:
    """SNI secure.example.com is terminated by the HTTPS listener (its certificate, its route's backend);
    the tenant's other names are passed through undecrypted to the tenant's TLS backend."""
    tenant = tls_server(tmp_path, "tenant.example.com", "tenant-backend")
    web, web_port = echo_server("secure")
    try:
        for k, binary in enumerate(haproxy_paths):
            for hosts in (["secure.example.com", "tenant.example.com"], ["*.example.com"]):
                port = free_port()
                objs = state(port, hosts, web_port, tenant)
                where = tmp_path / f"r{k}-{len(hosts)}"
                with running(binary, objs, where, port, internal_socket_prefix=sockets_prefix()):
                    cn, body = tls_get(port, "secure.example.com", http_host="secure.example.com")
                    assert cn == "secure.example.com" and '"server": "secure"' in body, (binary, hosts, cn, body)
                    assert tls_get(port, "tenant.example.com") == ("tenant.example.com", "tenant-backend"), binary
    finally:
        web.shutdown()


def test_an_ssl_passthrough_http_route_is_judged_the_same() -> None:
    """An HTTPRoute passing its names through (SSLPassthrough) on the wildcard HTTPS listener may not take the
    more specific HTTPS listener's name either."""
    objs = state(443, ["tenant.example.com"])[:-1]
    objs[0]["spec"]["listeners"][1] = {"name": "wild", "protocol": "HTTPS", "port": 443, "hostname": "*.example.com",
                                       "tls": {"certificateRefs": [{"name": "secure"}]},
                                       "allowedRoutes": {"namespaces": {"from": "All"}}}
    route = {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "pass", "namespace": "tenant"},
             "spec": {"parentRefs": [{"name": "edge", "namespace": "infra", "sectionName": "wild"}],
                      "hostnames": ["secure.example.com", "tenant.example.com"],
                      "rules": [{"filters": [{"type": "ExtensionRef", "extensionRef": {
                          "group": "haproxy-haptic.org", "kind": "SSLPassthrough", "name": "on"}}],
                                 "backendRefs": [{"name": "tenant", "port": 9002}]}]}}
    assert review(objs, route) == [(codes.PASSTHROUGH_OVER_HTTPS, "deny", "spec.hostnames[0]")]
    result = render([*objs, route])
    assert sorted(map_lines(result, "tls-sni-443.map")) == ["secure.example.com routegate_https_443",
                                                            "tenant.example.com gtw_tls_tenant_pass_0"]
