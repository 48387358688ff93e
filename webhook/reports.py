"""What ``routegate check`` prints: one report, six formats (text, json, yaml, junit, github, sarif).

Names, kinds, messages and file names come from the files under review, which in CI may be an
outsider's pull request: every text format escapes control characters (a newline in a name would
print a forged ``allowed`` line, ESC sequences would reach the terminal), GitHub annotations add the
workflow-command escaping, and XML gets only characters XML can carry. JSON, YAML and SARIF (JSON)
are escaped by their encoders.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from haproxy_check.results import HAProxyBinary
from validators import dataplanes
from validators.findings import Finding, Severity, ordered
from webhook.inputs import Located, Problem
from webhook.verdicts import Decision, Verdict

DOCS = "docs/RULES.md"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# C0, DEL, C1, the line/paragraph separators and the bidirectional overrides (a "Trojan Source" name
# would read differently from what it is).
_UNSAFE = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x200E, 0x200F, *range(0x202A, 0x202F),
           *range(0x2066, 0x206A)]
_ESCAPES: dict[int, str] = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def clean(text: object) -> str:
    """``text`` on one line, every control character written as an escape (``\\n``, ``\\x1b``)."""
    text = str(text)
    # Every character escaped is one that str.isprintable refuses (categories Cc, Cf, Zl, Zp), and the
    # test runs at C speed: a report of 20,000 names spent a quarter of a second translating them.
    return text if text.isprintable() else text.translate(_ESCAPES)


def anchor(code: str) -> str:
    return f"{DOCS}#{code.lower()}"


@dataclass(frozen=True, slots=True)
class Placed:
    """A finding with the position of its field in the input file."""

    finding: Finding
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Judged:
    item: Located
    verdict: Verdict
    line: int  # where the object starts
    column: int
    findings: tuple[Placed, ...] = ()

    @property
    def name(self) -> str:
        ref = self.verdict.ref
        return f"{ref.kind} {ref.namespace + '/' if ref.namespace else ''}{ref.name}"


@dataclass(slots=True)
class Report:
    results: list[Judged] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # input errors: the run exits 2
    warnings: list[str] = field(default_factory=list)  # about the inputs (skipped symlinks, ...)
    haproxy: HAProxyBinary | None = None
    traffic: bool = False  # text: every verdict's traffic plan (``check --traffic``), not only other owners'
    version: str = ""

    def counts(self) -> dict[str, int]:
        verdicts = [j.verdict for j in self.results]
        return {
            "objects": len(verdicts),
            "allowed": sum(v.decision is Decision.ALLOW for v in verdicts),
            "denied": sum(v.decision is Decision.DENY for v in verdicts),
            "undecided": sum(v.decision is Decision.ERROR for v in verdicts),
            "withWarnings": sum(v.has_warnings for v in verdicts),
            "inputErrors": len(self.problems),
        }

    def summary(self) -> str:
        c = self.counts()
        text = (f"{c['objects']} object{'s' if c['objects'] != 1 else ''}: {c['allowed']} allowed, "
                f"{c['denied']} denied, {c['withWarnings']} with warnings")
        if c["undecided"]:
            text += f", {c['undecided']} could not be decided"
        if c["inputErrors"]:
            text += f"; {c['inputErrors']} input error{'s' if c['inputErrors'] != 1 else ''}"
        return text


def _where(file: str, line: int, column: int) -> str:
    return f"{clean(file)}:{line}:{column}" if line else clean(file)


# ---- text ---------------------------------------------------------------------------------------

_COLOURS = {"allowed": "32", "denied": "31", "error": "31", "warning": "33", "could not decide": "35"}


def text(report: Report, *, colour: bool = False) -> str:
    paint: Callable[[str, str], str] = (lambda word, key: f"\x1b[{_COLOURS[key]}m{word}\x1b[0m") if colour \
        else (lambda word, key: word)
    lines = [f"{_where(p.file, p.line, p.column)}: {paint('error', 'error')}: {clean(p.message)}"
             for p in report.problems]
    lines += [f"{paint('warning', 'warning')}: {clean(w)}" for w in report.warnings]
    repeats = Counter(_warning_key(p.finding) for j in report.results for p in _warned(j))
    repeats.update(("note", "", n) for j in report.results for n in j.verdict.notes)
    shown: set[tuple[str, str, str]] = set()
    for j in report.results:
        v = j.verdict
        head = f"{_where(j.item.file, j.line, j.column)}: {clean(j.name)}: "
        if v.decision is Decision.ALLOW:
            lines.append(head + paint("allowed", "allowed"))
        elif v.decision is Decision.ERROR:
            lines.append(head + paint("could not decide", "could not decide") + f": {clean(v.error)}")
        else:
            lines.append(head + paint("denied", "denied"))
            for p in j.findings:
                if p.finding.severity is Severity.DENY:
                    lines.append(f"    {_where(j.item.file, p.line, p.column)}: {paint('error', 'error')} "
                                 f"{_finding_text(p.finding)} ({anchor(p.finding.code)})")
            for alert in v.alerts:
                lines.extend(f"        {clean(line)}" for line in alert.context)
        plan = traffic_plan(v, always=report.traffic)
        lines.extend(f"    traffic: {clean(line)}" for line in plan)
        for p in _warned(j):
            key = _warning_key(p.finding)
            if key in shown:
                continue
            shown.add(key)
            more = repeats[key] - 1
            also = f" (and {more} more object{'s' if more != 1 else ''})" if more else ""
            lines.append(f"    {_where(j.item.file, p.line, p.column)}: {paint('warning', 'warning')} "
                         f"{_finding_text(p.finding)}{also}")
        for note in v.notes:
            key = ("note", "", note)
            if key in shown or (plan and note.startswith(TRAFFIC_NOTE)):  # the plan above says it all
                continue
            if key in shown:
                continue
            shown.add(key)
            more = repeats[key] - 1
            also = f" (and {more} more object{'s' if more != 1 else ''})" if more else ""
            lines.append(f"    note: {clean(note)}{also}")
    lines.extend(f"note: {clean(n)}" for n in _assumed(report))
    lines.append(report.summary())
    return "\n".join(lines) + "\n"


TRAFFIC_NOTE = "traffic: "  # the admission warning of a traffic diff (webhook.trafficdiffs.warning)


def traffic_plan(v: Verdict, *, always: bool = False) -> list[str]:
    """The verdict's traffic diff as a plan, one line per moved request class (``host path -> old backend
    (owner) => new backend (owner)``): always with ``check --traffic``, else when it moves another
    owner's requests."""
    diff = v.traffic
    if diff is None:
        return ["not computed"] if always and v.decision is Decision.ALLOW else []
    others = diff.affected(v.ref.namespace)
    if not always and not others and diff.complete:
        return []
    lines = [m.line() for m in diff.moves]
    if not diff.complete:
        lines.append(f"incomplete: {diff.reason}")
    elif not lines:
        lines.append("no request changes destination")
    lines.extend(f"not modelled: {u}" for u in diff.unmodelled)
    return lines


