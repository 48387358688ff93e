"""``routegate check --each``: every file its own apply set, judged against the state alone, as separate
``kubectl apply`` runs would be; proven on the Gateway API project's own examples (vendored, see
tests/data/gateway-api-examples/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.webhook.clirun import in_process
from tests.webhook.conftest import INPUTS

pytestmark = pytest.mark.haproxy

EXAMPLES = REPO / "tests" / "data" / "gateway-api-examples"
# Files that need a verdict other than "allowed" would be listed here with the reason (an example that
# HAProxy cannot honour, or that refers to something no example defines). None does at the vendored commit.
NOT_ALLOWED: dict[str, str] = {}


def _documents(path: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def test_the_gateway_api_examples_pass_each_on_its_own(haproxy_path: str) -> None:
    files = sorted(EXAMPLES.rglob("*.yaml"))
    assert len(files) == 89
    result = in_process("check", "--each", "-f", str(EXAMPLES), "-o", "json", timeout=600)
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert report["inputErrors"] == [], report["inputErrors"]
    judged = {r["file"] for r in report["results"]}
    assert judged == {str(f) for f in files if _documents(f)}
    assert report["summary"]["objects"] == sum(len(_documents(f)) for f in files)
    refused = {str(Path(r["file"]).relative_to(EXAMPLES)): r["message"] for r in report["results"] if not r["allowed"]}
    assert refused.keys() == NOT_ALLOWED.keys(), refused
    assert result.returncode == (1 if NOT_ALLOWED else 0)


def test_one_apply_set_of_the_examples_points_to_each(haproxy_path: str) -> None:
    result = in_process("check", "-f", str(EXAMPLES), timeout=600)
    assert result.returncode == 2, result.stdout
    twice = [line for line in result.stdout.splitlines() if "the same object twice" in line]
    assert len(twice) >= 27
    assert all(line.endswith("; if these files are independent scenarios, use --each") for line in twice), twice


def _route(name: str, parent: str) -> dict[str, Any]:
    route: dict[str, Any] = yaml.safe_load((INPUTS / "good.yaml").read_text())
    route["metadata"]["name"] = name
    route["spec"]["parentRefs"] = [{"name": parent}]
    return route


def _gateway(name: str) -> dict[str, object]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": "capture"},
            "spec": {"gatewayClassName": "haproxy",
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}


def test_each_file_is_judged_against_the_state_alone(tmp_path: Path, haproxy_path: str) -> None:
    """A route whose Gateway is in another file attaches to it in one apply set, and finds no parent
    with --each (the other file is not applied in its scenario); a file's own Gateway still counts."""
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([_gateway("solo"), _route("with-its-gateway", "solo")]))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(_route("elsewhere", "solo")))

    def missing_parent(*flags: str) -> dict[str, bool]:
        result = in_process("check", "-f", str(tmp_path), "-o", "json", *flags)
        assert result.returncode == 0, result.stdout + result.stderr
        return {r["name"]: any(f["code"] == "RG0504" for f in r["findings"])
                for r in json.loads(result.stdout)["results"] if r["kind"] == "HTTPRoute"}

    assert missing_parent() == {"with-its-gateway": False, "elsewhere": False}
    assert missing_parent("--each") == {"with-its-gateway": False, "elsewhere": True}


def test_with_each_the_same_object_twice_in_one_file_is_still_an_error(tmp_path: Path, haproxy_path: str) -> None:
    route = _route("twice", "solo")
    (tmp_path / "one.yaml").write_text(yaml.safe_dump_all([route, route]))
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(route))
    result = in_process("check", "--each", "-f", str(tmp_path))
    assert result.returncode == 2, result.stdout
    [twice] = [line for line in result.stdout.splitlines() if "the same object twice" in line]
    assert twice.startswith(f"{tmp_path / 'one.yaml'}:") and "use --each" not in twice


def test_the_vendored_copy_names_its_commit_and_license() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert "Apache License 2.0" in readme and "4564255ac2c35d582249b3cdf261bdf51c8bca32" in readme
    assert {p.suffix for p in EXAMPLES.rglob("*") if p.is_file()} == {".yaml", ".md"}
