"""The engine: Backend()/RegisterMap() strictness and description, profiles, determinism, base config."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from haproxy_check.render.rendering import Renderer, RenderError, RenderSettings
from tests.render.conftest import Check, assert_valid, fixture, lines, render
from validators.states import MemoryState


def user_renderer(tmp_path: Path, text: str) -> Renderer:
    (tmp_path / "tpl").mkdir(exist_ok=True)
    (tmp_path / "tpl" / "650-user.cfg.j2").write_text(text)
    return Renderer(template_dirs=[tmp_path / "tpl"])


def test_empty_state_renders_a_base_config_haproxy_accepts(haproxy_check: Check) -> None:
    result = render([])
    assert_valid(haproxy_check(result))
    cfg = result.config
    for forbidden in ("stats socket", "daemon", "chroot", "pidfile", "log "):
        assert forbidden not in cfg


def test_backend_rejects_an_unknown_key_naming_it_and_the_template_line(tmp_path: Path) -> None:
    r = user_renderer(tmp_path, '{{ Backend({"name": "x", "mode": "http"}) }}\n'
                                '{{ Backend({"name": "y", "bogus": 1}) }}\n')
    with pytest.raises(RenderError, match=r"unknown key 'bogus'.*650-user\.cfg\.j2:2"):
        r.render(MemoryState())


def test_identical_settings_share_one_named_profile_and_body_makes_structural(tmp_path: Path,
                                                                                 haproxy_check: Check) -> None:
    r = user_renderer(tmp_path, """\
{{ Backend({"name": "a", "profile": ["retries 2"], "servers": [{"name": "s1", "address": "10.0.0.1", "port": 80}]}) }}
{{ Backend({"name": "b", "profile": ["retries 2"], "shape": "dynamic"}) }}
{{ Backend({"name": "c", "profile": ["retries 3"], "body": ["stick-table type ip size 1k"]}) }}
""")
    result = r.render(MemoryState())
    assert_valid(haproxy_check(result))
    backends = {b.name: b for b in result.description.backends}
    assert backends["a"].profile == backends["b"].profile != backends["c"].profile
    assert backends["a"].profile.startswith("haptic-be-")
    assert (backends["a"].shape, backends["c"].shape) == ("dynamic", "structural")
    assert backends["a"].servers[0].address == "10.0.0.1"
    assert lines(result).count(f"defaults {backends['a'].profile}") == 1
    assert f"backend a from {backends['a'].profile}" in lines(result)


def test_register_map_records_entries_and_order_flag(tmp_path: Path) -> None:
    r = user_renderer(tmp_path, '{% set p = RegisterMap("my-route.map", ["b 2", "a 1", "a 1"], {"ordered": false}) %}'
                                '{% set q = RegisterMap("re.map", ["z 1", "y 2"]) %}# {{ p }}\n')
    result = r.render(MemoryState())
    assert result.files["maps/my-route.map"] == b"a 1\nb 2\n"
    assert result.files["maps/re.map"] == b"z 1\ny 2\n"
    maps = {m.path: m for m in result.description.maps}
    assert maps["maps/my-route.map"].ordered is False and maps["maps/re.map"].ordered is True
    assert "# maps/my-route.map" in result.config


def test_render_is_deterministic_whatever_the_object_order() -> None:
    objs = fixture("basic.yaml") + fixture("filters.yaml") + fixture("grpc-https.yaml")
    first = render(objs)
    shuffled = list(objs)
    random.Random(7).shuffle(shuffled)
    second = render(shuffled)
    assert first.files == second.files
    assert json.dumps(first.description.as_dict()) == json.dumps(second.description.as_dict())


def test_description_is_plain_json_with_every_backend_and_map() -> None:
    result = render(fixture("basic.yaml"))
    data = json.loads(json.dumps(result.description.as_dict()))
    names = [b["name"] for b in data["backends"]]
    assert names == ["gw_h_platform_api_api-canary_80", "gw_h_platform_api_api_80"]
    assert {m["path"] for m in data["maps"]} >= {"maps/host.map", "maps/path-prefix.map",
                                                 "maps/weighted-multi-backend.map"}
    servers = data["backends"][1]["servers"]
    got = [(s["name"], s["address"], s["port"]) for s in servers]
    assert got == [("s1", "10.0.0.1", 8080), ("s2", "10.0.0.2", 8080)]


def test_source_map_traces_config_and_map_lines_to_fields() -> None:
    result = render(fixture("basic.yaml"))
    cfg = lines(result)
    adv = next(i for i, line in enumerate(cfg, 1) if line.startswith("http-request set-var(txn.gw_sel) str("))
    origin = result.origin("haproxy.cfg", adv)
    assert origin is not None and origin.path == ("spec", "rules", 1, "matches", 2, "path", "value")
    origin = result.origin("maps/path-exact.map", 1)
    assert origin is not None and str(origin.ref) == "HTTPRoute platform/api"


def test_settings_refuse_a_line_break() -> None:
    with pytest.raises(ValueError, match="line feed"):
        Renderer(settings=RenderSettings(timeout_client="1s\n  daemon"))


def test_a_system_ca_file_with_a_space_is_refused_up_front() -> None:
    # it is one word of every server line of a wellKnownCACertificates: System backend; it failed each such
    # render as "template 600-http-backends.cfg.j2 wrote an unescaped value"
    with pytest.raises(ValueError, match="system_ca_file"):
        Renderer(settings=RenderSettings(system_ca_file="/etc/ssl/my bundle.crt"))
