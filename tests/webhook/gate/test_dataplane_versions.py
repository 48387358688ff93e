"""``--dataplane-version``: the render writes only what both the checker and the data plane accept, each
dropped retry code is a warning on its own field, and every verdict (and /readyz) says which version it
was rendered for, and warns when the checker's major.minor is another. Run on every haproxy binary found
(2.8 from the wheel, 3.x from .haproxy3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.check import binaries
from haproxy_check.results import HAProxyBinary
from validators import dataplanes
from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy

GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": "shop"},
           "spec": {"gatewayClassName": "haproxy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"ports": [{"port": 80}]}}
ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
         "metadata": {"name": "api", "namespace": "shop"},
         "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["api.example.com"],
                  "rules": [{"backendRefs": [{"name": "web", "port": 80}],
                             "retry": {"attempts": 2, "codes": [421, 429, 503]}}]}}


def _version(path: str) -> tuple[int, ...]:
    import asyncio

    return dataplanes.major_minor(asyncio.run(binaries.detect(path)).version_tuple)


def _files(tmp_path: Path) -> tuple[Path, Path]:
    state = tmp_path / "state"
    state.mkdir(parents=True)
    (state / "gw.yaml").write_text(yaml.safe_dump_all([GATEWAY, SERVICE]))
    route = tmp_path / "route.yaml"
    route.write_text(yaml.safe_dump(ROUTE))
    return state, route


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], binary: str, *extra: str) -> dict[str, Any]:
    state, route = _files(tmp_path)
    code = main(["check", "--haproxy", binary, "--state", str(state), "-f", str(route), "-o", "json", *extra])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)["results"][0]
    assert code == 0, result
    return result


def _retry_warnings(result: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["message"] for f in result["findings"] if f["code"] == "RG0111"}


@pytest.mark.parametrize("dataplane", ["2.8", "3.2"])
def test_retry_codes_follow_the_older_of_checker_and_data_plane(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_paths: list[str], dataplane: str) -> None:
    for n, binary in enumerate(haproxy_paths):
        checker = _version(binary)
        target = min(checker, tuple(int(p) for p in dataplane.split(".")))
        result = _check(tmp_path / str(n), capsys, binary, "--dataplane-version", dataplane)
        assert result["decision"] == "allow", result
        warned = _retry_warnings(result)
        if target >= (3, 1):
            assert warned == {}, warned
        else:
            assert set(warned) == {"spec.rules[0].retry.codes[0]", "spec.rules[0].retry.codes[1]"}, warned
            assert "421 needs HAProxy 3.1 or later" in warned["spec.rules[0].retry.codes[0]"]
            assert "429 needs HAProxy 3.1 or later" in warned["spec.rules[0].retry.codes[1]"]
            if dataplane == "3.2":  # the data plane has them: the checker is the reason
                assert "the checker does not" in warned["spec.rules[0].retry.codes[1]"]
        assert result["dataplane"]["version"] == dataplane and result["dataplane"]["assumed"] is False
        assert result["dataplane"]["checker"].startswith(dataplanes.text(checker) + ".")
        mismatch = [w for w in result["warnings"] if w.startswith("checked with HAProxy")]
        if checker == tuple(int(p) for p in dataplane.split(".")):
            assert mismatch == []
        else:
            assert mismatch == [f"checked with HAProxy {dataplanes.text(checker)}, data plane {dataplane}: "
                                f"only what both accept is rendered, and a data plane {dataplane} may judge "
                                "some lines differently (run the checker at the data plane's version)"]


def test_without_a_data_plane_version_the_checker_s_is_assumed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    result = _check(tmp_path, capsys, haproxy_path)
    checker = dataplanes.text(_version(haproxy_path))
    assert result["dataplane"]["version"] == checker and result["dataplane"]["assumed"] is True
    state, route = _files(tmp_path / "text")
    main(["check", "--haproxy", haproxy_path, "--state", str(state), "-f", str(route), "-v"])
    out = capsys.readouterr().out
    assert out.count(f"assumed the checker's {checker}") == 1, out


def test_render_writes_the_codes_both_accept(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             haproxy_paths: list[str]) -> None:
    for n, binary in enumerate(haproxy_paths):
        state, route = _files(tmp_path / str(n))
        out = tmp_path / str(n) / "out"
        assert main(["render", "--haproxy", binary, "--state", str(state), "-f", str(route), "--out", str(out),
                     "--dataplane-version", "3.2"]) == 0
        capsys.readouterr()
        cfg = (out / "haproxy.cfg").read_text()
        retry = next(line.strip() for line in cfg.splitlines() if line.strip().startswith("retry-on"))
        codes = "421 429 503" if _version(binary) >= (3, 1) else "503"
        assert retry == f"retry-on conn-failure empty-response response-timeout {codes}", cfg


def test_the_retry_table_matches_the_binaries(tmp_path: Path, haproxy_paths: list[str]) -> None:
    """Every status of the table is accepted by ``retry-on`` exactly from its version on (each binary found
    judges a config with one ``retry-on`` line per code)."""
    import asyncio

    from haproxy_check.check.checker import Checker
    from haproxy_check.results import RenderResult

    cfg = ("defaults\n  mode http\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n"
           "frontend f\n  bind 127.0.0.1:18080\n  default_backend b\nbackend b\n  retry-on {code}\n"
           "  server s 127.0.0.1:80\n")
    for binary in haproxy_paths:
        info: HAProxyBinary = asyncio.run(binaries.detect(binary))
        accepted = dataplanes.retry_codes(info.version_tuple)
        for code in dataplanes.RETRY_CODES_SINCE:
            render = RenderResult(files={"haproxy.cfg": cfg.format(code=code).encode()})
            result = asyncio.run(Checker(info).check(render))
            assert result.ok is (code in accepted), (info.version, code, result.alerts)


async def test_readyz_warns_when_checker_and_data_plane_differ(tmp_path: Path, haproxy_path: str) -> None:
    from aiohttp import ClientSession
    from aiohttp.test_utils import TestServer

    from webhook.gate import assembly
    from webhook.server import servers
    from webhook.sources import StaticSource

    info = await binaries.detect(haproxy_path)
    checker = dataplanes.major_minor(info.version_tuple)
    other = (4, 0) if checker != (4, 0) else (2, 8)
    for dataplane, warned in ((other, True), (checker, False)):
        gate = assembly.build_gate(info, assembly.GateSettings(scratch_dir=str(tmp_path), dataplane_version=dataplane))
        server = TestServer(servers.make_app(gate, StaticSource()), host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession() as session, session.get(f"http://127.0.0.1:{server.port}/readyz") as resp:
                body = await resp.json()
        finally:
            await server.close()
        assert body["dataplane"]["version"] == dataplanes.text(dataplane) and body["dataplane"]["assumed"] is False
        assert ("warning" in body["dataplane"]) is warned, body["dataplane"]
        if warned:
            assert body["dataplane"]["warning"].startswith(
                f"checked with HAProxy {dataplanes.text(checker)}, data plane {dataplanes.text(dataplane)}")