def _assumed(report: Report) -> list[str]:
    """Once per run: the data plane version every verdict assumed (no --dataplane-version)."""
    for j in report.results:
        d = j.verdict.dataplane
        if d.get("assumed"):
            return [dataplanes.assumed(tuple(int(p) for p in str(d["checker"]).split(".") if p.isdigit()), None)]
    return []


def _warned(j: Judged) -> list[Placed]:
    return [p for p in j.findings if p.finding.severity is Severity.WARN]


def _warning_key(f: Finding) -> tuple[str, str, str]:
    return f.code, f.field, f.message


def _finding_text(f: Finding) -> str:
    about = f"{clean(f.about)}: " if f.about else ""
    return f"{f.code} {about}{clean(f.field) + ': ' if f.field else ''}{clean(f.message)}"


# ---- json / yaml ----------------------------------------------------------------------------------

def data(report: Report) -> dict[str, Any]:
    return {
        "routegate": report.version,
        "haproxy": {"path": report.haproxy.path, "version": report.haproxy.version} if report.haproxy else None,
        "summary": report.counts(),
        "inputErrors": [{"file": p.file, "line": p.line, "column": p.column, "message": p.message}
                        for p in report.problems],
        "inputWarnings": list(report.warnings),
        "results": [_result(j) for j in report.results],
    }


