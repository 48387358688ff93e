"""The rendered config actually routes: run haproxy (foreground) on free ports in front of two tiny HTTP
servers and send requests. Proves the map layout and precedence work at request time, not only that
haproxy -c accepts them.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import re
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.render.conftest import fixture, render, tls_secret, write

pytestmark = pytest.mark.haproxy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def echo_server(name: str) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers = {k.lower(): ", ".join(self.headers.get_all(k) or []) for k in self.headers}
            body = json.dumps({"server": name, "path": self.path, "headers": headers}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1])


@contextlib.contextmanager
def running(haproxy_path: str, objs: list[Any], where: Path, **settings: Any) -> Iterator[int]:
    """Render ``objs`` with their listener ports and EndpointSlice ports replaced by free ones, run haproxy."""
    a, port_a = echo_server("A")
    b, port_b = echo_server("B")
    port = free_port()
    for obj in objs:
        if obj["kind"] == "Gateway":
            for listener in obj["spec"]["listeners"]:
                listener["port"] = port
        if obj["kind"] == "EndpointSlice":
            obj["ports"][0]["port"] = port_a if obj["metadata"]["name"] == "a" else port_b
    write(render(objs, **settings), where)
    proc = subprocess.Popen([haproxy_path, "-dr", "-db", "-f", "haproxy.cfg"], cwd=where, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null"})
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"haproxy did not listen: {proc.stdout.read1(4096) if proc.stdout else ''!r}")
        yield port
    finally:
        proc.kill()
        proc.wait()
        a.shutdown()
        b.shutdown()


@pytest.fixture(scope="module")
def gateway(haproxy_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with running(haproxy_path, fixture("live.yaml"), tmp_path_factory.mktemp("live"), debug_headers=True) as port:
        yield port


def get(port: int, path: str, *, host: str = "app.example.com", method: str = "GET",
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request(method, path, headers={"Host": host, **(headers or {})})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    data = json.loads(body) if resp.status == 200 else {}
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


@pytest.mark.parametrize(("path", "method", "headers", "server"), [
    pytest.param("/api/x", "GET", {}, "A", id="prefix"),
    pytest.param("/api", "GET", {}, "A", id="prefix matches its own value"),
    pytest.param("/api/v2/x", "GET", {}, "B", id="longer prefix wins"),
    pytest.param("/api/x", "POST", {}, "B", id="method matcher beats path-only on the same prefix"),
    pytest.param("/api/v2/x", "POST", {}, "B", id="longer path-only prefix beats a method on a shorter one"),
    pytest.param("/api/exact", "GET", {}, "B", id="exact beats prefix"),
    pytest.param("/hdr", "GET", {"X-Env": "canary"}, "B", id="header matcher"),
    pytest.param("/hdr", "GET", {"X-Env": "prod"}, "A", id="header mismatch falls back to path-only"),
])
def test_precedence_at_request_time(gateway: int, path: str, method: str, headers: dict[str, str],
                                    server: str) -> None:
    status, _, data = get(gateway, path, method=method, headers=headers)
    assert (status, data["server"]) == (200, server)


def test_segment_boundary_and_host_anchoring(gateway: int) -> None:
    assert get(gateway, "/apix")[0] == 404
    assert get(gateway, "/re12", host="foo.wild.com")[2]["server"] == "B"
    assert get(gateway, "/re12", host="other.example.com")[0] == 404
    assert get(gateway, "/api/x", host="app.example.com:1234")[0] == 200


def test_header_modifiers_decode_map_values(gateway: int) -> None:
    _, resp, data = get(gateway, "/api/x", headers={"X-Del": "1", "X-Add": "orig"})
    assert data["headers"]["x-set"] == "a b;100%"
    assert data["headers"]["x-add"] == "orig, v"
    assert "x-del" not in data["headers"]
    assert resp["x-res"] == "r1" and resp["x-gateway-matched-route"] == "ns/r"


def test_redirect_and_rewrite(gateway: int) -> None:
    status, resp, _ = get(gateway, "/old/a/b?q=1")
    assert (status, resp["location"]) == (301, "https://app.example.com/new/a/b?q=1")
    assert get(gateway, "/old")[1]["location"] == "https://app.example.com/new"
    # no scheme or port: the listener port (not the default 80) is kept; a % is URL-encoded in
    # the map and decoded into the location
    status, resp, _ = get(gateway, "/keep/a?b=c")
    assert (status, resp["location"]) == (302, f"http://app.example.com:{gateway}/kept-100%?b=c")
    # explicit scheme http: its well-known port 80 is implied and omitted; the matched prefix length is
    # per match (the rule has two)
    assert get(gateway, "/to-http/deeper/y")[1]["location"] == "http://www.example.com/x/y"
    assert get(gateway, "/to-http")[0] == 308
    assert get(gateway, "/strip/x/y?z=1")[2]["path"] == "/x/y?z=1"
    assert get(gateway, "/strip")[2]["path"] == "/"


def test_weighted_split(gateway: int) -> None:
    servers = [get(gateway, "/split")[2]["server"] for _ in range(200)]
    assert 150 <= servers.count("A") <= 198


@pytest.fixture(scope="module")
def policies(haproxy_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    objs = fixture("live-policies.yaml")
    with running(haproxy_path, objs, tmp_path_factory.mktemp("policies")) as port:
        yield port


def test_cors_preflight_and_response_headers(policies: int) -> None:
    status, resp, _ = get(policies, "/cors/x", method="OPTIONS", headers={
        "Origin": "https://shop.example.net", "Access-Control-Request-Method": "PUT"})
    assert status == 204
    assert resp["access-control-allow-origin"] == "https://shop.example.net"
    assert resp["access-control-allow-methods"] == "GET, PUT" and resp["access-control-max-age"] == "60"
    assert resp["access-control-allow-credentials"] == "true"
    status, resp, data = get(policies, "/cors/x", headers={"Origin": "https://app.example.com"})
    assert (status, data["server"], resp["access-control-allow-origin"]) == (200, "A", "https://app.example.com")
    status, resp, _ = get(policies, "/cors/x", headers={"Origin": "https://evil.example.com"})
    assert status == 200 and "access-control-allow-origin" not in resp


def test_external_auth_fails_closed_and_unsupported_settings_answer_500(policies: int) -> None:
    assert get(policies, "/auth/x")[0] == 401  # no authorization agent answered: denied
    assert get(policies, "/noauth/x")[0] == 500


def test_all_zero_weights_answer_500(policies: int) -> None:
    assert get(policies, "/zero")[0] == 500


def test_backend_level_header_filter_runs_after_and_wins(policies: int) -> None:
    _, _, data = get(policies, "/be")
    assert data["server"] == "B"
    assert data["headers"]["x-level"] == "backend" and data["headers"]["x-rule"] == "1"


def _raw_https(port: int, *, sni: str | None, host: str) -> int:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname=sni) as tls:
        tls.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        head = tls.recv(64).decode()
    return int(head.split(" ")[1])


def test_https_sni_and_host_of_different_listeners_get_421(haproxy_path: str, tmp_path: Path) -> None:
    gw = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
          "metadata": {"name": "tls", "namespace": "ns"},
          "spec": {"gatewayClassName": "c", "listeners": [
              {"name": name, "protocol": "HTTPS", "port": 1, "hostname": f"{name}.example.com",
               "tls": {"certificateRefs": [{"name": f"{name}-cert"}]}} for name in ("one", "two")]}}
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "r", "namespace": "ns"},
             "spec": {"parentRefs": [{"name": "tls"}], "rules": [{"backendRefs": [{"name": "a", "port": 80}]}]}}
    objs = [o for o in fixture("live-policies.yaml") if o["kind"] in ("Service", "EndpointSlice")]
    objs += [gw, route, *(tls_secret(f"{n}-cert", "ns", f"{n}.example.com") for n in ("one", "two"))]
    with running(haproxy_path, objs, tmp_path) as port:
        assert _raw_https(port, sni="one.example.com", host="one.example.com") == 200
        assert _raw_https(port, sni="one.example.com", host="two.example.com") == 421
        assert _raw_https(port, sni=None, host="two.example.com") == 200  # no SNI: no isolation check


def test_session_persistence_cookie_and_header(policies: int) -> None:
    status, resp, _ = get(policies, "/sticky-cookie")
    stamp = r"[\w+/.-]+"  # HAProxy's cookie date stamps use a base64-like alphabet
    assert status == 200 and re.fullmatch(rf"SID=[0-9a-f]{{16}}\|{stamp}\|{stamp}; path=/; Max-Age=3600",
                                          resp["set-cookie"])
    status, resp, _ = get(policies, "/sticky-header")
    token = resp["x-sess"]
    assert re.fullmatch(r"[0-9a-f]{16}", token)
    assert resp["set-cookie"] == f"SESSION={token}; path=/; Max-Age=0"  # the client discards the cookie
    # sent back, the header becomes the persistence cookie, which HAProxy strips before the server
    status, _, data = get(policies, "/sticky-header", headers={"X-Sess": token})
    assert status == 200 and "cookie" not in data["headers"]
