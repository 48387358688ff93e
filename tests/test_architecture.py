"""docs/ARCHITECTURE.md stays true: every path and module it names exists, every package is in its tree,
and each value of the table is defined where the table says."""

from __future__ import annotations

import re

from tests.conftest import REPO

DOC = REPO / "docs" / "ARCHITECTURE.md"
ROOTS = ("validators", "haproxy_check", "webhook", "certs")
TOP = (*ROOTS, "tests", "bench", "manifests", "docs", "scripts", "examples")
PACKAGE_LINE = re.compile(r"^- `([\w/]+)/`: (.*)$")


def _bullets(text: str) -> dict[str, str]:
    """Package folder -> the text of its bullet (continuation lines included)."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = PACKAGE_LINE.match(line)
        if m:
            current = m.group(1)
            out[current] = m.group(2)
        elif current and line.startswith("  "):
            out[current] += " " + line.strip()
        else:
            current = None
    return out


def test_every_path_it_names_exists() -> None:
    names = re.findall(r"`([^`\s]+)`", DOC.read_text())
    paths = [n for n in names if "/" in n and n.split("/")[0] in TOP]
    assert len(paths) > 20
    missing = [p for p in paths if not (REPO / p).exists()]
    assert missing == []


def test_every_module_a_package_line_names_is_in_that_package() -> None:
    bullets = _bullets(DOC.read_text())
    assert bullets
    wrong = []
    for folder, text in bullets.items():
        for name in re.findall(r"`([a-z][a-z0-9_]*)`", text):
            if not ((REPO / folder / f"{name}.py").is_file() or (REPO / folder / name / "__init__.py").is_file()):
                wrong.append(f"{folder}/: {name}")
    assert wrong == []


def test_every_package_on_disk_has_its_line() -> None:
    bullets = _bullets(DOC.read_text())
    on_disk = sorted(str(init.parent.relative_to(REPO)) for root in ROOTS for init in (REPO / root).rglob("__init__.py")
                     if "__pycache__" not in init.parts)
    assert len(on_disk) >= len(ROOTS)
    assert [p for p in on_disk if p not in bullets] == []
    assert [p for p in bullets if p not in on_disk] == []


def test_each_value_is_defined_where_the_table_says() -> None:
    rows = re.findall(r"^\| `(\w+)` \| `([\w/]+\.py)` \|", DOC.read_text(), flags=re.MULTILINE)
    assert {name for name, _ in rows} == {"Change", "State", "Finding", "RenderResult", "CheckResult", "RoutingTable",
                                          "TrafficDiff", "Verdict"}
    for name, path in rows:
        assert re.search(rf"^class {name}\b", (REPO / path).read_text(), flags=re.MULTILINE), (name, path)
