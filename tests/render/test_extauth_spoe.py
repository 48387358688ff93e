"""ExternalAuth through the SPOA hub: the SPOE filter, its generated config file and the agent backend
are rendered, and haproxy -c (2.8 and 3.x) checks that wiring."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from haproxy_check.render.http import extauth
from tests.render.conftest import Check, assert_valid, fixture, lines, render, write


def test_external_auth_renders_the_spoe_wiring(haproxy_check: Check) -> None:
    result = render(fixture("filters.yaml"))
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert "filter spoe engine extauth config spoe/extauth.conf" in cfg
    assert "http-request send-spoe-group extauth check if { var(txn.gw_auth) -m found }" in cfg
    # the check runs before the verdict is read
    assert cfg.index("http-request send-spoe-group extauth check if { var(txn.gw_auth) -m found }") < next(
        i for i, x in enumerate(cfg) if "!{ var(txn.extauth.allowed) -m bool }" in x)
    conf = result.files["spoe/extauth.conf"].decode()
    assert "use-backend routegate_spoa_hub" in conf and "option var-prefix extauth" in conf
    assert "url=var(txn.gw_auth_url) headers=var(txn.gw_auth_hdrs)" in conf
    backend = cfg[cfg.index(next(x for x in cfg if x.startswith("backend routegate_spoa_hub "))):]
    assert "server hub 127.0.0.1:12345 weight 1" in backend[:5]


def test_haproxy_checks_the_wiring(haproxy_paths: list[str], tmp_path: Path) -> None:
    """Not only rendered: a broken link (the agent backend gone) is an ALERT of haproxy -c."""
    result = render(fixture("filters.yaml"), external_auth_agent="10.1.2.3:7000", external_auth_timeout="750ms")
    where = write(result, tmp_path)
    assert "timeout processing 750ms" in (where / "spoe/extauth.conf").read_text()
    cfg = (where / "haproxy.cfg").read_text()
    assert "server hub 10.1.2.3:7000 weight 1" in cfg
    (where / "spoe/extauth.conf").write_text((where / "spoe/extauth.conf").read_text().replace(
        "use-backend routegate_spoa_hub", "use-backend no_such_backend"))
    for binary in haproxy_paths:
        proc = subprocess.run([binary, "-dr", "-c", "-f", "haproxy.cfg"], cwd=where, capture_output=True, text=True,
                              timeout=30, env={"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null"},
                              check=False)
        assert proc.returncode != 0 and "no_such_backend" in proc.stdout + proc.stderr, (binary, proc.stderr)


def test_no_external_auth_no_wiring() -> None:
    result = render(fixture("basic.yaml"))
    assert "spoe/extauth.conf" not in result.files
    assert not any("spoe" in x or "routegate_spoa_hub" in x for x in lines(result))


@pytest.mark.parametrize("agent", ["auth.example.com:12345", "127.0.0.1", "127.0.0.1:0", "[::1]:99999"])
def test_the_agent_address_must_be_an_ip_and_port(agent: str) -> None:
    with pytest.raises(ValueError, match="external_auth_agent"):
        extauth.agent_address(agent)
    with pytest.raises(ValueError, match="external_auth_agent"):
        render(fixture("basic.yaml"), external_auth_agent=agent)


def test_ipv6_agent() -> None:
    assert extauth.agent_address("[fd00::1]:12345") == ("fd00::1", 12345)


def test_external_auth_live_against_a_fake_agent(haproxy_paths: list[str], tmp_path: Path) -> None:
    """A real haproxy asks the (fake) SPOA hub agent over SPOP: allowed requests reach the backend with
    the copied response header, the others get 401."""
    import http.client
    import json

    from tests.conftest import free_port
    from tests.render.fakespoa import FakeAgent
    from tests.render.test_live import echo_server
    from tests.render_l4.livegw import running, service

    agent = FakeAgent("Bearer ok")
    web, web_port = echo_server("web")
    gw = "gateway.networking.k8s.io/v1"
    try:
        for k, binary in enumerate(haproxy_paths):
            port = free_port()
            objs = [{"apiVersion": gw, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "default"},
                     "spec": {"gatewayClassName": "haptic",
                              "listeners": [{"name": "http", "protocol": "HTTP", "port": port}]}},
                    *service("web", web_port), *service("auth", 9000),
                    {"apiVersion": gw, "kind": "HTTPRoute", "metadata": {"name": "app", "namespace": "default"},
                     "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["app.example.com"], "rules": [{
                         "filters": [{"type": "ExternalAuth", "externalAuth": {
                             "protocol": "HTTP", "backendRef": {"name": "auth", "port": 9000},
                             "http": {"path": "/verify", "allowedResponseHeaders": ["X-Auth-User"]}}}],
                         "backendRefs": [{"name": "web", "port": web_port}]}]}}]
            with running(binary, objs, tmp_path / f"r{k}", port, external_auth_agent=f"127.0.0.1:{agent.port}"):

                def get(headers: dict[str, str], port: int = port) -> tuple[int, dict[str, str]]:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    conn.request("GET", "/x", headers={"Host": "app.example.com", **headers})
                    resp = conn.getresponse()
                    body = resp.read()
                    conn.close()
                    return resp.status, json.loads(body)["headers"] if resp.status == 200 else {}

                status, seen = get({"Authorization": "Bearer ok", "X-Auth-User": "forged"})
                assert status == 200 and seen.get("x-auth-user") == "alice", (binary, status, seen)
                assert get({"Authorization": "Bearer bad"})[0] == 401, binary
                assert get({})[0] == 401, binary
                assert any("/verify" in str(a.get("url")) for a in agent.seen), agent.seen
    finally:
        agent.close()
        web.shutdown()
