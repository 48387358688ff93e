"""Turning ``haproxy -c`` output into cleaned, traced alerts (pure: tested on captured output).

HAProxy prints, depending on the version:
  [ALERT]    (123) : config : parsing [haproxy.cfg:9] : msg        (2.6 / 2.8)
  [ALERT]    (123) : parsing [haproxy.cfg:9] : msg                 (3.2+ dropped "config :")
  [ALERT]    (123) : config : Parsing [haproxy.cfg:9]: msg         (some keywords)
  [ALERT]    (123) : config : Proxy 'be': unable to find ...       (post-parse: no file:line)
2.6/2.8 print "Configuration file is valid" on success; 3.0+ print nothing. Summary lines ("Error(s)
found", "Fatal errors found") carry nothing a user can act on and are dropped.

Raw output is never passed on: each alert becomes one line with control characters removed, the
scratch path stripped and a length cap, then is traced through the render's source map.
"""

from __future__ import annotations

import functools
import re
import signal
from collections.abc import Iterable, Mapping

from haproxy_check.results import Alert, Origin

MAX_MESSAGE = 300
CONTEXT_LINES = 2

_LINE = re.compile(r"^\[(?P<level>ALERT|WARNING|NOTICE)\]\s*(?:\(\d+\)\s*)?:\s*(?P<rest>.*)$")
_CONFIG_PREFIX = re.compile(r"^config\s*:\s*")
_LOCATED = re.compile(r"^[Pp]arsing\s*\[(?P<file>[^\]:]+):(?P<line>\d+)\]\s*:?\s*(?P<msg>.*)$")
_IN_FILE = re.compile(r"\[(?P<file>[^\]:\s]+):(?P<line>\d+)\]")
_AT_LINE_OF_FILE = re.compile(r"at line (?P<line>\d+) of file '(?P<file>[^']+)'")
_PROXY = re.compile(r"(?:[Pp]roxy|backend|frontend|[Bb]ackend|[Ff]rontend)\s+'(?P<name>[^']+)'")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SUMMARY = (
    "Error(s) found in configuration file",
    "Fatal errors found in configuration",
    "Configuration file has no error but will not start",
    "haproxy version is",
    "path to executable is",
)
_SECTION = re.compile(r"^\s*(?:frontend|backend|listen|defaults)\s+(\S+)")


