"""What ``routegate check`` prints: one report, six formats (text, json, yaml, junit, github, sarif).

Names, kinds, messages and file names come from the files under review, which in CI may be an
outsider's pull request: every text format escapes what it cannot show as itself (a newline in a name
would print a forged ``allowed`` line, ESC sequences would reach the terminal, a lone surrogate from a
JSON input cannot be encoded at all), GitHub annotations add the workflow-command escaping, and XML
gets only characters XML can carry (the rest as escapes, non-ASCII as character references). JSON,
YAML and SARIF (JSON) are escaped by their encoders, in ASCII. :func:`write` then writes whatever the
output stream's encoding cannot carry as a backslash escape, so no string a YAML or JSON input can
carry ends a report early.

The text report (and the GitHub log and job summary, which reuse it) shows as much as ``Detail``
asks: the summary line, failures and warnings (the default), or every object and note (``-v``). It is
built from sections: a new verdict field is shown by one function added to ``OBJECT_SECTIONS``.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import metadata
from typing import Any, TextIO

from haproxy_check.results import HAProxyBinary
from haproxy_check.runtime.predictions import Prediction
from validators import dataplanes
from validators.findings import Finding, Severity, ordered
from webhook.gate.verdicts import Decision, Verdict
from webhook.loading.inputs import Located, Problem

# Where a finding's explanation is read: the rules page of this release (docs/RULES.md, one anchor per
# code), or ROUTEGATE_DOCS_URL for a mirror (an air-gapped cluster, an internal fork). A path relative to
# a checkout would mean nothing to an installed copy; `routegate explain CODE` prints the same text offline.
DOCS_ENV = "ROUTEGATE_DOCS_URL"
RELEASE_DOCS = "https://github.com/routegate/routegate/blob/v{version}/docs/RULES.md"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def clean(text: object) -> str:
    """``text`` on one line, every character ``str.isprintable`` refuses written as an escape (``\\n``,
    ``\\x1b``, ``\\u202e``, ``\\ud800``): Unicode's control, format (bidirectional overrides, zero-width
    characters), surrogate, private-use, unassigned and separator characters other than the space.
    What is printed then reads as what it is, and encodes in UTF-8."""
    text = str(text)
    # The test runs at C speed: a report of 20,000 names spent a quarter of a second escaping them.
    return text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)


def encodable(text: str, encoding: str | None) -> str:
    """``text`` as ``encoding`` can carry it: what it cannot is written as a backslash escape (``é`` is
    ``\\xe9`` on an ASCII stream), instead of an error that would lose the whole report."""
    codec = encoding or "utf-8"
    try:
        text.encode(codec)
        return text
    except UnicodeEncodeError:
        return text.encode(codec, "backslashreplace").decode(codec)
    except LookupError:  # an encoding Python does not know: ASCII is in every one in use
        return text.encode("ascii", "backslashreplace").decode("ascii")


def write(stream: TextIO, text: str) -> None:
    """Write a report to ``stream`` whatever its encoding (``PYTHONIOENCODING=ascii``, ``LC_ALL=C``)."""
    stream.write(encodable(text, getattr(stream, "encoding", None)))


@functools.cache
def _release_docs() -> str:
    try:
        return RELEASE_DOCS.format(version=metadata.version("routegate"))
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return RELEASE_DOCS.format(version="0").replace("/blob/v0/", "/blob/main/")


def docs_base() -> str:
    return os.environ.get(DOCS_ENV, "").strip().rstrip("#") or _release_docs()


def anchor(code: str) -> str:
    return f"{docs_base()}#{code.lower()}"


@dataclass(frozen=True, slots=True)
class Placed:
    """A finding with the position of its field in the input file."""

    finding: Finding
    line: int
    column: int


# Where a field of a judged object is in its file: (line, column) of a field path, () for the object.
Locate = Callable[[tuple[Any, ...]], tuple[int, int]]


class Judged:
    """One input and its verdict, with where it and its findings are in its file.

    Given ``locate`` instead of the positions, they are found on first use: a report prints the objects
    with something to say (the default text report of 10,000 clean routes prints one summary line), and
    finding every object's position in its file was a tenth of such a check."""

    __slots__ = ("_findings", "_locate", "_start", "item", "verdict")

    def __init__(self, item: Located, verdict: Verdict, line: int = 0, column: int = 0,
                 findings: tuple[Placed, ...] = (), *, locate: Locate | None = None) -> None:
        self.item = item
        self.verdict = verdict
        # where the object starts, and its findings placed (None: not found yet, ``locate`` finds them)
        self._start: tuple[int, int] | None = (line, column) if locate is None else None
        self._findings: tuple[Placed, ...] | None = findings if locate is None else None
        self._locate = locate

    def _where(self) -> tuple[int, int]:
        if self._start is None:
            assert self._locate is not None
            self._start = self._locate(())
        return self._start

    @property
    def line(self) -> int:
        return self._where()[0]

    @property
    def column(self) -> int:
        return self._where()[1]

    @property
    def findings(self) -> tuple[Placed, ...]:
        if self._findings is None:
            assert self._locate is not None
            self._findings = placed(self.verdict.findings, self._locate)
        return self._findings

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Judged):
            return NotImplemented
        return (self.item, self.verdict, self.line, self.column, self.findings) == (
            other.item, other.verdict, other.line, other.column, other.findings)

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable while it finds positions

    def __repr__(self) -> str:
        return (f"Judged(item={self.item!r}, verdict={self.verdict!r}, line={self.line}, column={self.column}, "
                f"findings={self.findings!r})")

    @property
    def name(self) -> str:
        ref = self.verdict.ref
        return f"{ref.kind} {ref.namespace + '/' if ref.namespace else ''}{ref.name}"


