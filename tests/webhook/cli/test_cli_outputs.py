"""Output formats, the summary, colour, explanations, --version and a light start, through the CLI's
``main`` in process (what a command prints) and the real console script (what is about the process: a
terminal, the entry points, what the interpreter imports at start)."""

from __future__ import annotations

import asyncio
import functools
import io
import itertools
import json
import os
import pty
import re
import select
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import REPO
from tests.webhook.clirun import env, in_process, routegate
from tests.webhook.conftest import INPUTS, STATE_DIR
from validators import rules
from webhook.cli import explaining, flags, progress, reports
from webhook.gate.verdicts import Decision, Verdict
from webhook.loading.inputs import Located

BOTH = ["--state", str(STATE_DIR), "-f", str(INPUTS / "bad-regex.yaml"), "-f", str(INPUTS / "good.yaml")]


@functools.cache
def both(*extra: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``routegate check BOTH EXTRA`` in process, run once per argv and environment for the whole module:
    the report-format tests read the same run's output (nothing here writes outside stdout)."""
    return in_process("check", *BOTH, *extra, **environment)

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
    result = both("-o", "sarif")
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
    result = both("-o", "junit")
    assert result.returncode == 1
    suite = ET.fromstring(result.stdout.split("\n", 1)[1]).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert int(suite.get("tests", "0")) == len(cases) == 2 and suite.get("failures") == "1"
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["HTTPRoute capture/broken"]


def test_github_annotations_carry_file_line_and_column(haproxy_path: str) -> None:
    result = both("-o", "github")
    assert result.returncode == 1
    pattern = re.compile(r"^::(error|warning|notice) (file=[^,]+,line=\d+,col=\d+,)?title=[^:]*::.+$")
    lines = result.stdout.splitlines()
    assert all(pattern.match(line) for line in lines), lines
    assert any(line.startswith(f"::error file={INPUTS / 'bad-regex.yaml'},line=") for line in lines)
    assert lines[-1].startswith("::notice title=routegate::2 objects: 1 allowed, 1 denied")


def test_yaml_output_is_the_json_report(haproxy_path: str) -> None:
    as_yaml = yaml.safe_load(both("-o", "yaml").stdout)
    as_json = json.loads(both("-o", "json").stdout)
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
    result = in_process("check", "--state", str(STATE_DIR), "-f", str(tmp_path / "routes.yaml"))
    warnings = [line for line in result.stdout.splitlines() if "RG0504" in line]
    assert len(warnings) == 1 and warnings[0].endswith("(and 4 more objects)"), result.stdout


def _on_terminals(*, stderr_on_a_terminal: bool, **extra: str) -> tuple[str, str]:
    """``routegate check BOTH`` as a process whose stdout is a terminal (a pty), and its stderr another
    one or nothing: what each terminal showed."""
    ptys = [pty.openpty() for _ in range(2 if stderr_on_a_terminal else 1)]
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "check", *BOTH], stdout=ptys[0][1],
                            stderr=ptys[1][1] if stderr_on_a_terminal else subprocess.DEVNULL,
                            env=env(**extra), cwd=REPO)
    for _, follower in ptys:
        os.close(follower)
    seen = {leader: b"" for leader, _ in ptys}
    open_ = set(seen)
    while open_:  # both read as they come: a full terminal would stop the process
        for leader in select.select(list(open_), [], [], 120)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed its side
                chunk = b""
            if chunk:
                seen[leader] += chunk
            else:
                open_.discard(leader)
                os.close(leader)
    proc.wait(timeout=120)
    shown = [seen[leader].decode() for leader, _ in ptys]
    return shown[0], shown[1] if stderr_on_a_terminal else ""


@functools.cache
def on_two_terminals() -> tuple[str, str]:
    """One process with stdout and stderr each on a terminal, shared by the colour and progress tests."""
    return _on_terminals(stderr_on_a_terminal=True)


