"""One port, split by server name: passthrough TLSRoutes beside HTTPS listeners (the default), and
Passthrough beside Terminate TLS listeners; real haproxy -c on every binary and real TLS clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.render.conftest import Check, assert_valid, lines, map_lines, render
from tests.render.test_live import echo_server
from tests.render_l4.conftest import tls_secret
from tests.render_l4.livegw import GW, running, service, sockets_prefix, tcp_server, tls_get, tls_server
from tests.render_l4.test_tcproutes_render import section
from validators.objects import Obj
from validators.states import MemoryState
from validators.views.attachments import attach


def gateway(*listeners: dict[str, Any], name: str = "edge") -> Obj:
    return {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": name, "namespace": "default"},
            "spec": {"gatewayClassName": "haptic", "listeners": list(listeners)}}


def tls_listener(name: str, port: int, mode: str, hostname: str | None, cert: str = "") -> dict[str, Any]:
    tls: dict[str, Any] = {"mode": mode}
    if cert:
        tls["certificateRefs"] = [{"name": cert}]
    return {"name": name, "protocol": "TLS", "port": port, "tls": tls, **({"hostname": hostname} if hostname else {})}


def tls_route(name: str, section_name: str, host: str, svc: str, port: int) -> Obj:
    return {"apiVersion": GW, "kind": "TLSRoute", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": "edge", "sectionName": section_name}], "hostnames": [host],
                     "rules": [{"backendRefs": [{"name": svc, "port": port}]}]}}


def mixed(port: int, pt_port: int = 9001, t_port: int = 9002) -> list[Obj]:
    return [gateway(tls_listener("pt", port, "Passthrough", "db.example.com"),
                    tls_listener("t", port, "Terminate", "*.apps.example.com", cert="apps")),
            tls_secret("apps", "*.apps.example.com"), *service("db", pt_port), *service("api", t_port),
            tls_route("db", "pt", "db.example.com", "db", pt_port),
            tls_route("api", "t", "*.apps.example.com", "api", t_port)]


def test_mixed_modes_on_one_port_render_an_sni_split(haproxy_check: Check) -> None:
    result = render(mixed(8443))
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    outer = section(cfg, "frontend gateway-tls-port-8443")
    assert "bind :8443" in outer and "tcp-request content reject unless { var(txn.tls_be) -m found }" in outer
    inner = section(cfg, "frontend gateway-tls-port-8443-terminate")
    assert "bind abns@routegate-tlst-8443 accept-proxy ssl crt certs/default_apps.pem" in inner
    assert any("ssl_fc_sni,lower,map_end(maps/tls-sni-wild-terminate-8443.map)" in x for x in inner)
    assert map_lines(result, "tls-sni-8443.map") == ["db.example.com gtw_tls_default_db_0"]
    assert map_lines(result, "tls-sni-wild-8443.map") == [".apps.example.com routegate_tlst_8443"]
    assert map_lines(result, "tls-sni-wild-terminate-8443.map") == [".apps.example.com gtw_tlst_default_api_0"]
    assert "server hop abns@routegate-tlst-8443 send-proxy-v2" in cfg
    assert not [f for f in result.findings if f.code in ("RG0119", "RG0513", "RG0517", "RG0505")]


def test_overlapping_hostnames_of_the_two_modes_still_conflict() -> None:
    objs = mixed(8443)
    objs[0]["spec"]["listeners"][0]["hostname"] = "*.example.com"  # covers *.apps.example.com
    result = render(objs)
    assert not any("8443" in x for x in lines(result) if x.startswith(("frontend", "bind")))
    _, statuses = attach(objs[-1], MemoryState(objs))
    assert any("overlapping hostnames" in s.message for s in statuses)


def ssl_passthrough_route(name: str, gw: str, host: str, svc: str, port: int) -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": gw}], "hostnames": [host],
                     "rules": [{"filters": [{"type": "ExtensionRef", "extensionRef": {
                         "group": "haproxy-haptic.org", "kind": "SSLPassthrough", "name": "on"}}],
                                "backendRefs": [{"name": svc, "port": port}]}]}}


def test_ssl_passthrough_http_route_takes_its_names_on_the_https_port(haproxy_check: Check) -> None:
    objs = [gateway({"name": "https", "protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"name": "www"}]}},
                    name="edge"),
            tls_secret("www", "www.example.com"), *service("db", 9001),
            ssl_passthrough_route("pass", "edge", "pass.example.com", "db", 9001)]
    result = render(objs)
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert "bind :443" in section(cfg, "frontend gateway-tls-port-443")
    assert any(x.startswith("bind abns@routegate-https-443 accept-proxy ssl") for x in cfg)
    assert map_lines(result, "tls-sni-443.map") == ["pass.example.com gtw_tls_default_pass_0"]
    assert "server s1 127.0.0.1:9001 weight 1" in section(cfg, "backend gtw_tls_default_pass_0")
    off = render(objs, share_https_with_passthrough=False)
    assert "frontend gateway-tls-port-443" not in off.config and "bind :443 ssl" in off.config
    assert [(f.code, f.field, f.about) for f in off.findings] == [
        ("RG0517", "spec.rules[0].filters", "HTTPRoute default/pass")]


def test_mixed_modes_live(haproxy_paths: list[str], tmp_path: Path) -> None:
    """A client with SNI db.example.com reaches the passthrough backend (its own certificate); one with
    x.apps.example.com is served the gateway's certificate and reaches the terminated route's backend;
    an unclaimed name is refused. Then the same on an HTTPS port beside passthrough."""
    db = tls_server(tmp_path, "db.example.com", "db-backend")
    api = tcp_server("api-backend")  # a terminated route without BackendTLSPolicy: plaintext upstream
    web, web_port = echo_server("web")
    try:
        for k, binary in enumerate(haproxy_paths):
            port, https_port = free_port(), free_port()
            objs = [*mixed(port, db, api),
                    gateway({"name": "https", "protocol": "HTTPS", "port": https_port,
                             "tls": {"certificateRefs": [{"name": "www"}]}},
                            tls_listener("pt2", https_port, "Passthrough", None), name="web"),
                    tls_secret("www", "www.example.com"), *service("web", web_port),
                    {**tls_route("db2", "pt2", "db.example.com", "db", db),
                     "spec": {**tls_route("db2", "pt2", "db.example.com", "db", db)["spec"],
                              "parentRefs": [{"name": "web", "sectionName": "pt2"}]}},
                    ssl_passthrough_route("pass", "web", "pass.example.com", "db", db),
                    {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "www", "namespace": "default"},
                     "spec": {"parentRefs": [{"name": "web", "sectionName": "https"}],
                              "hostnames": ["www.example.com"],
                              "rules": [{"backendRefs": [{"name": "web", "port": web_port}]}]}}]
            with running(binary, objs, tmp_path / f"run{k}", port,
                         internal_socket_prefix=sockets_prefix()) as result:
                assert not [f for f in result.findings if f.code in ("RG0119", "RG0517")], result.findings
                assert tls_get(port, "db.example.com") == ("db.example.com", "db-backend")
                assert tls_get(port, "x.apps.example.com") == ("*.apps.example.com", "api-backend")
                try:
                    got = tls_get(port, "unclaimed.org")
                except OSError:
                    got = None
                assert got is None, binary
                # HTTPS port beside passthrough: the passthrough name, then the terminated HTTPRoute
                assert tls_get(https_port, "db.example.com") == ("db.example.com", "db-backend")
                # an HTTPRoute with the SSLPassthrough ExtensionRef: end-to-end TLS to its backend
                assert tls_get(https_port, "pass.example.com") == ("db.example.com", "db-backend")
                cn, body = tls_get(https_port, "www.example.com", http_host="www.example.com")
                assert cn == "www.example.com" and '"server": "web"' in body, (binary, body)
    finally:
        web.shutdown()
