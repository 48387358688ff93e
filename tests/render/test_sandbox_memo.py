"""The template sandbox remembers jinja2's attribute verdicts per (type, name): the same answers as
jinja2's ``ImmutableSandboxedEnvironment``, refusals included, asked once per type and name. Templates
compile once per process: a second environment reuses the code, an edited file or other options do not."""

from __future__ import annotations

import collections
from typing import Any

import jinja2
import pytest
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from haproxy_check.render.sandboxenv import TemplateSandbox


def _function() -> None:
    return None


class Record:
    name = "r"

    def method(self) -> str:
        return "m"


SAMPLES: list[tuple[Any, str]] = [
    ({}, "clear"), ({}, "keys"), ({}, "update"), ([], "append"), ([], "index"), (set(), "add"),
    (collections.deque(), "pop"), ("s", "upper"), ("s", "format"), (_function, "__globals__"),
    (_function, "__code__"), (Record().method, "__func__"), (Record, "mro"), (Record(), "name"),
    (Record(), "method"), (Record(), "_private"), ((x for x in ()), "gi_frame"), (str, "mro"),
]


def test_answers_equal_jinja2s_first_and_remembered() -> None:
    theirs, ours = ImmutableSandboxedEnvironment(), TemplateSandbox()
    for _ in range(2):
        for obj, attr in SAMPLES:
            value = getattr(obj, attr, None)
            assert ours.is_safe_attribute(obj, attr, value) == theirs.is_safe_attribute(obj, attr, value), (obj, attr)


def test_a_refused_attribute_stays_refused_in_templates() -> None:
    env = TemplateSandbox(undefined=jinja2.StrictUndefined)
    template = env.from_string("{{ d.clear() }}")
    for _ in range(3):
        with pytest.raises(SecurityError):
            template.render(d={"a": 1})
    assert env.from_string("{{ d.keys() | list }}").render(d={"a": 1}) == "['a']"


def test_each_type_and_name_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[type, str]] = []
    original = ImmutableSandboxedEnvironment.is_safe_attribute

    def counted(self: ImmutableSandboxedEnvironment, obj: Any, attr: str, value: Any) -> bool:
        asked.append((type(obj), attr))
        return original(self, obj, attr, value)

    monkeypatch.setattr(ImmutableSandboxedEnvironment, "is_safe_attribute", counted)
    env = TemplateSandbox()
    out = env.from_string("{% for r in rs %}{{ r.name }}{{ r.method() }}{% endfor %}").render(rs=[Record()] * 50)
    assert out == "rm" * 50
    assert sorted(asked) == [(Record, "method"), (Record, "name")]


# ------------------------------------------------------------ compiled templates, shared by environments

def _compiles(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    names: list[str | None] = []
    original = jinja2.Environment.compile

    def counted(self: jinja2.Environment, source: Any, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        names.append(name)
        return original(self, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return names


def test_a_second_renderer_compiles_no_builtin_template_and_renders_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from haproxy_check.render.rendering import Renderer
    from tests.render.conftest import fixture
    from validators.states import MemoryState

    state = MemoryState(fixture("basic.yaml"))
    first = Renderer(incremental=False).render(state)
    compiled = _compiles(monkeypatch)
    second = Renderer(incremental=False).render(state)
    assert compiled == []
    assert second.files == first.files and second.description == first.description


def test_an_edited_template_or_other_options_compile_again(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    template = tmp_path / "t.j2"
    template.write_text("{% if x %}\n  a {{ x }}\n{% endif %}\n")

    def env(**options: Any) -> TemplateSandbox:
        return TemplateSandbox(loader=jinja2.FileSystemLoader(str(tmp_path)), auto_reload=False, **options)

    compiled = _compiles(monkeypatch)
    assert env(trim_blocks=True).get_template("t.j2").render(x=1) == "  a 1\n"
    assert env(trim_blocks=True).get_template("t.j2").render(x=2) == "  a 2\n"
    assert compiled == ["t.j2"]  # the second environment reused the first one's code
    assert env().get_template("t.j2").render(x=1) == "\n  a 1\n"  # other whitespace options: its own code
    template.write_text("{% if x %}\n  b {{ x }}\n{% endif %}\n")
    assert env(trim_blocks=True).get_template("t.j2").render(x=1) == "  b 1\n"  # edited: compiled again
    assert compiled == ["t.j2"] * 3


def test_an_environment_without_a_filter_gets_its_own_code_not_one_compiled_with_it(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # the code jinja2 generates depends on which filters exist (an unknown one is refused while compiling):
    # code compiled where the filter exists must not serve an environment without it
    template = tmp_path / "f.j2"
    template.write_text("{{ x | shout }}\n")

    def env(**filters: Any) -> TemplateSandbox:
        sandbox = TemplateSandbox(loader=jinja2.FileSystemLoader(str(tmp_path)), auto_reload=False)
        sandbox.filters.update(filters)
        return sandbox

    compiled = _compiles(monkeypatch)
    assert env(shout=str.upper).get_template("f.j2").render(x="a") == "A"
    with pytest.raises(jinja2.TemplateAssertionError, match="No filter named 'shout'"):
        env().get_template("f.j2").render(x="a")
    assert compiled == ["f.j2"] * 2
