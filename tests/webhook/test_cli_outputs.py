"""Output formats, the summary, colour, explanations, --version and a light start, through the real
console script."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import yaml

from tests.conftest import REPO
from tests.webhook.clirun import env, routegate
from tests.webhook.conftest import INPUTS, STATE_DIR
from validators import rules
from webhook import explaining

BOTH = ["--state", str(STATE_DIR), "-f", str(INPUTS / "bad-regex.yaml"), "-f", str(INPUTS / "good.yaml")]

# The SARIF 2.1.0 schema is not available offline here: this is the part of it that viewers rely on
# (required properties and types of the objects routegate writes, from the OASIS specification).
SARIF_SUBSET = {
    "type": "object", "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"}, "$schema": {"type": "string"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "version": {"type": "string"},
                        "rules": {"type": "array", "items": {
                            "type": "object", "required": ["id"], "properties": {
                                "id": {"type": "string"}, "help": {"type": "object", "required": ["text"]},
                                "shortDescription": {"type": "object", "required": ["text"]},
                                "defaultConfiguration": {"type": "object", "properties": {
                                    "level": {"enum": ["none", "note", "warning", "error"]}}}}}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"], "properties": {
                        "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": 0},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": {"type": "object", "required": ["text"]},
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {"type": "object", "required": ["artifactLocation"], "properties": {
                                "artifactLocation": {"type": "object", "required": ["uri"]},
                                "region": {"type": "object", "properties": {
                                    "startLine": {"type": "integer", "minimum": 1},
                                    "startColumn": {"type": "integer", "minimum": 1}}}}}}}}}}},
                "invocations": {"type": "array", "items": {
                    "type": "object", "required": ["executionSuccessful"]}}}}}},
}


def test_sarif_is_valid_and_points_at_fields(haproxy_path: str) -> None:
    result = routegate("check", *BOTH, "-o", "sarif")
    assert result.returncode == 1
    log = json.loads(result.stdout)
    jsonschema.validate(log, SARIF_SUBSET)
    run = log["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for res in run["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
    errors = [r for r in run["results"] if r["level"] == "error"]
    assert any(r["locations"][0]["physicalLocation"]["region"]["startLine"] > 2 for r in errors)


def test_junit_has_one_case_per_object_and_a_failure_per_denial(haproxy_path: str) -> None:
    result = routegate("check", *BOTH, "-o", "junit")
    assert result.returncode == 1
    suite = ET.fromstring(result.stdout.split("\n", 1)[1]).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert int(suite.get("tests", "0")) == len(cases) == 2 and suite.get("failures") == "1"
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["HTTPRoute capture/broken"]


def test_github_annotations_carry_file_line_and_column(haproxy_path: str) -> None:
    result = routegate("check", *BOTH, "-o", "github")
    assert result.returncode == 1
    pattern = re.compile(r"^::(error|warning|notice) (file=[^,]+,line=\d+,col=\d+,)?title=[^:]*::.+$")
    lines = result.stdout.splitlines()
    assert all(pattern.match(line) for line in lines), lines
    assert any(line.startswith(f"::error file={INPUTS / 'bad-regex.yaml'},line=") for line in lines)
    assert lines[-1].startswith("::notice title=routegate::2 objects: 1 allowed, 1 denied")


def test_yaml_output_is_the_json_report(haproxy_path: str) -> None:
    as_yaml = yaml.safe_load(routegate("check", *BOTH, "-o", "yaml").stdout)
    as_json = json.loads(routegate("check", *BOTH, "-o", "json").stdout)
    for report in (as_yaml, as_json):
        for r in report["results"]:
            r.pop("timings")
    assert as_yaml == as_json and as_json["summary"]["denied"] == 1


def test_a_repeated_warning_is_printed_once_with_a_count(tmp_path: Path, haproxy_path: str) -> None:
    route = yaml.safe_load((INPUTS / "good.yaml").read_text())
    docs = []
    for i in range(5):
        r = json.loads(json.dumps(route))
        r["metadata"]["name"] = f"r{i}"
        r["spec"]["hostnames"] = [f"r{i}.example.com"]
        r["spec"]["parentRefs"] = [{"name": "missing"}]
        docs.append(r)
    (tmp_path / "routes.yaml").write_text(yaml.safe_dump_all(docs))
    result = routegate("check", "--state", str(STATE_DIR), "-f", str(tmp_path / "routes.yaml"))
    warnings = [line for line in result.stdout.splitlines() if "RG0504" in line]
    assert len(warnings) == 1 and warnings[0].endswith("(and 4 more objects)"), result.stdout


def test_colour_only_on_a_terminal_and_never_with_no_color(haproxy_path: str) -> None:
    def on_a_tty(**extra: str) -> str:
        leader, follower = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "webhook", "check", *BOTH], stdout=follower,
                                stderr=subprocess.DEVNULL, env=env(**extra), cwd=REPO)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=120)
        os.close(leader)
        return b"".join(chunks).decode()

    assert "\x1b[31mdenied\x1b[0m" in on_a_tty()
    assert "\x1b[" not in on_a_tty(NO_COLOR="1")
    assert "\x1b[" not in routegate("check", *BOTH).stdout  # a pipe


def test_explain_says_why_how_it_fails_and_the_fix() -> None:
    for command in (["explain", "RG0101"], ["rules", "rg0101"]):
        result = routegate(*command)
        assert result.returncode == 0, result.stderr
        for part in ("What it checks:", "Why:", "Fails:", "Fix:", "docs/RULES.md#rg0101"):
            assert part in result.stdout
    assert routegate("explain", "RG9999").returncode == 2


def test_every_rule_is_explained_in_the_table_and_the_docs() -> None:
    result = routegate("rules", "-o", "json")
    entries = json.loads(result.stdout)
    assert [e["code"] for e in entries] == [i.code for i in rules.table()]
    missing = [e["code"] for e in entries if not (e["why"] and e["example"] and e["fix"])]
    assert not missing, f"codes without an explanation: {missing}"
    docs = (REPO / "docs" / "RULES.md").read_text()
    assert explaining.markdown_section() in docs, "docs/RULES.md: regenerate the explanations section"


def test_version_and_a_light_start() -> None:
    result = routegate("--version")
    assert result.returncode == 0 and re.fullmatch(r"routegate \d+\.\d+\.\d+\S*\n", result.stdout)
    # --help and --version import only the standard library: heavy modules load when a command runs
    for args in (["--help"], ["--version"], ["check", "--help"]):
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "webhook", *args], capture_output=True,
                             text=True, env=env(), cwd=REPO, timeout=60)
        imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
        heavy = imported & {"yaml", "jinja2", "aiohttp", "cryptography", "structlog", "jsonschema",
                            "haproxy_check", "validators", "kubernetes_asyncio"}
        assert not heavy, (args, heavy)


def test_kubectl_plugin_entry_point() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'kubectl-routegate = "webhook.cli:run_kubectl_plugin"' in pyproject
    out = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['kubectl-routegate', '--help']; "
                          "from webhook.cli import run_kubectl_plugin; run_kubectl_plugin()"],
                         capture_output=True, text=True, env=env(), cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: kubectl routegate")


def test_progress_goes_to_stderr_on_a_terminal_only(haproxy_path: str) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "check", *BOTH], stdout=subprocess.PIPE,
                            stderr=follower, env=env(), cwd=REPO, text=True)
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert b"routegate: judging 2 objects..." in seen
    assert "judging" not in out
    assert "judging" not in routegate("check", *BOTH).stderr  # not a terminal: no progress
