"""The code-quality gates as tests, so the README's one test command runs them: ruff, mypy --strict on
the packages, and import-linter's layer contracts."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_layers_hold() -> None:
    # The console script may not be on PATH (pip --user, venvs): call its entry point with this Python.
    result = run(sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()")
    assert result.returncode == 0, result.stdout + result.stderr
    # every contract the config declares is checked and kept (the count guards against a contract that
    # import-linter silently skips, e.g. after a section name typo)
    declared = (REPO / ".importlinter").read_text().count("[importlinter:contract:")
    assert declared >= 10
    assert f"Contracts: {declared} kept, 0 broken." in result.stdout
