"""Shared test fixtures: the real haproxy binary and the shared test data beside the checkout.

With CI=true a missing haproxy binary is a failure, not a skip, so a green CI run cannot hide it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from haproxy_check.check import binaries

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path | None:
    """``shared/`` sits beside the checkout (CI: a copy beside the fresh clone)."""
    for candidate in (REPO.parent / "shared", Path("/work/shared")):
        if candidate.is_dir():
            return candidate
    return None


SHARED = shared_dir()


def need_shared(*parts: str) -> Path:
    if SHARED is None or not SHARED.joinpath(*parts).exists():
        pytest.skip(f"shared test data {'/'.join(parts)} is not beside this checkout")
    return SHARED.joinpath(*parts)


@pytest.fixture(scope="session")
def haproxy_path() -> str:
    try:
        return binaries.locate(None)
    except binaries.BinaryNotFound as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have a haproxy binary: {exc}")
        pytest.skip(str(exc))


def haproxy34_path() -> str:
    """HAProxy 3.4 (the runtime features' data plane): ``$ROUTEGATE_HAPROXY_34``, else ``.haproxy34/haproxy``
    (what ``.ci/run`` fetches with ``scripts/get-haproxy3 .haproxy34 experimental``)."""
    return os.environ.get("ROUTEGATE_HAPROXY_34") or str(REPO / ".haproxy34" / "haproxy")


def need_binary(path: str, *, versions: tuple[str, ...], why: str) -> str:
    """``path`` when it runs and reports one of ``versions``; otherwise a skip, or with CI=true a failure
    (a green CI run must not hide a missing data-plane version)."""
    found = _version_of(path) if os.access(path, os.X_OK) else ""
    if any(found.startswith(v) for v in versions):
        return path
    problem = (f"HAProxy {' or '.join(versions)} is not at {path} ({'version ' + found if found else 'missing'}): "
               f"{why}")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must have it: {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="session")
def haproxy34() -> str:
    return need_binary(haproxy34_path(), versions=("3.4", "3.5"),
                       why="runtime backend features need it (set ROUTEGATE_HAPROXY_34)")


@pytest.fixture(scope="session")
def haproxy32() -> str:
    """The 3.2 of the 3.x render pass (``.haproxy3/haproxy``), for live tests that need that exact version."""
    return need_binary(str(REPO / ".haproxy3" / "haproxy"), versions=("3.2",),
                       why="`scripts/get-haproxy3 .haproxy3 sid` fetches it")


def extra_binaries() -> list[str]:
    """Other haproxy binaries every render check also runs against: ``.haproxy3/haproxy`` (what
    ``.ci/run`` fetches: production data planes run 3.x) and ``$ROUTEGATE_HAPROXY_EXTRA`` (colon-separated)."""
    found = [str(REPO / ".haproxy3" / "haproxy")] if (REPO / ".haproxy3" / "haproxy").is_file() else []
    found += [p for p in os.environ.get("ROUTEGATE_HAPROXY_EXTRA", "").split(":") if p]
    return [p for p in found if os.access(p, os.X_OK)]


@pytest.fixture(scope="session")
def haproxy_paths(haproxy_path: str) -> list[str]:
    """The default binary first, then every extra one (deduplicated)."""
    paths = [haproxy_path]
    for extra in extra_binaries():
        if os.path.realpath(extra) not in {os.path.realpath(p) for p in paths}:
            paths.append(extra)
    return paths


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (for servers started as processes)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _version_of(binary: str) -> str:
    import subprocess

    try:
        out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    words = out.split()
    return words[2] if len(words) > 2 and words[:2] == ["HAProxy", "version"] else ""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say whether the HAProxy 3.x pass ran, so a green run on 2.8 alone cannot pass for a full one."""
    try:
        default = binaries.locate(None)
    except binaries.BinaryNotFound:
        default = ""
    versions = {p: _version_of(p) for p in [default, *extra_binaries()] if p}
    three = [f"{v} ({p})" for p, v in versions.items() if v.startswith("3.")]
    if three:
        terminalreporter.write_line(f"HAProxy 3.x pass: ran with {', '.join(three)}")
    else:
        terminalreporter.write_line("HAProxy 3.x pass: did not run (no 3.x binary; `scripts/get-haproxy3` "
                                    "fetches one to .haproxy3/haproxy)")