class Detail(StrEnum):
    """How much the text report (and GitHub's log and job summary) shows; the machine formats (json,
    yaml, junit, sarif) are always complete."""

    SUMMARY = "summary"  # --summary: the summary line only
    PROBLEMS = "problems"  # the default: input errors, failures and warnings, then the summary line
    EVERYTHING = "everything"  # -v: every object, every note


def _warned_verdict(v: Verdict) -> bool:
    return any(f.severity is Severity.WARN for f in v.findings)


@dataclass(slots=True)
class Report:
    results: list[Judged] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # input errors: the run exits 2
    warnings: list[str] = field(default_factory=list)  # about the inputs (skipped symlinks, ...)
    haproxy: HAProxyBinary | None = None
    traffic: bool = False  # text: every verdict's traffic plan (``check --traffic``), not only other owners'
    version: str = ""
    # how a data plane running the given state takes the inputs (haproxy_check.runtime.predictions)
    prediction: Prediction | None = None

    def counts(self) -> dict[str, int]:
        decisions: Counter[Decision] = Counter()
        warned = noted = 0
        for j in self.results:
            v = j.verdict
            decisions[v.decision] += 1
            warned += bool(v.findings) and _warned_verdict(v)
            noted += bool(v.notes)
        return {
            "objects": len(self.results),
            "allowed": decisions[Decision.ALLOW],
            "denied": decisions[Decision.DENY],
            "undecided": decisions[Decision.ERROR],
            # warnings (warn findings) and notes (not attached, not checked, ...) apart: a note is no
            # reason to look at an object, a warning is
            "withWarnings": warned,
            "withNotes": noted,
            "inputErrors": len(self.problems),
        }

    def summary(self) -> str:
        c = self.counts()
        text = (f"{c['objects']} object{'s' if c['objects'] != 1 else ''}: {c['allowed']} allowed, "
                f"{c['denied']} denied, {c['withWarnings']} with warnings, {c['withNotes']} with notes")
        if c["undecided"]:
            text += f", {c['undecided']} could not be decided"
        if c["inputErrors"]:
            text += f"; {c['inputErrors']} input error{'s' if c['inputErrors'] != 1 else ''}"
        return text


