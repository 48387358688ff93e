"""No report format crashes or loses output on any string a YAML or JSON input can carry (issue 27 §6):
one character of every Unicode general category, lone surrogates (JSON's "\\ud800"), controls, bidi
overrides, in names, messages, fields, notes and file names; written by every writer in process, and
by the CLI whose output encoding is ASCII or the C locale's: a real process for the text report, the
other formats by the CLI's ``main`` in process, writing to a stdout of the encoding and error handler a
process started with that environment has (asked of one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from haproxy_check.results import Alert
from tests.conftest import REPO
from tests.webhook.clirun import env, in_process
from tests.webhook.conftest import INPUTS, STATE_DIR
from validators.findings import Finding, Severity
from validators.objects import Ref
from webhook.cli import reports
from webhook.gate.verdicts import Decision, Verdict
from webhook.loading.inputs import Located, Problem


def _one_of_each_category() -> str:
    """The first code point of each of Unicode's 30 general categories (Cs: a lone surrogate)."""
    first: dict[str, str] = {}
    for code in range(sys.maxunicode + 1):
        first.setdefault(unicodedata.category(chr(code)), chr(code))
    assert len(first) == 30, sorted(first)
    return "".join(first.values())


EVERY = _one_of_each_category() + "\udcff\ud800-\x1b[2J\n\r\t\x85\u2028\u202e\u200d\ufeff\ufffe\U0001f600é\U000e0001"
TEXT_FORMATS = ("text", "github", "junit")


def _report() -> reports.Report:
    name = f"n{EVERY}"
    ref = Ref(f"Kind{EVERY}", f"ns{EVERY}", name)
    deny = Finding("RG0101", f"message {EVERY}", ("spec", f"field{EVERY}", 0), Severity.DENY)
    warn = Finding("RG0501", f"warned {EVERY}", ("spec", "x"), Severity.WARN, subject=False, about=f"Other {EVERY}")
    alert = Alert(f"alert {EVERY}", context=(f"ctx {EVERY}",))
    denied = Verdict(Decision.DENY, ref, findings=(deny, warn), alerts=(alert,), notes=(f"note {EVERY}",))
    undecided = Verdict(Decision.ERROR, ref, error=f"error {EVERY}")
    allowed = Verdict(Decision.ALLOW, ref, findings=(warn,), notes=(f"note2 {EVERY}",),
                      status={"parents": [{"message": EVERY}]})
    item = Located({"apiVersion": f"v{EVERY}", "kind": ref.kind, "metadata": {"name": name}}, f"file{EVERY}.yaml", 3)

    def judged(v: Verdict) -> reports.Judged:
        return reports.Judged(item, v, 3, 1, reports.placed(v.findings, lambda path: (4, 2)))

    return reports.Report(results=[judged(denied), judged(undecided), judged(allowed)],
                          problems=[Problem(f"bad{EVERY}.json", 2, 1, f"invalid {EVERY}")],
                          warnings=[f"skipped {EVERY}"], version=f"1{EVERY}")


def _outputs(report: reports.Report) -> dict[str, str]:
    out = {name: reports.render(report, name, detail=reports.Detail.EVERYTHING)
           for name in ("text", "json", "yaml", "junit", "github", "sarif")}
    out["github-summary"] = reports.github_summary(report, reports.Detail.EVERYTHING)
    return out


def test_every_writer_carries_every_category_in_any_encoding() -> None:
    for name, out in _outputs(_report()).items():
        assert reports.encodable(out, "utf-8") == out, name  # what the writers write is UTF-8 already
        for encoding in ("ascii", "latin-1", "cp1252"):
            written = reports.encodable(out, encoding)
            written.encode(encoding)  # encodes: the report cannot fail on its way out
            assert written.splitlines()[-1] == reports.encodable(out.splitlines()[-1], encoding), name