def clean(text: str, *, scratch: str = "") -> str:
    """One printable line, without the scratch directory, at most MAX_MESSAGE characters."""
    if scratch:
        text = text.replace(scratch.rstrip("/") + "/", "").replace(scratch, ".")
    text = _CONTROL.sub(" ", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def parse(
    output: str,
    *,
    config: str = "",
    origins: Mapping[tuple[str, int], Origin] | None = None,
    scratch: str = "",
) -> tuple[list[Alert], list[Alert]]:
    """(alerts, warnings) found in ``output``, each traced to the object field that made the line."""
    # ``is None``, not ``or``: the source map is lazy, and asking whether it is empty works out the
    # origin of every line of the configuration (a second and more at 10,000 routes) on every clean check.
    origins = origins if origins is not None else {}
    lines = _Lines(config)
    alerts: list[Alert] = []
    warnings: list[Alert] = []
    for raw in output.splitlines():
        match = _LINE.match(raw.strip())
        if match is None or match["level"] == "NOTICE":
            continue
        rest = _CONFIG_PREFIX.sub("", match["rest"].strip())
        if any(rest.startswith(s) for s in _SUMMARY):
            continue
        file, line, message = _locate(rest, scratch=scratch)
        if not file:
            proxy = _PROXY.search(message)
            if proxy and proxy["name"] in lines.sections:
                file, line = "haproxy.cfg", lines.sections[proxy["name"]]
        origin = _trace(origins, file, line)
        in_map = _AT_LINE_OF_FILE.search(message)
        if in_map:  # a map entry HAProxy rejected: the entry's object is more precise than the rule line's
            origin = _trace(origins, _relative(in_map["file"], scratch), int(in_map["line"])) or origin
        alert = Alert(
            message=clean(message, scratch=scratch),
            file=file,
            line=line,
            level=match["level"],
            origin=origin,
            context=_context(lines.lines, line) if file == "haproxy.cfg" else (),
        )
        (alerts if match["level"] == "ALERT" else warnings).append(alert)
    return _dedupe(alerts), _dedupe(warnings)


class _Lines:
    """The configuration's lines and section starts, split only once a message needs them: a clean check
    of a big configuration prints a summary line (2.8: "Configuration file is valid"), and splitting
    14 MB for it took a third of a second of a 10,000-route check."""

    def __init__(self, config: str) -> None:
        self._config = config

    @functools.cached_property
    def lines(self) -> list[str]:
        return self._config.splitlines()

    @functools.cached_property
    def sections(self) -> dict[str, int]:
        return _section_lines(self.lines)


def _locate(rest: str, *, scratch: str) -> tuple[str, int, str]:
    located = _LOCATED.match(rest)
    if located:
        return _relative(located["file"], scratch), int(located["line"]), located["msg"]
    # A map or certificate file error names the file inside the message.
    inner = _IN_FILE.search(rest)
    if inner:
        return _relative(inner["file"], scratch), int(inner["line"]), rest
    return "", 0, rest


def _relative(file: str, scratch: str) -> str:
    if scratch and file.startswith(scratch.rstrip("/") + "/"):
        return file[len(scratch.rstrip("/")) + 1 :]
    return file.removeprefix("./")


def _trace(origins: Mapping[tuple[str, int], Origin], file: str, line: int) -> Origin | None:
    """The origin of ``line``, or of the nearest traced line above it in the same section."""
    if not file or line <= 0:
        return None
    if (file, line) in origins:
        return origins[(file, line)]
    return None


def _section_lines(lines: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        match = _SECTION.match(text)
        if match:
            out.setdefault(match.group(1), number)
    return out


def _context(lines: list[str], line: int) -> tuple[str, ...]:
    if not 0 < line <= len(lines):
        return ()
    start = max(1, line - CONTEXT_LINES)
    end = min(len(lines), line + CONTEXT_LINES)
    marker = {n: ">" if n == line else " " for n in range(start, end + 1)}
    return tuple(f"{marker[n]}{n:5d} | {clean(lines[n - 1])}" for n in range(start, end + 1))


def _dedupe(alerts: Iterable[Alert]) -> list[Alert]:
    seen: set[tuple[str, str, int]] = set()
    out: list[Alert] = []
    for alert in alerts:
        key = (alert.message, alert.file, alert.line)
        if key not in seen:
            seen.add(key)
            out.append(alert)
    return out


# Lines HAProxy prints besides [ALERT]/[WARNING]/[NOTICE] ones: indented continuations ("   | ..."),
# and the plain summaries of 2.x/3.x.
_PLAIN_LINES = (
    "Warnings were found.",
    "Configuration file is valid",
    "Configuration file has no error but will not start (no listener) => exit(2).",
)
_NO_LISTENER = "will not start (no listener)"


def unexplained(output: str) -> list[str]:
    """Lines of ``haproxy -c`` output that are not HAProxy's own (a broken or replaced binary)."""
    out = []
    for raw in output.splitlines():
        if not raw.strip() or raw[0].isspace() or raw.strip() in _PLAIN_LINES or _LINE.match(raw.strip()):
            continue
        out.append(raw)
    return out


def undecided_reason(exit_code: int | None, output: str, found: list[Alert]) -> str | None:
    """Why a finished ``haproxy -c`` run is no judgement, or None when it is one.

    Judgements: exit 0 without an ALERT (valid); exit 2 saying "will not start (no listener)" without
    an ALERT (valid: HAProxy's own meaning); exit 1 with at least one parsed ALERT (invalid). Anything
    else (a signal, another exit code, an exit code no ALERT explains, an ALERT on exit 0, output that
    is not HAProxy's) means the checker itself failed.
    """
    if exit_code is None:
        return "haproxy -c did not report an exit status"
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return f"haproxy -c was killed by {name}"
    strange = unexplained(output)
    if strange:
        return f"haproxy -c printed output that is not HAProxy's (exit code {exit_code}): {clean(strange[0])[:80]}"
    if exit_code == 0:
        return "haproxy -c exited 0 but printed an ALERT" if found else None
    if exit_code == 1:
        return None if found else "haproxy -c exited 1 without an ALERT to explain it"
    if exit_code == 2 and _NO_LISTENER in output and not found:
        return None
    return f"haproxy -c exited {exit_code}" + (" with" if found else " without") + " an ALERT"