def _where(file: str, line: int, column: int) -> str:
    return f"{clean(file)}:{line}:{column}" if line else clean(file)


# ---- text ---------------------------------------------------------------------------------------

_COLOURS = {"allowed": "32", "denied": "31", "error": "31", "warning": "33", "could not decide": "35",
            "note": "36"}

Paint = Callable[[str, str], str]


def _plain(word: str, key: str) -> str:
    return word


def _coloured(word: str, key: str) -> str:
    return f"\x1b[{_COLOURS[key]}m{word}\x1b[0m"


@dataclass(slots=True)
class TextRun:
    """What the sections of one text report share: how much to show, how to paint a word, and which
    repeated warnings and notes were already printed (each is printed once, with a count)."""

    detail: Detail
    paint: Paint
    repeats: Counter[tuple[str, str, str]]
    shown: set[tuple[str, str, str]] = field(default_factory=set)
    traffic: bool = False  # every verdict's traffic plan (``check --traffic``), not only other owners'

    def once(self, key: tuple[str, str, str]) -> str | None:
        """``None`` when ``key`` was printed already, else the ``(and N more objects)`` suffix."""
        if key in self.shown:
            return None
        self.shown.add(key)
        more = self.repeats[key] - 1
        return f" (and {more} more object{'s' if more != 1 else ''})" if more else ""


# A section: the lines one verdict adds under its object's line ([] when it has nothing to show at this
# detail). An object is printed when it was not allowed, at -v, or when one of its sections has lines.
ObjectSection = Callable[[Judged, TextRun], list[str]]


def _denials(j: Judged, run: TextRun) -> list[str]:
    if j.verdict.decision is not Decision.DENY:
        return []
    return [f"    {_where(j.item.file, p.line, p.column)}: {run.paint('error', 'error')} "
            f"{_finding_text(p.finding)} ({anchor(p.finding.code)})"
            for p in j.findings if p.finding.severity is Severity.DENY]


def _alerts(j: Judged, run: TextRun) -> list[str]:
    if j.verdict.decision is not Decision.DENY:
        return []
    return [f"        {clean(line)}" for alert in j.verdict.alerts for line in alert.context]


def _warnings(j: Judged, run: TextRun) -> list[str]:
    lines = []
    for p in _warned(j):
        also = run.once(_warning_key(p.finding))
        if also is not None:
            lines.append(f"    {_where(j.item.file, p.line, p.column)}: {run.paint('warning', 'warning')} "
                         f"{_finding_text(p.finding)}{also}")
    return lines


def _traffic(j: Judged, run: TextRun) -> list[str]:
    return [f"    traffic: {clean(line)}" for line in traffic_plan(j.verdict, always=run.traffic)]


def _notes(j: Judged, run: TextRun) -> list[str]:
    if run.detail is not Detail.EVERYTHING:
        return []
    planned = bool(traffic_plan(j.verdict, always=run.traffic))
    lines = []
    for note in j.verdict.notes:
        if planned and note.startswith(TRAFFIC_NOTE):  # the plan above says it all
            continue
        also = run.once(("note", "", note))
        if also is not None:
            lines.append(f"    {run.paint('note', 'note')}: {clean(note)}{also}")
    return lines


OBJECT_SECTIONS: list[ObjectSection] = [_denials, _alerts, _traffic, _warnings, _notes]


def _quiet(v: Verdict, run: TextRun) -> bool:
    """Whether every section above says nothing of ``v`` below -v: an allow without findings, alerts
    or a traffic plan to show. Asked first, so that 10,000 clean routes cost no section calls (a new
    section that can speak of such a verdict must be reflected here; tests/webhook/cli/test_check_lazy.py
    compares with every section asked)."""
    return v.decision is Decision.ALLOW and not v.findings and not v.alerts \
        and not traffic_plan(v, always=run.traffic)


