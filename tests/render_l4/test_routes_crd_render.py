"""The custom Route CRD (seed 000): dynamic backend with a literal server, URL-encoded header map keyed on
the backend name, decoded at request time. Checked with haproxy -c and once end to end with real traffic."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.render.conftest import Check, assert_valid, lines, map_lines, render, write
from tests.render_l4.conftest import fixture
from tests.render_l4.test_tcproutes_render import section
from validators.objects import Obj


def test_routes_render_as_seed_000_and_pass_haproxy(haproxy_check: Check) -> None:
    result = render(fixture("routes-crd.yaml"))
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    legacy = section(cfg, "backend shop_legacy")
    assert [x for x in legacy if x.startswith("server")] == ["server primary 10.20.0.5:8080 weight 1"]
    assert [x for x in section(cfg, "backend shop_catchall") if x.startswith("server")] == [
        "server primary [fd00::7]:9090 weight 1"]
    desc = {b.name: b for b in result.description.backends}
    assert desc["shop_legacy"].shape == "dynamic" and desc["shop_legacy"].body == ()
    # values URL-encoded at the writer: a space, ';', '%', '&', '#' can neither split the line nor read state
    assert map_lines(result, "route-reqhdr.map") == [
        "shop_catchall|set|x-tenant other%26x%3Dy%23frag",
        "shop_legacy|set|x-plain simple",
        "shop_legacy|set|x-tenant acme%20corp%3B%20100%25"]
    # one static rule per header name (spelling of the first Route by namespace/name), reading the map
    # and decoding at request time
    assert [x for x in cfg if x.startswith("http-request set-header")] == [
        "http-request set-header X-Plain %[var(txn.backend_name),concat(|set|x-plain),map_str(maps/route-reqhdr.map),"
        "url_dec] if { var(txn.backend_name),concat(|set|x-plain),map_str(maps/route-reqhdr.map) -m found }",
        "http-request set-header x-tenant %[var(txn.backend_name),concat(|set|x-tenant),map_str(maps/route-reqhdr.map),"
        "url_dec] if { var(txn.backend_name),concat(|set|x-tenant),map_str(maps/route-reqhdr.map) -m found }"]
    assert map_lines(result, "route-crd-exact.map") == ["legacy.example.com/api shop_legacy",
                                                        "legacy.example.com/v2 shop_legacy"]
    assert map_lines(result, "route-crd-prefix.map") == ["legacy.example.com/api/ shop_legacy",
                                                         "legacy.example.com/v2/ shop_legacy", "*/ shop_catchall"]


def test_without_a_gateway_the_routes_get_their_own_frontend(haproxy_check: Check) -> None:
    result = render([o for o in fixture("routes-crd.yaml") if o["kind"] == "Route"])
    assert_valid(haproxy_check(result))
    assert section(lines(result), "frontend routes-crd")[-1] == "use_backend %[var(txn.backend_name)]"


def test_a_route_that_cannot_be_rendered_is_skipped_with_a_finding(haproxy_check: Check) -> None:
    objs = fixture("routes-crd.yaml")
    objs[1]["spec"]["requestHeaders"].append({"name": "Bad Header", "value": "x"})
    result = render(objs)
    assert_valid(haproxy_check(result))
    assert "backend shop_legacy" not in " ".join(lines(result))
    assert [(f.code, f.about) for f in result.findings] == [("RG0519", "Route shop/legacy")]


def test_a_hostname_that_is_not_a_string_is_a_finding_not_a_render_error() -> None:
    objs = fixture("routes-crd.yaml")
    objs[1]["spec"]["hostnames"] = [5]
    result = render(objs)  # raised AttributeError (int.lower) inside the lazy l4.crd model: RenderError
    assert "backend shop_legacy" not in " ".join(lines(result))
    assert [(f.code, f.about) for f in result.findings] == [("RG0519", "Route shop/legacy")]


# ---------------------------------------------------------------- end to end


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = "\n".join(f"{k}: {v}" for k, v in self.headers.items()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()


def test_header_values_arrive_decoded_through_real_haproxy(haproxy_path: str, echo: int, tmp_path: Path) -> None:
    port = free_port()
    objs: list[Obj] = fixture("routes-crd.yaml")
    objs[0]["spec"]["listeners"][0]["port"] = port
    objs[1]["spec"]["backend"] = {"address": "127.0.0.1", "port": echo}
    del objs[2]  # without the hostless catch-all Route, an unmatched path gets the 404
    where = write(render(objs), tmp_path)
    proc = subprocess.Popen([haproxy_path, "-db", "-f", "haproxy.cfg"], cwd=where, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={"PATH": "/usr/bin:/bin", "OPENSSL_CONF": "/dev/null"})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/x", headers={"Host": "legacy.example.com"})
                with urllib.request.urlopen(req, timeout=2) as resp:
                    got = resp.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        assert "x-tenant: acme corp; 100%" in got.splitlines()  # HAProxy (HTX) sends lower-case names
        assert "x-plain: simple" in got.splitlines()
        miss = urllib.request.Request(f"http://127.0.0.1:{port}/apix", headers={"Host": "legacy.example.com"})
        with pytest.raises(urllib.error.HTTPError) as err:  # /apix is not under /api (segment boundary)
            urllib.request.urlopen(miss, timeout=5)
        assert err.value.code == 404
    finally:
        proc.kill()
        proc.wait()
