"""``--config FILE``: render settings, data plane version and scope from one YAML file (docs/CONFIG.md),
through ``routegate render`` / ``check`` and the gate ``serve`` and ``reconcile`` build; mistakes exit 2
naming the key."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.render.rendering import Renderer, RenderSettings
from haproxy_check.results import HAProxyBinary
from validators.checks import Checks
from webhook.cli.routegate import main
from webhook.gate import assembly
from webhook.loading import settingsfiles

pytestmark = pytest.mark.haproxy

NS = "shop"
GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": NS},
           "spec": {"gatewayClassName": "haproxy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
           "spec": {"ports": [{"port": 80}]}}
ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
         "metadata": {"name": "api", "namespace": NS},
         "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["api.example.com"],
                  "rules": [{"backendRefs": [{"name": "web", "port": 80}], "retry": {"attempts": 2},
                             "sessionPersistence": {"sessionName": "S"}}]}}


def _inputs(tmp_path: Path, config: dict[str, Any] | str) -> tuple[Path, Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all([GATEWAY, SERVICE]))
    (tmp_path / "route.yaml").write_text(yaml.safe_dump(ROUTE))
    cfg = tmp_path / "routegate.yaml"
    cfg.write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    return tmp_path / "state.yaml", tmp_path / "route.yaml", cfg


def _render(tmp_path: Path, config: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> str:
    state, route, cfg = _inputs(tmp_path, config)
    out = tmp_path / "out"
    assert main(["render", "--config", str(cfg), "--state", str(state), "-f", str(route), "-O", str(out)]) == 0
    capsys.readouterr()
    return (out / "haproxy.cfg").read_text()


def test_render_settings_from_the_file_reach_haproxy_cfg(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          haproxy_path: str) -> None:
    default = _render(tmp_path / "default", {}, capsys)
    assert "dynamic-cookie-key 'routegate'" in default and "X-Gateway-Matched-Route" not in default
    assert "disable-l7-retry" in default and "timeout client 30s" in default
    cfg = _render(tmp_path / "set", {"render": {
        "dynamicCookieKey": "c0ffee-install-7", "debugHeaders": True, "retryNonIdempotent": True,
        "timeoutClient": "45s", "timeoutHttpRequest": "5s"}}, capsys)
    assert "dynamic-cookie-key 'c0ffee-install-7'" in cfg
    assert "X-Gateway-Matched-Route" in cfg
    assert "disable-l7-retry" not in cfg
    assert "timeout client 45s" in cfg and "timeout http-request 5s" in cfg


def test_check_passes_with_the_file_s_settings_on_every_binary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_paths: list[str]) -> None:
    for n, binary in enumerate(haproxy_paths):
        state, route, cfg = _inputs(tmp_path / str(n), {
            "render": {"debugHeaders": True, "dynamicCookieKey": "k", "retryNonIdempotent": False},
            "dataplaneVersion": "3.2", "rules": {"RG0112": "off"}})
        code = main(["check", "--haproxy", binary, "--config", str(cfg), "--state", str(state), "-f", str(route),
                     "-o", "json"])
        result = json.loads(capsys.readouterr().out)["results"][0]
        assert code == 0 and result["decision"] == "allow", result
        assert result["dataplane"]["version"] == "3.2" and result["dataplane"]["assumed"] is False
        # a flag wins over the file
        code = main(["check", "--haproxy", binary, "--config", str(cfg), "--state", str(state), "-f", str(route),
                     "-o", "json", "--dataplane-version", "2.8"])
        assert json.loads(capsys.readouterr().out)["results"][0]["dataplane"]["version"] == "2.8"


def test_gateway_classes_from_the_file_scope_the_review(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        haproxy_path: str) -> None:
    state, route, cfg = _inputs(tmp_path, {"gatewayClasses": ["someone-else"]})
    main(["check", "--config", str(cfg), "--state", str(state), "-f", str(route), "-o", "json"])
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["decision"] == "allow" and result["findings"] == []
    assert any("is not ours" in w for w in result["warnings"]), result


@pytest.mark.parametrize(("config", "message"), [
    ({"rendr": {}}, "unknown key 'rendr'; allowed: rules, exemptNamespaces, strict, limits, render, "),
    ({"render": {"dynamicCookie": "x"}}, "render.dynamicCookie: unknown key; allowed: debugHeaders, "),
    ({"render": {"debugHeaders": "yes"}}, "render.debugHeaders: expected true or false, got 'yes'"),
    ({"render": {"httpPort": "80"}}, "render.httpPort: expected a whole number, got '80'"),
    ({"render": {"httpPort": 70000}}, "render: http_port: 70000 is not a port from 1 to 65535"),
    ({"render": {"timeoutClient": "30 s"}}, "render: timeout_client: '30 s' is not an HAProxy time"),
    ({"render": {"timeoutServer": "25d"}}, "render: timeout_server: '25d' is above HAProxy's longest timeout"),
    ({"render": {"dynamicCookieKey": ""}}, "render: dynamic_cookie_key: must not be empty"),
    ({"render": {"dynamicCookieKey": "a\nb"}}, "render: dynamic_cookie_key cannot be rendered safely"),
    ({"render": {"haproxyVersion": "3.2"}}, "render.haproxyVersion: unknown key"),
    ({"render": ["debugHeaders"]}, "render: expected a mapping with keys "),
    ({"dataplaneVersion": 3.10}, 'dataplaneVersion: expected a quoted version such as "3.2", got 3.1'),
    ({"dataplaneVersion": "three"}, "dataplaneVersion: HAProxy version 'three' is not MAJOR.MINOR"),
    ({"gatewayClasses": "haproxy"}, "gatewayClasses: expected a list of names"),
    ({"rules": {"RG9999": "off"}}, "rules.RG9999: unknown rule code"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("a: &x 1\nb: *x\n", "alias"),
])
def test_a_mistake_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_path: str,
                                          config: dict[str, Any] | str, message: str) -> None:
    state, route, cfg = _inputs(tmp_path, config)
    assert main(["check", "--config", str(cfg), "--state", str(state), "-f", str(route)]) == 2
    err = capsys.readouterr().err
    assert message in err and f"--config {cfg}" in err, err
    assert "Traceback" not in err


def test_every_render_setting_is_configurable_by_its_camel_case_name() -> None:
    """The keys come from RenderSettings itself: a field added there is a settings-file key at once,
    with its own type checked."""
    keys = settingsfiles.render_keys()
    fields = {f.name for f in dataclasses.fields(RenderSettings)} - settingsfiles.NOT_CONFIGURABLE
    assert {f.name for f in keys.values()} == fields
    defaults = RenderSettings()
    parsed = settingsfiles.parse({"render": {key: getattr(defaults, f.name) for key, f in keys.items()}})
    assert RenderSettings(**parsed.render) == defaults
    assert {"dynamicCookieKey", "debugHeaders", "retryNonIdempotent", "externalAuth", "externalAuthPlaintext",
            "timeoutConnect", "timeoutClient", "timeoutServer", "timeoutHttpRequest", "httpPort",
            "httpsPort"} <= set(keys)


def test_the_gate_serve_and_reconcile_build_takes_the_file(tmp_path: Path, haproxy_path: str) -> None:
    _, _, cfg = _inputs(tmp_path, {"render": {"dynamicCookieKey": "per-install", "httpPort": 8080,
                                              "httpsPort": 8443},
                                   "dataplaneVersion": "3.2", "controllerNames": ["haproxy-haptic.org/controller"]})
    binary = HAProxyBinary(haproxy_path, "2.8.25")
    gate = assembly.build_gate(binary, assembly.GateSettings(config=str(cfg)))
    assert isinstance(gate.renderer, Renderer) and isinstance(gate.rules, Checks)
    settings = gate.renderer.settings
    assert settings.dynamic_cookie_key == "per-install" and settings.haproxy_version == (2, 8)
    assert gate.rules.http_ports == (8080, 8443)
    assert gate.dataplane_version == (3, 2)
    assert "haproxy-haptic.org/controller" in gate.scope.describe()
    # reconcile --stats-socket is the command line's and stays above the file
    stats = assembly.build_gate(binary, assembly.GateSettings(config=str(cfg), render={"stats_socket": "/run/s"}))
    assert isinstance(stats.renderer, Renderer) and stats.renderer.settings.stats_socket == "/run/s"


def test_docs_config_lists_every_render_key() -> None:
    from tests.conftest import REPO

    text = (REPO / "docs" / "CONFIG.md").read_text()
    missing = [key for key in settingsfiles.render_keys() if f"`{key}`" not in text]
    assert missing == [], f"docs/CONFIG.md does not document {missing}"