def _head(j: Judged, run: TextRun) -> str:
    v = j.verdict
    head = f"{_where(j.item.file, j.line, j.column)}: {clean(j.name)}: "
    if v.decision is Decision.ALLOW:
        return head + run.paint("allowed", "allowed")
    if v.decision is Decision.ERROR:
        return head + run.paint("could not decide", "could not decide") + f": {clean(v.error)}"
    return head + run.paint("denied", "denied")


def _object_lines(report: Report, run: TextRun) -> list[str]:
    lines: list[str] = []
    everything = run.detail is Detail.EVERYTHING
    for j in report.results:
        v = j.verdict
        if not everything and _quiet(v, run):
            continue
        body = [line for section in OBJECT_SECTIONS for line in section(j, run)]
        if body or j.verdict.decision is not Decision.ALLOW or run.detail is Detail.EVERYTHING:
            lines.append(_head(j, run))
            lines.extend(body)
    return lines


def text_lines(report: Report, detail: Detail = Detail.PROBLEMS, *, colour: bool = False) -> list[str]:
    """The text report's lines before the summary line (none at ``Detail.SUMMARY``)."""
    if detail is Detail.SUMMARY:
        return []
    paint = _coloured if colour else _plain
    repeats = Counter(_warning_key(p.finding) for j in report.results for p in _warned(j))
    if detail is Detail.EVERYTHING:  # notes are shown (and counted) only at -v (``_notes``)
        repeats.update(("note", "", n) for j in report.results for n in j.verdict.notes)
    run = TextRun(detail, paint, repeats, traffic=report.traffic)
    lines = [f"{_where(p.file, p.line, p.column)}: {paint('error', 'error')}: {clean(p.message)}"
             for p in report.problems]
    lines += [f"{paint('warning', 'warning')}: {clean(w)}" for w in report.warnings]
    lines += _object_lines(report, run)
    if report.prediction is not None and report.prediction.note():
        lines.append(f"prediction: {clean(report.prediction.note())}")
    if detail is Detail.EVERYTHING:
        lines += [f"{paint('note', 'note')}: {clean(n)}" for n in _assumed(report)]
    return lines


def text(report: Report, detail: Detail = Detail.PROBLEMS, *, colour: bool = False) -> str:
    return "\n".join([*text_lines(report, detail, colour=colour), report.summary()]) + "\n"


TRAFFIC_NOTE = "traffic: "  # the admission warning of a traffic diff (webhook.gate.trafficdiffs.warning)


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
    if not _warned_verdict(j.verdict):  # placing its findings in the file would find nothing to print
        return []
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
        "prediction": report.prediction.as_dict() if report.prediction is not None else None,
    }


def _result(j: Judged) -> dict[str, Any]:
    v = j.verdict
    return {
        "file": j.item.file, "line": j.line, "column": j.column,
        "apiVersion": j.item.obj.get("apiVersion"), "kind": v.ref.kind, "namespace": v.ref.namespace,
        "name": v.ref.name, "allowed": v.allowed, "decision": str(v.decision), "message": v.message,
        "warnings": v.warnings, "notes": list(v.notes),
        "findings": [{**p.finding.as_dict(), "line": p.line, "column": p.column, "about": p.finding.about,
                      "docs": anchor(p.finding.code)} for p in j.findings],
        "status": dict(v.status),
        "dataplane": dict(v.dataplane),
        "prediction": v.prediction.as_dict() if v.prediction is not None else None,
        "traffic": v.traffic.as_dict() if v.traffic is not None else None,
        "timings": {k: round(t, 4) for k, t in v.timings.items()},
    }


def as_json(report: Report) -> str:
    # ASCII (the default): a lone surrogate or any other character is a \\u escape, valid on any stream
    return json.dumps(data(report), indent=2) + "\n"


WITH_STATUS = frozenset({"json", "yaml"})  # the outputs that show each verdict's status (``data``)