def _result(j: Judged) -> dict[str, Any]:
    v = j.verdict
    return {
        "file": j.item.file, "line": j.line, "column": j.column,
        "apiVersion": j.item.obj.get("apiVersion"), "kind": v.ref.kind, "namespace": v.ref.namespace,
        "name": v.ref.name, "allowed": v.allowed, "decision": str(v.decision), "message": v.message,
        "warnings": v.warnings,
        "findings": [{**p.finding.as_dict(), "line": p.line, "column": p.column, "about": p.finding.about,
                      "docs": anchor(p.finding.code)} for p in j.findings],
        "status": dict(v.status),
        "dataplane": dict(v.dataplane),
        "traffic": v.traffic.as_dict() if v.traffic is not None else None,
        "timings": {k: round(t, 4) for k, t in v.timings.items()},
    }


def as_json(report: Report) -> str:
    return json.dumps(data(report), indent=2) + "\n"


WITH_STATUS = frozenset({"json", "yaml"})  # the outputs that show each verdict's status (``data``)


def as_yaml(report: Report) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return str(yaml.dump(data(report), Dumper=dumper, sort_keys=False, allow_unicode=False))


# ---- GitHub workflow annotations ------------------------------------------------------------------

def _gh_data(value: object) -> str:
    return clean(value).replace("%", "%25")


def _gh_property(value: object) -> str:
    return _gh_data(value).replace(":", "%3A").replace(",", "%2C")


def github(report: Report) -> str:
    """``::error file=F,line=L,col=C,title=T::message`` lines (GitHub turns them into annotations on
    the pull request's diff), then the summary as a notice."""
    out: list[str] = []

    def annotate(level: str, file: str, line: int, column: int, title: str, message: str) -> None:
        props = [f"file={_gh_property(file)}"]
        if line:
            props += [f"line={line}", f"col={column}"]
        props.append(f"title={_gh_property(title)}")
        out.append(f"::{level} {','.join(props)}::{_gh_data(message)}")

    for problem in report.problems:
        annotate("error", problem.file, problem.line, problem.column, "routegate: input error", problem.message)
    for j in report.results:
        v = j.verdict
        if v.decision is Decision.ERROR:
            annotate("error", j.item.file, j.line, j.column, f"routegate: {j.name}: could not decide", v.error)
        for p in j.findings:
            level = "error" if p.finding.severity is Severity.DENY and not v.allowed else "warning"
            annotate(level, j.item.file, p.line, p.column, f"routegate {p.finding.code}: {j.name}",
                     f"{p.finding.field + ': ' if p.finding.field else ''}{p.finding.message} "
                     f"({anchor(p.finding.code)})")
    out.append(f"::notice title=routegate::{_gh_data(report.summary())}")
    return "\n".join(out) + "\n"


# ---- JUnit XML --------------------------------------------------------------------------------------

def _xml_text(value: object) -> str:
    """XML 1.0 cannot carry most control characters even as references: write them as escapes."""
    return clean(value)


def junit(report: Report) -> str:
    """One ``<testsuite>``, one ``<testcase>`` per object (``<failure>`` when denied, ``<error>`` when
    it could not be decided) and one per input error: the shape GitLab, Jenkins and GitHub reporters read."""
    import xml.etree.ElementTree as ET

    counts = report.counts()
    total_time = sum(sum(j.verdict.timings.values()) for j in report.results)
    suites = ET.Element("testsuites", name="routegate")
    suite = ET.SubElement(suites, "testsuite", name="routegate check",
                          tests=str(counts["objects"] + counts["inputErrors"]),
                          failures=str(counts["denied"]), errors=str(counts["undecided"] + counts["inputErrors"]),
                          skipped="0", time=f"{total_time:.3f}")
    for problem in report.problems:
        case = ET.SubElement(suite, "testcase", classname=_xml_text(problem.file), name="input",
                             file=_xml_text(problem.file), line=str(problem.line))
        ET.SubElement(case, "error", message=_xml_text(problem.message),
                      type="InputError").text = _xml_text(str(problem))
    for j in report.results:
        v = j.verdict
        case = ET.SubElement(suite, "testcase", classname=_xml_text(j.item.file), name=_xml_text(j.name),
                             file=_xml_text(j.item.file), line=str(j.line),
                             time=f"{sum(v.timings.values()):.3f}")
        denials = [p for p in j.findings if p.finding.severity is Severity.DENY]
        if v.decision is Decision.DENY:
            body = "\n".join(f"{_where(j.item.file, p.line, p.column)}: {_finding_text(p.finding)} "
                             f"({anchor(p.finding.code)})" for p in denials)
            ET.SubElement(case, "failure", message=_xml_text(v.message), type="Denied").text = body
        elif v.decision is Decision.ERROR:
            ET.SubElement(case, "error", message=_xml_text(v.error), type="CouldNotDecide").text = _xml_text(v.error)
        if v.warnings:
            ET.SubElement(case, "system-out").text = "\n".join(f"warning: {_xml_text(w)}" for w in v.warnings)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ---- SARIF 2.1.0 --------------------------------------------------------------------------------------

