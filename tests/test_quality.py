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


ROOTS = ("webhook", "haproxy_check", "validators", "certs")


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each an import circle), sorted;
    Tarjan's algorithm, iterative (the graph has hundreds of modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return sorted(circles)


def test_import_circles_are_found() -> None:
    # the finder itself: a ring, a two-module circle, a self-contained tail, an acyclic diamond
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a", "g", "h"}, "g": {"i"},
             "h": {"i"}, "i": set()}
    assert import_circles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_circles() -> None:
    """No module of the product reaches itself through imports, counted on the full graph: imports inside
    functions and under TYPE_CHECKING count too (moving an import into a function does not remove a
    circle). A shared piece that two sides need moves down to a module both can import."""
    import grimp

    found = grimp.build_graph(*ROOTS, cache_dir=None)
    graph = {module: {m for m in found.find_modules_directly_imported_by(module) if m in found.modules}
             for module in found.modules}
    assert len(graph) > 150
    circles = import_circles(graph)
    assert circles == [], "import circles (modules that import each other, directly or not):\n" + "\n".join(
        f"{len(c)} modules: " + ", ".join(c) for c in circles)