def as_yaml(report: Report) -> str:
    import yaml

    document = data(report)
    try:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return str(yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=False))
    except UnicodeEncodeError:
        # libyaml takes UTF-8, which has no lone surrogates (a JSON input can carry "\\ud800"); the pure
        # Python emitter writes them as YAML escapes
        return str(yaml.dump(document, Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=False))


# ---- GitHub workflow annotations ------------------------------------------------------------------

# What a step shows (actions/toolkit docs/problem-matchers.md, "Limitations"): 10 error, 10 warning and
# 10 notice annotations per step, 50 per job. Annotations past these are dropped silently, so routegate
# writes at most 10 + 10 + 1 (the summary notice) and puts the rest in the log and the job summary.
GITHUB_ANNOTATIONS_PER_STEP = 10
# A step summary larger than 1 MiB is refused whole ("$GITHUB_STEP_SUMMARY upload aborted"): stay below.
GITHUB_SUMMARY_BYTES = 1_000_000


def _gh_data(value: object) -> str:
    return clean(value).replace("%", "%25")


def _gh_property(value: object) -> str:
    return _gh_data(value).replace(":", "%3A").replace(",", "%2C")


@dataclass(frozen=True, slots=True)
class _Annotation:
    level: str  # error or warning
    file: str
    line: int
    column: int
    title: str
    message: str

    def command(self) -> str:
        props = [f"file={_gh_property(self.file)}"]
        if self.line:
            props += [f"line={self.line}", f"col={self.column}"]
        props.append(f"title={_gh_property(self.title)}")
        return f"::{self.level} {','.join(props)}::{_gh_data(self.message)}"

    def plain(self) -> str:
        return f"{_where(self.file, self.line, self.column)}: {self.level}: {clean(self.title)}: {clean(self.message)}"


def _annotations(report: Report) -> list[_Annotation]:
    out = [_Annotation("error", p.file, p.line, p.column, "routegate: input error", p.message)
           for p in report.problems]
    for j in report.results:
        v = j.verdict
        if v.decision is Decision.ERROR:
            out.append(_Annotation("error", j.item.file, j.line, j.column, f"routegate: {j.name}: could not decide",
                                   v.error))
        for p in j.findings:
            level = "error" if p.finding.severity is Severity.DENY and not v.allowed else "warning"
            out.append(_Annotation(level, j.item.file, p.line, p.column, f"routegate {p.finding.code}: {j.name}",
                                   f"{p.finding.field + ': ' if p.finding.field else ''}{p.finding.message} "
                                   f"({anchor(p.finding.code)})"))
    return out


def github(report: Report, detail: Detail = Detail.PROBLEMS, *, summary_file: bool = False) -> str:
    """``::error file=F,line=L,col=C,title=T::message`` lines (GitHub turns them into annotations on
    the pull request's diff), at most as many of each level as a step shows; the rest in a folded log
    group (and in the job summary when ``summary_file``, see :func:`github_summary`); the summary as
    a notice. ``Detail.SUMMARY``: the notice only."""
    if detail is Detail.SUMMARY:
        return f"::notice title=routegate::{_gh_data(report.summary())}\n"
    out: list[str] = []
    left: list[_Annotation] = []
    used: Counter[str] = Counter()
    for a in _annotations(report):
        if used[a.level] < GITHUB_ANNOTATIONS_PER_STEP:
            used[a.level] += 1
            out.append(a.command())
        else:
            left.append(a)
    rest = [a.plain() for a in left]
    if detail is Detail.EVERYTHING:
        rest = text_lines(report, detail)
    if rest:
        title = (f"routegate: {len(left)} more finding{'s' if len(left) != 1 else ''} (a step shows "
                 f"{GITHUB_ANNOTATIONS_PER_STEP} errors and {GITHUB_ANNOTATIONS_PER_STEP} warnings)"
                 if detail is not Detail.EVERYTHING else "routegate: every object")
        out += [f"::group::{_gh_data(title)}", *(_gh_log(line) for line in rest), "::endgroup::"]
    summary = report.summary()
    if left:
        summary += (f"; {len(left)} finding{'s' if len(left) != 1 else ''} not annotated (GitHub shows "
                    f"{GITHUB_ANNOTATIONS_PER_STEP} of each level per step): see the "
                    f"{'job summary' if summary_file else 'log'}")
    out.append(f"::notice title=routegate::{_gh_data(summary)}")
    return "\n".join(out) + "\n"


