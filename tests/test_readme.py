"""The README's promises that code can check: its commands and its rule table stay true."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO
from validators import rules

README = (REPO / "README.md").read_text()


def test_the_readme_carries_the_current_rule_table() -> None:
    for info in rules.table():
        assert f"| `{info.code}` |" in README, f"{info.code} is missing from README.md's rule table"


def test_the_test_command_is_what_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    command = next(line.strip() for line in README.splitlines() if "python3 -m pytest" in line and "pip" in line)
    assert command in ci


def test_the_examples_the_readme_uses_exist() -> None:
    for path in ("examples/state", "examples/broken-route.yaml", "examples/review-broken-route.json",
                 "manifests/base/webhook.yaml", "docs/CEL.md", "docs/RULES.md"):
        assert Path(REPO, path).exists(), path