def test_colour_only_on_a_terminal_and_never_with_no_color(haproxy_path: str) -> None:
    assert "\x1b[31mdenied\x1b[0m" in on_two_terminals()[0]
    assert "\x1b[" not in _on_terminals(stderr_on_a_terminal=False, NO_COLOR="1")[0]
    assert "\x1b[" not in both().stdout  # a pipe


def test_explain_says_why_how_it_fails_and_the_fix() -> None:
    for command in (["explain", "RG0101"], ["rules", "rg0101"]):
        result = in_process(*command)
        assert result.returncode == 0, result.stderr
        for part in ("What it checks:", "Why:", "Fails:", "Fix:", "/docs/RULES.md#rg0101"):
            assert part in result.stdout
    assert in_process("explain", "RG9999").returncode == 2


def test_every_rule_is_explained_in_the_table_and_the_docs() -> None:
    result = in_process("rules", "-o", "json")
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
    assert 'kubectl-routegate = "webhook.cli.routegate:run_kubectl_plugin"' in pyproject
    out = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['kubectl-routegate', '--help']; "
                          "from webhook.cli.routegate import run_kubectl_plugin; run_kubectl_plugin()"],
                         capture_output=True, text=True, env=env(), cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: kubectl routegate")


def test_progress_goes_to_stderr_on_a_terminal_only(haproxy_path: str) -> None:
    out, seen = on_two_terminals()
    assert "routegate: judging 2 objects: 0 judged, 0 denied... 0s" in seen
    assert "judging" not in out  # stdout, a terminal too, has the report only
    assert "judging" not in both().stderr  # not a terminal: no progress


# ---- quiet by default, complete on demand (issue 27 §5) ----------------------------------------------

def _many(directory: Path, *, valid: int, denied: int, warned: int, services: int) -> Path:
    """Routes that attach to the state's Gateway (``valid``), copies of a route a rule denies (``denied``),
    routes whose parent is missing (``warned``: one warning, the same on each) and Services (a note
    each: routegate does not check them)."""
    good = yaml.safe_load((INPUTS / "good.yaml").read_text())
    broken = yaml.safe_load((INPUTS / "bad-session.yaml").read_text())
    items: list[dict[str, object]] = []
    for i in range(valid + warned):
        route = json.loads(json.dumps(good))
        route["metadata"]["name"] = f"r{i}"
        route["spec"]["hostnames"] = [f"r{i}.example.com"]
        if i >= valid:
            route["spec"]["parentRefs"] = [{"name": "missing"}]
        items.append(route)
    for i in range(denied):
        route = json.loads(json.dumps(broken))
        route["metadata"]["name"] = f"broken{i}"
        route["spec"]["hostnames"] = [f"broken{i}.example.com"]
        items.append(route)
    items += [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "capture"},
               "spec": {"ports": [{"port": 80}]}} for i in range(services)]
    path = directory / "objects.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_3000_objects_print_only_failures_warnings_and_one_summary_line(tmp_path: Path, haproxy_path: str) -> None:
    inputs = _many(tmp_path, valid=2494, denied=2, warned=4, services=500)
    args = ("check", "--state", str(STATE_DIR), "-f", str(inputs))
    report = json.loads(in_process(*args, "-o", "json").stdout)
    assert report["summary"]["objects"] == 3000
    denied = [r for r in report["results"] if not r["allowed"]]
    warned = [r for r in report["results"] if any(f["severity"] == "warn" for f in r["findings"])]
    noted = [r for r in report["results"] if r["notes"]]
    assert len(denied) == 2 and len(warned) == 4 and len(noted) >= 500
    shared = {(f["code"], f["path"], f["message"]) for f in warned[0]["findings"] if f["severity"] == "warn"}

    result = in_process(*args)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    heads = [n for n, line in enumerate(lines) if not line.startswith(" ")]
    # each denied object with its denials (and the haproxy -c lines behind them), the first warned object
    # with the warning (printed once, with a count), the summary line: nothing for the other 2,994
    assert len(heads) == 2 + 1 + 1, [lines[n] for n in heads]
    assert lines[-1] == (f"3000 objects: 2998 allowed, 2 denied, {len(warned)} with warnings, "
                         f"{len(noted)} with notes")
    blocks = {lines[start]: lines[start + 1:end] for start, end in itertools.pairwise(heads)}
    for head, block in blocks.items():
        if head.endswith(": denied"):
            denials = [line for line in block if not line.startswith(" " * 8)]
            assert all(" error RG" in line for line in denials) and denials, block
            assert all(line.startswith(" " * 8) or line in denials for line in block)
        else:  # each of the warnings the 4 warned objects share, once
            assert head.endswith(": allowed") and len(block) == len(shared) == 2, block
            assert all(" warning RG" in line and line.endswith("(and 3 more objects)") for line in block)
    assert sum(head.endswith(": denied") for head in blocks) == 2


