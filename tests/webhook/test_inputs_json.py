"""JSON manifests are read as JSON (line of the document kept); text that is not valid JSON still gets
the YAML parser's error naming the line."""

from __future__ import annotations

import json

import pytest
import yaml

from webhook import inputs


def test_json_list_is_read_as_json_with_its_line() -> None:
    items = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "a"},
              "spec": {"ports": [{"port": 80 + i}]}} for i in range(3)]
    text = "\n\n" + json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    got = list(inputs.parse_text(text, "x.json"))
    assert [g.obj for g in got] == items
    assert {g.line for g in got} == {3}
    assert [g.obj for g in got] == [g.obj for g in inputs.parse_text(text.replace("{", "{ "), "x.yaml")]


def test_json_numbers_follow_json_not_yaml_1_1() -> None:
    # YAML 1.1 reads 1e3 as the string "1e3"; the API server (and this reader) read JSON as JSON.
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1e3}}'
    assert next(inputs.parse_text(text, "c.json")).obj["data"]["n"] == 1000.0


def test_broken_json_names_the_line() -> None:
    with pytest.raises(inputs.InputError, match=r"^b\.json:2: invalid YAML"):
        list(inputs.parse_text('{"apiVersion": "v1",\n "kind": ]}', "b.json"))


def test_yaml_uses_libyaml_when_available() -> None:
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML built without libyaml")
    assert inputs._LOADER.__name__ == "CSafeLoader"