def sarif(report: Report, rule_infos: Iterable[Any] = ()) -> str:
    """A SARIF 2.1.0 log: one run, the rules that fired in ``tool.driver.rules``, one result per
    finding (and per input error) with its file, line and column."""
    infos = {i.code: i for i in rule_infos}
    used = sorted({p.finding.code for j in report.results for p in j.findings})
    rules = [_sarif_rule(code, infos.get(code)) for code in used]
    index = {code: i for i, code in enumerate(used)}
    results: list[dict[str, Any]] = []
    for j in report.results:
        for p in j.findings:
            f = p.finding
            denied = f.severity is Severity.DENY and not j.verdict.allowed
            results.append({
                "ruleId": f.code, "ruleIndex": index[f.code], "level": "error" if denied else "warning",
                "message": {"text": f"{j.name}: {f.field + ': ' if f.field else ''}{f.message}"},
                "locations": [_sarif_location(j.item.file, p.line, p.column, f"{j.name}/{f.field}".rstrip("/"))],
            })
        if j.verdict.decision is Decision.ERROR:
            results.append({"ruleId": "RG0000", "level": "error", "kind": "fail",
                            "message": {"text": f"{j.name}: routegate could not decide: {j.verdict.error}"},
                            "locations": [_sarif_location(j.item.file, j.line, j.column, j.name)]})
    notifications = [{"level": "error", "message": {"text": p.message},
                      "locations": [_sarif_location(p.file, p.line, p.column, "")]} for p in report.problems]
    notifications += [{"level": "warning", "message": {"text": w}} for w in report.warnings]
    run = {
        "tool": {"driver": {"name": "routegate", "version": report.version or "0", "rules": rules}},
        "invocations": [{"executionSuccessful": not report.problems,
                         "toolExecutionNotifications": notifications}],
        "results": results,
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"


def _sarif_rule(code: str, info: Any) -> dict[str, Any]:
    summary = getattr(info, "summary", "") or code
    rule: dict[str, Any] = {"id": code, "shortDescription": {"text": summary},
                            "help": {"text": f"routegate explain {code}; {anchor(code)}"}}
    if getattr(info, "name", ""):
        rule["name"] = info.name
    severity = getattr(info, "default_severity", None)
    if severity is not None:
        rule["defaultConfiguration"] = {"level": "error" if severity is Severity.DENY else "warning"}
    return rule


def _sarif_location(file: str, line: int, column: int, logical: str) -> dict[str, Any]:
    from urllib.parse import quote

    physical: dict[str, Any] = {"artifactLocation": {"uri": quote(file)}}
    if line:
        physical["region"] = {"startLine": line, "startColumn": max(column, 1)}
    location: dict[str, Any] = {"physicalLocation": physical}
    if logical:
        location["logicalLocations"] = [{"fullyQualifiedName": logical}]
    return location


def render(report: Report, output: str, *, colour: bool = False, rule_infos: Iterable[Any] = ()) -> str:
    if output == "json":
        return as_json(report)
    if output == "yaml":
        return as_yaml(report)
    if output == "github":
        return github(report)
    if output == "junit":
        return junit(report)
    if output == "sarif":
        return sarif(report, rule_infos)
    return text(report, colour=colour)


def placed(findings: Iterable[Finding], where: Callable[[tuple[Any, ...]], tuple[int, int]]) -> tuple[Placed, ...]:
    """Each finding at its field; one about another object (``about``) at the object's own start."""
    return tuple(Placed(f, *where(f.path if f.subject else ())) for f in ordered(findings))
