"""``routegate check`` gives the prediction: how a data plane running the given state takes the inputs,
the same planner answer admission and reconcile give (the report's ``prediction``, each verdict's when
there is one input; one ``prediction:`` line in text), and none for inputs that are not all allowed."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.attachments import gwbuilders as gb
from validators.objects import Obj
from webhook.cli import routegate as cli

pytestmark = pytest.mark.haproxy


def route(name: str, host: str, service: str, env: str = "one") -> Obj:
    return gb.route("HTTPRoute", name, gb.parent("edge", namespace="infra"), hosts=[host], rules=[{
        "backendRefs": [{"name": service, "port": 80}],
        "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Env",
                                                                                     "value": env}]}}]}])


def run(tmp_path: Path, haproxy: str, version: str, *inputs: Obj | str, output: str = "json") -> tuple[int, str]:
    flags = [i for i in inputs if isinstance(i, str)]
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "all.yaml").write_text(yaml.safe_dump_all([
        gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra"),
        gb.service("web", "default", ("http", 80)), gb.service("api", "default", ("http", 80)),
        gb.endpoint_slice("web-a", "web", "default", [("http", 8080)], [("10.0.0.1", True)]),
        gb.endpoint_slice("api-a", "api", "default", [("http", 8080)], [("10.0.0.2", True)]),
        route("one", "a.example.com", "web")]))
    given = tmp_path / "inputs.yaml"
    given.write_text(yaml.safe_dump_all([i for i in inputs if not isinstance(i, str)]))
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["check", "--haproxy", haproxy, "--dataplane-version", version, "--state", str(state),
                         "-f", str(given), "-o", output, *flags])
    return code, out.getvalue()


def test_one_input_gets_the_prediction_on_its_verdict_and_the_report(tmp_path: Path, haproxy_path: str) -> None:
    code, out = run(tmp_path, haproxy_path, "2.8", route("one", "a.example.com", "web", env="two"))
    report: dict[str, Any] = json.loads(out)
    assert code == 0
    assert report["prediction"] == {"action": "runtime", "note": "applies at runtime (1 command)", "commands": 1,
                                    "basis": "a data plane running the given state (--state or the cluster)"}
    assert report["results"][0]["prediction"] == report["prediction"]
    code, text = run(tmp_path, haproxy_path, "2.8", route("one", "a.example.com", "web", env="two"), output="text")
    assert "prediction: applies at runtime (1 command)\n" in text
    code, out = run(tmp_path, haproxy_path, "2.8", route("one", "a.example.com", "web", env="two"),
                    "--no-prediction")
    assert code == 0 and json.loads(out)["prediction"] is None


def test_the_data_planes_version_decides_and_many_inputs_get_one_prediction(tmp_path: Path,
                                                                            haproxy_path: str) -> None:
    new = route("two", "b.example.com", "api")
    changed = route("one", "a.example.com", "web", env="two")
    on_34 = json.loads(run(tmp_path, haproxy_path, "3.4", new, changed)[1])
    assert on_34["prediction"]["action"] == "runtime" and on_34["prediction"]["commands"] > 1, on_34["prediction"]
    assert [r["prediction"] for r in on_34["results"]] == [None, None]  # the set's, not one object's
    on_28 = json.loads(run(tmp_path, haproxy_path, "2.8", new)[1])["prediction"]
    assert on_28["action"] == "reload" and "(3.4+)" in on_28["note"], on_28


def test_no_prediction_when_an_input_is_denied(tmp_path: Path, haproxy_path: str) -> None:
    bad = route("one", "a.example.com", "web")
    bad["spec"]["rules"][0]["filters"][0]["requestHeaderModifier"]["set"][0]["name"] = "X Env"
    code, out = run(tmp_path, haproxy_path, "2.8", bad)
    assert code == 1 and json.loads(out)["prediction"] is None


def test_files_checked_without_a_state_get_no_prediction(tmp_path: Path, haproxy_path: str) -> None:
    given = tmp_path / "inputs.yaml"
    given.write_text(yaml.safe_dump_all([gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra"),
                                         route("one", "a.example.com", "web")]))
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["check", "--haproxy", haproxy_path, "-f", str(given), "-o", "json"]) == 0
    assert json.loads(out.getvalue())["prediction"] is None