def test_verbose_shows_every_object_and_note_and_summary_only_the_summary(haproxy_path: str) -> None:
    default = both().stdout.splitlines()
    verbose = both("-v").stdout.splitlines()
    assert not any(line.endswith(": allowed") for line in default)
    assert sum(line.endswith((": allowed", ": denied")) for line in verbose) == 2
    assert any(line.startswith("note: ") for line in verbose) and not any("note: " in line for line in default)
    assert set(default) < set(verbose) and default[-1] == verbose[-1]
    summary = both("--summary")
    assert summary.returncode == 1 and summary.stdout.splitlines() == [default[-1]]


def test_verbose_and_summary_are_one_choice() -> None:
    result = in_process("check", "-f", str(INPUTS), "-v", "--summary")
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


def test_warnings_and_notes_are_counted_apart() -> None:
    def judged(v: Verdict) -> reports.Judged:
        return reports.Judged(Located({}, "f.yaml", 1), v, 1, 1)

    ref = Located({"kind": "Service", "metadata": {"name": "a"}}, "f", 1).ref
    noted = Verdict(Decision.ALLOW, ref, notes=("routegate does not check Service; allowed unchecked",))
    report = reports.Report(results=[judged(noted), judged(Verdict(Decision.ALLOW, ref))])
    assert report.counts()["withWarnings"] == 0 and report.counts()["withNotes"] == 1
    assert report.summary() == "2 objects: 2 allowed, 0 denied, 0 with warnings, 1 with notes"
    assert reports.text(report) == report.summary() + "\n"  # a note alone is no reason to print the object
    assert "note: routegate does not check Service" in reports.text(report, reports.Detail.EVERYTHING)


