"""JSON manifests are read as JSON (as the API server reads them), with the line of the document kept."""

from __future__ import annotations

import json

from webhook import inputs


def test_a_json_list_is_read_as_json_with_its_line() -> None:
    items = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "a"},
              "spec": {"ports": [{"port": 80 + i}]}} for i in range(3)]
    text = "\n\n" + json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    got = [g for g in inputs.parse_text(text, "x.json") if isinstance(g, inputs.Located)]
    assert [g.obj for g in got] == items
    assert {g.line for g in got} == {3}


def test_json_numbers_follow_json_not_yaml_1_1() -> None:
    # YAML 1.1 reads 1e3 as the string "1e3"; the API server (and this reader) read JSON as JSON.
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1e3}}'
    [got] = inputs.parse_text(text, "c.json")
    assert isinstance(got, inputs.Located) and got.obj["data"]["n"] == 1000.0