def test_text_formats_escape_what_a_reader_would_misread_and_lose_nothing() -> None:
    outputs = _outputs(_report())
    for name in (*TEXT_FORMATS, "github-summary"):
        out = outputs[name]
        unprintable = {c for line in out.splitlines() for c in line if not c.isprintable()}
        assert not unprintable, (name, unprintable)
        for char in EVERY:  # each character is there, as itself or as its escape
            if char.isprintable():
                assert char in out or (name == "junit" and f"&#{ord(char)};" in out), (name, hex(ord(char)))
            else:
                assert reports.clean(char) in out, (name, hex(ord(char)))
    text = outputs["text"]
    assert "\\x1b[2J" in text and "\\ud800" in text and "\\u202e" in text and "\\n" in text
    ET.fromstring(outputs["junit"].split("\n", 1)[1])  # well-formed XML 1.0
    assert outputs["junit"].isascii()


def test_json_yaml_and_sarif_keep_every_string_exactly() -> None:
    report = _report()
    expected = reports.data(report)
    outputs = _outputs(report)
    assert outputs["json"].isascii() and outputs["yaml"].isascii() and outputs["sarif"].isascii()
    assert json.loads(outputs["json"]) == expected
    assert yaml.safe_load(outputs["yaml"]) == expected
    sarif = json.loads(outputs["sarif"])
    assert any(EVERY in r["message"]["text"] for r in sarif["runs"][0]["results"])


@pytest.mark.parametrize("environment", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "LANG": "C"},
                                         {"PYTHONIOENCODING": "latin-1"}], ids=["ascii", "C-locale", "latin-1"])
def test_the_cli_writes_every_format_whatever_the_output_encoding(tmp_path: Path, environment: dict[str, str],
                                                                   haproxy_path: str) -> None:
    """A JSON input carrying a lone surrogate and every category, in a file whose name is not UTF-8."""
    route = yaml.safe_load((INPUTS / "good.yaml").read_text())
    route["metadata"]["name"] = f"shop{EVERY}"
    route["metadata"]["annotations"] = {"note": EVERY}
    route["spec"]["rules"][0]["matches"][0]["headers"][0]["value"] = EVERY
    folder = tmp_path / "in"
    folder.mkdir()
    # json.dumps writes the lone surrogates as \ud800 escapes, as any JSON a user sends may
    (folder / "route.json").write_text(json.dumps(route))
    Path(os.fsdecode(bytes(folder) + b"/caf\xe9.json")).write_text(json.dumps({**route, "metadata": {"name": "other"}}))
    # what Python makes of this environment's stdout: its encoding and error handler (LC_ALL=C: UTF-8 mode)
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.stdout.encoding, sys.stdout.errors)"],
                           capture_output=True, text=True, env=env(**environment), cwd=REPO, timeout=60, check=True)
    encoding, errors = probe.stdout.split()
    assert encoding != "utf-8" or errors == "surrogateescape", probe.stdout  # not the pipe of a UTF-8 locale
    args = ("check", "--state", str(STATE_DIR), "-f", str(folder), "-v")
    for output in ("text", "json", "yaml", "junit", "github", "sarif"):
        if output == "text":  # the real process: the environment sets its stdout up
            result = subprocess.run([sys.executable, "-m", "webhook", *args, "-o", output], capture_output=True,
                                    text=True, errors="backslashreplace", env=env(**environment), cwd=REPO,
                                    timeout=120)
        else:
            result = in_process(*args, "-o", output, encoding=encoding, errors=errors, **environment)
        assert "Traceback" not in result.stderr and result.returncode == 1, (output, result.stderr)
        out = result.stdout
        assert out.isascii() or environment.get("PYTHONIOENCODING") != "ascii", output
        if output == "text":
            assert out.splitlines()[-1].startswith("2 objects: ") and "shop" in out and "\\ud800" in out
            assert "caf\\udce9.json" in out  # the file name's byte that is not UTF-8, escaped
        elif output == "github":
            assert out.splitlines()[-1].startswith("::notice title=routegate::2 objects: ")
        elif output == "junit":
            assert len(ET.fromstring(out.split("\n", 1)[1]).findall(".//testcase")) == 2
        else:
            document = yaml.safe_load(out) if output == "yaml" else json.loads(out)
            if output != "sarif":
                assert {r["name"] for r in document["results"]} == {f"shop{EVERY}", "other"}