@pytest.mark.parametrize(("mode", "environment", "stream_is_tty", "wanted"), [
    ("auto", {}, False, False), ("auto", {}, True, True),
    ("auto", {"NO_COLOR": "1"}, True, False), ("auto", {"FORCE_COLOR": "1"}, False, True),
    ("auto", {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, False), ("auto", {"TERM": "dumb"}, True, False),
    ("always", {"NO_COLOR": "1"}, False, True), ("never", {"FORCE_COLOR": "1"}, True, False),
    ("auto", {"NO_COLOR": ""}, True, True), ("auto", {"FORCE_COLOR": ""}, False, False),
])
def test_colour_follows_the_flag_then_no_color_then_force_color_then_the_terminal(
        monkeypatch: pytest.MonkeyPatch, mode: str, environment: dict[str, str], stream_is_tty: bool,
        wanted: bool) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    stream = io.StringIO()
    stream.isatty = lambda: stream_is_tty  # type: ignore[method-assign]
    assert flags.colour_wanted(stream, mode) is wanted


def test_color_always_and_force_color_colour_a_pipe(haproxy_path: str) -> None:
    assert "\x1b[31mdenied\x1b[0m" in both("--color=always").stdout
    assert "\x1b[31mdenied\x1b[0m" in both(FORCE_COLOR="1").stdout
    assert "\x1b[" not in both("--color", "never", FORCE_COLOR="1").stdout


def test_github_stays_within_a_step_s_annotations_and_summarises_the_rest(tmp_path: Path,
                                                                          haproxy_path: str) -> None:
    inputs = _many(tmp_path, valid=1, denied=12, warned=14, services=0)
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    args = ("check", "--state", str(STATE_DIR), "-f", str(inputs))
    everything = json.loads(in_process(*args, "-o", "json").stdout)
    errors = sum(f["severity"] == "deny" for r in everything["results"] for f in r["findings"])
    warnings = sum(f["severity"] == "warn" for r in everything["results"] for f in r["findings"])
    assert errors > 10 and warnings > 10

    result = in_process(*args, "-o", "github", GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert sum(line.startswith("::error ") for line in lines) == 10
    assert sum(line.startswith("::warning ") for line in lines) == 10
    assert [line for line in lines if line.startswith("::notice ")] == [lines[-1]]
    assert f"; {errors + warnings - 20} findings not annotated" in lines[-1] and "job summary" in lines[-1]
    group = lines[lines.index(next(line for line in lines if line.startswith("::group::"))) + 1:
                  lines.index("::endgroup::")]
    assert len(group) == errors + warnings - 20 and not any(line.startswith("::") for line in group)

    written = summary.read_text()
    assert written.startswith("earlier step\n### routegate check\n")  # appended, as GitHub asks
    assert everything["summary"]["objects"] == 27 and "27 objects: 1" in written
    block = written.split("```text\n", 1)[1]
    assert sum(" error RG" in line for line in block.splitlines()) == errors
    assert sum(": denied" in line for line in block.splitlines()) == 12

    quiet = in_process(*args, "-o", "github", "--summary").stdout.splitlines()
    assert len(quiet) == 1 and quiet[0].startswith("::notice title=routegate::27 objects: ")


def test_the_job_summary_cannot_be_escaped_or_grow_past_github_s_limit() -> None:
    ref = Located({"kind": "HTTPRoute", "metadata": {"name": "a"}}, "f", 1).ref
    name = "```\n<img src=x>"
    item = Located({"kind": "HTTPRoute", "metadata": {"name": name}}, "f.yaml", 1)
    verdict = Verdict(Decision.ERROR, ref, error="x" * 2000 + "````")
    report = reports.Report(results=[reports.Judged(item, verdict, 1, 1)] * 1000)
    markdown = reports.github_summary(report)
    assert len(markdown.encode()) < reports.GITHUB_SUMMARY_BYTES
    fence = markdown.split("\n")[4]
    assert fence == "`````text"  # longer than any run of backticks inside
    assert markdown.rstrip("\n").endswith("\n`````") and "more lines" in markdown


def test_progress_counts_the_verdicts_given_so_far() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    ref = Located({"kind": "HTTPRoute", "metadata": {"name": "a"}}, "f", 1).ref

    async def run() -> str:
        out = Terminal()
        async with progress.shown(3, out, every=0.01) as tally:
            tally.add([Verdict(Decision.ALLOW, ref), Verdict(Decision.DENY, ref)])
            await asyncio.sleep(0.05)
        return out.getvalue()

    seen = asyncio.run(run())
    assert "routegate: judging 3 objects: 2 judged, 1 denied... 0s" in seen and seen.endswith("\r\x1b[K")
    quiet = io.StringIO()

    async def piped() -> None:
        async with progress.shown(3, quiet, every=0.01) as tally:
            tally.add([Verdict(Decision.ALLOW, ref)])
            await asyncio.sleep(0.03)

    asyncio.run(piped())
    assert quiet.getvalue() == ""


def test_finding_links_point_at_the_release_docs_or_a_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed copy has no docs/ beside it: links are URLs, under ROUTEGATE_DOCS_URL when set."""
    from webhook.cli import reports

    assert reports.anchor("RG0101") == "https://github.com/routegate/routegate/blob/v0.1.0/docs/RULES.md#rg0101"
    monkeypatch.setenv("ROUTEGATE_DOCS_URL", "https://docs.internal.example/routegate/RULES.html")
    assert reports.anchor("RG0101") == "https://docs.internal.example/routegate/RULES.html#rg0101"
