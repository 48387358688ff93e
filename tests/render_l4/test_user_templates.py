"""User templates (``--templates DIR`` = ``Renderer(template_dirs=...)``): add and override snippets with the
same helpers and resource access; template errors name the template and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from haproxy_check.render.rendering import Renderer, RenderError
from tests.render.conftest import Check, assert_valid, lines
from tests.render_l4.conftest import fixture
from tests.render_l4.test_tcproutes_render import section
from validators.states import MemoryState

USER_TCP = """\
{#- A user snippet: one extra frontend + Backend() per TCPRoute, from resources() and dig(). -#}
{% for r in resources("tcproutes") %}
{% set be = "user_" ~ (dig(r, "metadata", "namespace") | ident) ~ "_" ~ (dig(r, "metadata", "name") | ident) %}
{{ Backend({"name": be, "mode": "tcp", "servers": [{"name": "one", "address": "192.0.2.10", "port": 5432}]}) }}
{% endfor %}
{% set names = resources("TCPRoute") | map(attribute="metadata.name") | map("mapkey") | list %}
{% set _ = RegisterMap("user-routes.map", names, {"ordered": False}) %}
"""


def renderer(tmp_path: Path, **files: str) -> Renderer:
    tpl = tmp_path / "tpl"
    tpl.mkdir(exist_ok=True)
    for name, text in files.items():
        (tpl / name).write_text(text)
    return Renderer(template_dirs=[tpl])


def test_a_user_template_adds_sections_with_the_same_helpers(tmp_path: Path, haproxy_check: Check) -> None:
    r = renderer(tmp_path, **{"955-user.cfg.j2": USER_TCP})
    result = r.render(MemoryState(fixture("tcp.yaml")))
    assert_valid(haproxy_check(result))
    cfg = lines(result)
    assert [x.split()[1] for x in cfg if x.startswith("backend user_")] == [
        "user_default_cache", "user_default_pg-new", "user_default_pg-old"]
    assert "server one 192.0.2.10:5432 weight 1" in cfg
    assert result.files["maps/user-routes.map"].decode().splitlines() == ["cache", "pg-new", "pg-old"]
    assert {b.name for b in result.description.backends} >= {"user_default_cache", "gtw_tcp_default_cache_0"}


def test_a_user_template_overrides_a_builtin_one(tmp_path: Path, haproxy_check: Check) -> None:
    override = """\
{% for fe in l4.tcp.frontends %}
frontend {{ fe.name }} from base
    mode tcp
    option tcplog
    bind :{{ fe.port }}
    default_backend {{ fe.backend }}
{% endfor %}
"""
    result = renderer(tmp_path, **{"460-tcp-frontends.cfg.j2": override}).render(MemoryState(fixture("tcp.yaml")))
    assert_valid(haproxy_check(result))
    assert "option tcplog" in section(lines(result), "frontend gateway-tcp-port-5432")


@pytest.mark.parametrize(("text", "where"), [
    pytest.param('x\n{% for r in resources("nopes") %}{% endfor %}\n', "955-user.cfg.j2:2", id="unknown resource"),
    pytest.param('{{ Backend({"name": "x"}) }}\n{{ Backend({"name": "y", "bogus": 1}) }}\n', "955-user.cfg.j2:2",
                 id="strict Backend keys"),
    pytest.param("x\n\n{{ nothing.here }}\n", "955-user.cfg.j2:3", id="undefined variable"),
    pytest.param("x\n{% for r in %}\n", "955-user.cfg.j2:2", id="syntax error"),
])
def test_template_errors_name_the_template_and_line(tmp_path: Path, text: str, where: str) -> None:
    r = renderer(tmp_path, **{"955-user.cfg.j2": text})
    with pytest.raises(RenderError, match=where.replace(".", r"\.")):
        r.render(MemoryState())