def _gh_log(line: str) -> str:
    """A log line that GitHub does not read as a workflow command (a name may start with ``::``)."""
    return f" {line}" if line.startswith("::") else line


def github_summary(report: Report, detail: Detail = Detail.PROBLEMS) -> str:
    """The job summary (``$GITHUB_STEP_SUMMARY``, Markdown): the summary line and the text report in a
    code block, where nothing from the inputs is read as Markdown or HTML; cut to fit GitHub's size."""
    lines = text_lines(report, Detail.PROBLEMS if detail is Detail.SUMMARY else detail)
    # CommonMark: a fence closes only on a run of backticks as long as the opening one
    fence = "`" * max(3, _longest_backticks(lines) + 1)
    head = f"### routegate check\n\n{report.summary()}\n\n"
    if not lines:
        return head
    kept: list[str] = []
    size = len(head.encode()) + 2 * len(fence) + 200
    for n, line in enumerate(lines):
        size += len(line.encode("utf-8", "backslashreplace")) + 1
        if size > GITHUB_SUMMARY_BYTES:
            kept.append(f"... {len(lines) - n} more lines: the complete report is routegate check -o json")
            break
        kept.append(line)
    return head + f"{fence}text\n" + "\n".join(kept) + f"\n{fence}\n"


def _longest_backticks(lines: Sequence[str]) -> int:
    longest = 0
    for line in lines:
        run = 0
        for char in line:
            run = run + 1 if char == "`" else 0
            longest = max(longest, run)
    return longest


# ---- JUnit XML --------------------------------------------------------------------------------------

def _xml_text(value: object) -> str:
    """XML 1.0 cannot carry most control characters even as references: write them as escapes."""
    return clean(value)


def junit(report: Report) -> str:
    """One ``<testsuite>``, one ``<testcase>`` per object (``<failure>`` when denied, ``<error>`` when
    it could not be decided) and one per input error: the shape GitLab, Jenkins and GitHub reporters read.
    Written in ASCII (other characters as character references), so any output encoding carries it."""
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
    # every character clean() leaves is one XML carries: those past ASCII become character references
    body = ET.tostring(suites, encoding="unicode").encode("ascii", "xmlcharrefreplace").decode("ascii")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


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

    try:  # a file name's bytes that are not UTF-8 (read as surrogate escapes) as themselves: %E9
        uri = quote(file, errors="surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate from a JSON input (``<stdin>`` is named by us)
        uri = quote(file, errors="surrogatepass")
    physical: dict[str, Any] = {"artifactLocation": {"uri": uri}}
    if line:
        physical["region"] = {"startLine": line, "startColumn": max(column, 1)}
    location: dict[str, Any] = {"physicalLocation": physical}
    if logical:
        location["logicalLocations"] = [{"fullyQualifiedName": logical}]
    return location


def render(report: Report, output: str, *, colour: bool = False, rule_infos: Iterable[Any] = (),
           detail: Detail = Detail.PROBLEMS, summary_file: bool = False) -> str:
    if output == "json":
        return as_json(report)
    if output == "yaml":
        return as_yaml(report)
    if output == "github":
        return github(report, detail, summary_file=summary_file)
    if output == "junit":
        return junit(report)
    if output == "sarif":
        return sarif(report, rule_infos)
    return text(report, detail, colour=colour)


def placed(findings: Iterable[Finding], where: Callable[[tuple[Any, ...]], tuple[int, int]]) -> tuple[Placed, ...]:
    """Each finding at its field; one about another object (``about``) at the object's own start."""
    return tuple(Placed(f, *where(f.path if f.subject else ())) for f in ordered(findings))
