"""Templates are code (issue 16, item 7): every template renders sandboxed, with only the documented
helpers; Secret data reaches a template only as a file path (``SecretFile``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from haproxy_check.render.rendering import Renderer, RenderError
from validators.objects import Obj
from validators.states import MemoryState

KEY = "-----BEGIN PRIVATE KEY-----\nTOP-SECRET-KEY\n-----END PRIVATE KEY-----\n"
LAST_APPLIED = '{"kind":"Secret","data":{"tls.key":"TOP-SECRET-IN-ANNOTATION"}}'
SECRET: Obj = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": "site", "namespace": "tenant", "annotations": {
                   "kubectl.kubernetes.io/last-applied-configuration": LAST_APPLIED, "team": "web"}},
               "data": {"tls.key": base64.b64encode(KEY.encode()).decode(), "tls.crt": ""}}
CONFIGMAP: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "tenant"},
                  "data": {"greeting": "hello"}}


def render(tmp_path: Path, text: str) -> str:
    tpl = tmp_path / "tpl"
    tpl.mkdir(exist_ok=True)
    (tpl / "955-user.cfg.j2").write_text(text)
    result = Renderer(template_dirs=[tpl]).render(MemoryState([SECRET, CONFIGMAP]))
    return result.files["haproxy.cfg"].decode()


@pytest.mark.parametrize(("text", "why"), [
    pytest.param("{{ settings.__class__.__mro__ }}", "__class__", id="__class__"),
    pytest.param("{{ Backend.__globals__ }}", "__globals__", id="__globals__"),
    pytest.param("{{ dig.__globals__['os'].environ }}", "__globals__", id="os.environ via globals"),
    pytest.param("{{ ''.__class__.__base__.__subclasses__() }}", "__class__", id="subclasses"),
    pytest.param("{{ state._state.list('Secret') }}", "_state", id="the unwrapped state"),
    pytest.param("{{ Backend.__self__.files }}", "__self__", id="the recorder's files"),
    pytest.param("{% set _ = resources('configmaps')[0].data.update({'x': 1}) %}", "update",
                 id="mutating shared objects"),
])
def test_escapes_from_the_sandbox_fail_with_a_clear_error(tmp_path: Path, text: str, why: str) -> None:
    with pytest.raises(RenderError, match=r"template 955-user\.cfg\.j2:1: .*") as info:
        render(tmp_path, text)
    message = str(info.value)
    assert "not allowed in a template" in message or "unsafe" in message or "undefined" in message, message
    assert why in message


@pytest.mark.parametrize(("text", "why"), [
    pytest.param("{{ open('/etc/passwd').read() }}", "'open' is undefined", id="open a file"),
    pytest.param("{{ environ }}", "'environ' is undefined", id="environ"),
    pytest.param("{{ os.environ }}", "'os' is undefined", id="os.environ"),
    pytest.param("{{ lipsum.__globals__.os.environ }}", "__globals__", id="os.environ via a jinja global"),
    pytest.param("{{ cycler.__init__.__globals__.os.environ }}", "__init__", id="os.environ via a class"),
    pytest.param("{{ range.__self__ }}", "__self__", id="builtins via a builtin"),
])
def test_no_global_reaches_files_or_the_environment(tmp_path: Path, text: str, why: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_CANARY", "leaked-environment")
    with pytest.raises(RenderError) as info:
        render(tmp_path, text)
    assert str(info.value).startswith("template 955-user.cfg.j2:1: ") and why in str(info.value), info.value
    assert "leaked-environment" not in str(info.value)


@pytest.mark.parametrize("text", [
    "{{ get('Secret', 'tenant', 'site').data['tls.key'] }}",
    "{{ get('Secret', 'tenant', 'site')['data'] }}",
    "{% for s in resources('secrets') %}{{ s.data }}{% endfor %}",
    "{% for s in state.list('Secret') %}{{ dig(s, 'data', 'tls.key') }}{% endfor %}",
    "{{ get('Secret', 'tenant', 'site').get('stringData') }}",
])
def test_secret_data_cannot_be_printed(tmp_path: Path, text: str) -> None:
    with pytest.raises(RenderError, match=r"Secret tenant/site: templates cannot read Secret (data|stringData); "
                                          r"use SecretFile"):
        render(tmp_path, text)


def test_a_whole_secret_prints_without_its_data(tmp_path: Path) -> None:
    out = render(tmp_path, "# {{ get('Secret', 'tenant', 'site') }} {{ get('Secret', 'tenant', 'site') | list }}"
                           " {{ get('Secret', 'tenant', 'site').metadata }}\n")
    assert "TOP-SECRET" not in out and base64.b64encode(KEY.encode()).decode() not in out
    assert "tenant/site" in out and "'team': 'web'" in out  # other annotations stay readable


def test_non_secret_objects_stay_readable(tmp_path: Path) -> None:
    out = render(tmp_path, "# {{ get('ConfigMap', 'tenant', 'cfg').data.greeting }} "
                           "{{ get('Secret', 'tenant', 'site').metadata.name }} "
                           "{{ get('Secret', 'tenant', 'site').type }}\n")
    assert "# hello site kubernetes.io/tls" in out


def test_secret_file_writes_the_value_to_a_file_of_the_render(tmp_path: Path) -> None:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "955-user.cfg.j2").write_text("# key at {{ SecretFile('tenant', 'site', 'tls.key') }}\n")
    result = Renderer(template_dirs=[tpl]).render(MemoryState([SECRET]))
    assert "# key at secrets/tenant_site_tls.key" in result.files["haproxy.cfg"].decode()
    assert result.files["secrets/tenant_site_tls.key"] == KEY.encode()
    assert "TOP-SECRET" not in result.files["haproxy.cfg"].decode()
    (tpl / "955-user.cfg.j2").write_text("{{ SecretFile('tenant', 'nope', 'tls.key') }}\n")
    with pytest.raises(RenderError, match="no such Secret"):
        Renderer(template_dirs=[tpl]).render(MemoryState([SECRET]))
