"""Issue 26: move webhook/'s modules into subpackages for its four programs, with history (``git mv``),
and rewrite every reference to them. Mechanical and idempotent: run it from the repository root on any
tree that still has the flat layout (a module already moved, or absent, is passed over).

    python scripts/restructure_webhook.py            # moves, rewrites, then ruff --fix of import order
    python scripts/restructure_webhook.py --tests    # then tests/webhook/ mirrors the new tree

What it rewrites, in every file git tracks (Python, Markdown, TOML, YAML, .importlinter, shell):
- ``from webhook import a, b as c`` (also parenthesised, indented, inside functions): one statement per
  new package, each name keeping its local name (``from webhook.cli import routegate as cli``);
- dotted names ``webhook.<old>`` (imports, strings for monkeypatch, sys.modules checks, entry points,
  import-linter contracts, prose) to the new dotted name;
- paths ``webhook/<old>.py`` to ``webhook/<package>/<new>.py``, and Markdown anchors made of them.
Content edits beyond imports and names: none, except the bundled CRDs' path in assembly (one level up).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGES = {
    "gate": ("the Gate: one change (or several judged together) through the validators, the render and "
             "haproxy -c to one Verdict; knows no server, CLI or reconcile loop",
             ["gates", "verdicts", "verdictcache", "batching", "batchkinds", "bisection", "ruleworkers",
              "fullchecks", "loadedindex", "assembly", "trafficdiffs", "policyloading"]),
    "server": ("the admission server: ``routegate serve``, AdmissionReviews over HTTPS, admission control "
               "and the probes; uses the Gate",
               ["servers", "serving", "admission", "reviews", "connections", "encodings", "selftests", "warming",
                "liveschemas", "dataplanestates"]),
    "cli": ("the command line: ``routegate check``, ``render``, ``plan``, ``explain``, ``rules`` and the "
            "parser that starts ``serve`` and ``reconcile``; nothing imports it",
            ["cli:routegate", "checking", "checktargets", "reports", "outdirs", "explaining", "explanations",
             "progress", "flags", "reconcileflags", "packageversion", "plans"]),
    "reconcile": ("the reconcile loop: ``routegate reconcile`` follows the state, judges each version with "
                  "the Gate, isolates what fails, promotes the rest and writes statuses; uses the Gate",
                  ["reconcile:reconciler", "reconciling", "reconcileruntime", "reconcilechecks", "events",
                   "audits", "leaveouts", "isolating", "following", "promotedmemory", "promotedstatuses",
                   "promotedversions", "shrinkguard", "statusshapes", "statustargets", "statuswriter",
                   "filesources"]),
    "loading": ("inputs read from files: manifests with their line and column, YAML and JSON, the settings "
                "file; below the Gate, which loads states with it",
                ["inputs", "yamlloading", "jsonmembers", "positions", "settingsfiles"]),
    "process": ("the process a long-running command is: malloc arenas, shared strings, stop signals and "
                "background tasks; knows none of the programs",
                ["malloctuning", "sharedstrings", "lifecycle"]),
}

# tests/webhook/<file> -> tests/webhook/<package>/<file>, by the program each test is about (helpers such as
# clirun.py and conftest.py stay where every subfolder finds them)
TESTS = {
    "gate": ["test_gates", "test_review_together", "test_review_together_kinds", "test_delta_check",
             "test_delta_frontends", "test_fullchecks", "test_ruleworkers", "test_baselines", "test_apply_notes",
             "test_cached_cancel", "test_bundled_crds", "test_traffic_attribution", "test_traffic_verdicts",
             "test_schema_valid_values", "test_delete_warnings", "test_policies", "test_one_finding_per_fact",
             "test_unsupported_values_name_a_field", "test_status_every_kind", "test_dataplane_versions"],
    "server": ["test_admission", "test_admission_server", "test_server", "test_server_sourceshapes",
               "test_serve_dataplane_state", "test_serve_freeze", "test_serve_imports", "test_serve_kubeconfig",
               "test_serve_process", "test_serve_signals", "test_slow_clients", "test_client_certs",
               "test_fuzz_reviews", "test_reviews", "test_reviews_fastchecks", "test_readiness", "test_metrics_labels",
               "test_liveschemas", "test_warming", "test_dataplane_state"],
    "cli": ["test_cli", "test_cli_cluster", "test_cli_each", "test_cli_exit", "test_cli_inputs", "test_cli_kubectl",
            "test_cli_outputs", "test_cli_setup", "test_check_lazy", "test_check_prediction",
            "test_check_shared_renders", "test_checktargets", "test_report_escaping", "test_read_once"],
    "loading": ["test_inputs_json", "test_jsonmembers", "test_positions_json", "test_yamlloading",
                "test_config_file"],
    "process": ["test_malloctuning", "test_sharedstrings"],
}
# a moved test that finds the repository by its own depth is one folder deeper
DEPTH = {"test_policies": ("parents[1]", "parents[2]"), "test_serve_imports": ("parents[2]", "parents[3]")}

# old module name (under webhook.) -> (package, new module name)
MOVES: dict[str, tuple[str, str]] = {}
for package, (_, entries) in PACKAGES.items():
    for entry in entries:
        old, _, new = entry.partition(":")
        MOVES[old] = (package, new or old)


GIT = shutil.which("git") or "/usr/bin/git"


def git(*args: str) -> str:
    return subprocess.run([GIT, *args], check=True, capture_output=True, text=True).stdout


def move_files() -> None:
    for package, (doc, _) in PACKAGES.items():
        init = Path("webhook", package, "__init__.py")
        if not init.exists():
            init.parent.mkdir(exist_ok=True)
            text = textwrap.fill(f'"""{doc[0].upper()}{doc[1:]}."""', width=110, break_on_hyphens=False)
            init.write_text(text + "\n")
            git("add", str(init))
    for old, (package, new) in MOVES.items():
        source = Path("webhook", f"{old}.py")
        if source.exists():
            git("mv", str(source), str(Path("webhook", package, f"{new}.py")))


_NAMES = "|".join(sorted(MOVES, key=len, reverse=True))
DOTTED = re.compile(r"(?<!tests\.)\bwebhook\.(" + _NAMES + r")\b(?![/-])(\.\w+)?")
# a Markdown anchor made of a heading that names a moved file: #...-webhookbatchingpy
SLUG = re.compile(r"(#[\w-]*?)webhook(" + "|".join(sorted(MOVES, key=len, reverse=True)) + r")py\b")
FROM_IMPORT = re.compile(r"\s+import\s+\(?\s*(\w+)")
PATH = re.compile(r"\bwebhook/(" + "|".join(sorted(MOVES, key=len, reverse=True)) + r")\.py\b")


def _dotted(match: re.Match[str]) -> str:
    old, after = match.group(1), match.group(2) or ""
    if old in PACKAGES:  # webhook.cli and webhook.reconcile were modules and are packages now
        inside = {new for package, new in MOVES.values() if package == old}
        imported = FROM_IMPORT.match(match.string, match.end())
        if after[1:] in inside or (not after and imported is not None and imported.group(1) in inside):
            return match.group(0)  # already moved: webhook.cli.checking, from webhook.reconcile import audits
        if not after and imported is None and old not in FLAT:
            return match.group(0)  # the package itself (pyproject, .importlinter), once the module has moved
    package, new = MOVES[old]
    return f"webhook.{package}.{new}{after}"


def _slug(match: re.Match[str]) -> str:
    package, new = MOVES[match.group(2)]
    return f"{match.group(1)}webhook{package}{new}py"


def _path(match: re.Match[str]) -> str:
    package, new = MOVES[match.group(1)]
    return f"webhook/{package}/{new}.py"


def rewrite_from_webhook(source: str) -> str:
    """``from webhook import ...`` statements naming moved modules, one per new package."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module == "webhook" and node.level == 0):
            continue
        if not any(alias.name in MOVES for alias in node.names):
            continue
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            local = alias.asname or alias.name
            if alias.name in MOVES:
                package, new = MOVES[alias.name]
                target, name = f"webhook.{package}", new
            else:
                target, name = "webhook", alias.name
            groups.setdefault(target, []).append(name if name == local else f"{name} as {local}")
        indent = " " * node.col_offset
        end = node.end_lineno or node.lineno
        tail = lines[end - 1][node.end_col_offset or 0:]  # a trailing comment, the newline
        statements = [f"from {target} import {', '.join(names)}" for target, names in groups.items()]
        text = ("\n" + indent).join(statements)
        first = lines[node.lineno - 1][:node.col_offset]
        edits.append((node.lineno, end, first + text + tail))
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1:end] = [text]
    return "".join(lines)


TEXT = (".py", ".md", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".txt", ".sh", ".j2", ".importlinter")


def rewrite_references() -> list[str]:
    changed = []
    for name in git("ls-files").splitlines():
        path = Path(name)
        if not path.is_file() or name == "scripts/restructure_webhook.py":
            continue
        if not (path.name.endswith(TEXT) or path.name in (".importlinter", "Dockerfile") or path.parent.name in (
                ".ci",) or name.startswith("scripts/")):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite_from_webhook(text) if name.endswith(".py") else text
        new = SLUG.sub(_slug, PATH.sub(_path, DOTTED.sub(_dotted, new)))
        if new != text:
            path.write_text(new)
            changed.append(name)
    return changed


def fix_bundled_path() -> None:
    """assembly reads the bundled CRDs beside the webhook package, one level above its own folder now."""
    path = Path("webhook/gate/assembly.py")
    text = path.read_text()
    text = text.replace('(Path(__file__).parent / "bundled" / "crds.json.gz")',
                        '(Path(__file__).parents[1] / "bundled" / "crds.json.gz")')
    path.write_text(text)


def list_packages() -> None:
    """pyproject's [tool.setuptools] packages: the new subpackages after webhook.cluster."""
    path = Path("pyproject.toml")
    text = path.read_text()
    missing = [f"webhook.{p}" for p in PACKAGES if f'"webhook.{p}"' not in text]
    if missing:
        text = text.replace('    "webhook.cluster",\n',
                            '    "webhook.cluster",\n' + "".join(f'    "{m}",\n' for m in missing), 1)
        path.write_text(text)


TEST_MOVES = {test: package for package, tests in TESTS.items() for test in tests}
TEST_DOTTED = re.compile(r"\btests\.webhook\.(" + "|".join(TEST_MOVES) + r")\b")
TEST_PATH = re.compile(r"\btests/webhook/(" + "|".join(TEST_MOVES) + r")\.py\b")


def move_tests() -> None:
    for package in TESTS:
        init = Path("tests", "webhook", package, "__init__.py")
        if not init.exists():
            init.parent.mkdir(exist_ok=True)
            init.write_text("")
            git("add", str(init))
    for test, package in TEST_MOVES.items():
        source = Path("tests", "webhook", f"{test}.py")
        if source.exists():
            target = Path("tests", "webhook", package, f"{test}.py")
            git("mv", str(source), str(target))
            if test in DEPTH:
                old, new = DEPTH[test]
                target.write_text(target.read_text().replace(f"Path(__file__).resolve().{old}",
                                                             f"Path(__file__).resolve().{new}"))
    changed = []
    for name in git("ls-files").splitlines():
        path = Path(name)
        if not path.is_file() or not path.name.endswith(TEXT) or name == "scripts/restructure_webhook.py":
            continue
        text = path.read_text()
        new = TEST_PATH.sub(lambda m: f"tests/webhook/{TEST_MOVES[m.group(1)]}/{m.group(1)}.py",
                            TEST_DOTTED.sub(lambda m: f"tests.webhook.{TEST_MOVES[m.group(1)]}.{m.group(1)}", text))
        if new != text:
            path.write_text(new)
            changed.append(name)
    python = [f for f in changed if f.endswith(".py")]
    if python:
        subprocess.run([sys.executable, "-m", "ruff", "check", "--fix", "--select", "I", "-q", *python], check=False)
    print(f"moved {len(TEST_MOVES)} test files; rewrote {len(changed)} files")


FLAT = {name for name in PACKAGES if Path("webhook", f"{name}.py").exists()}  # modules a package replaces


CONTRACTS = """\
[importlinter:contract:gate-knows-no-program]
name = the Gate knows no server, CLI or reconcile loop (they use it)
type = forbidden
source_modules =
    webhook.gate
forbidden_modules =
    webhook.server
    webhook.cli
    webhook.reconcile

[importlinter:contract:nothing-imports-the-cli]
name = nothing imports the CLI (only python -m webhook and the entry points start it)
type = forbidden
source_modules =
    webhook.gate
    webhook.server
    webhook.reconcile
    webhook.loading
    webhook.process
    webhook.cluster
    webhook.gateflags
    webhook.statesources
    webhook.sources
    webhook.metrics
    webhook.logs
    webhook.setuperrors
forbidden_modules =
    webhook.cli

[importlinter:contract:loading-reads-inputs]
name = input loading knows none of the programs and no Gate
type = forbidden
source_modules =
    webhook.loading
forbidden_modules =
    webhook.gate
    webhook.server
    webhook.cli
    webhook.reconcile

[importlinter:contract:process-tuning-knows-no-program]
name = process tuning knows none of the programs
type = forbidden
source_modules =
    webhook.process
forbidden_modules =
    webhook.gate
    webhook.server
    webhook.cli
    webhook.reconcile
    webhook.loading

"""


def add_contracts() -> None:
    """The contracts of the new packages, after the Gate's own (kept as the last step wrote them)."""
    path = Path(".importlinter")
    text = path.read_text()
    if "[importlinter:contract:gate-knows-no-program]" not in text:
        anchor = "[importlinter:contract:certs-independent]"
        path.write_text(text.replace(anchor, CONTRACTS + anchor, 1) if anchor in text else text + "\n" + CONTRACTS)


def main() -> int:
    if not Path("webhook/__init__.py").exists():
        raise SystemExit("run from the repository root")
    if sys.argv[1:] == ["--tests"]:
        move_tests()
        return 0
    move_files()
    changed = rewrite_references()
    fix_bundled_path()
    list_packages()
    add_contracts()
    python = [f for f in changed if f.endswith(".py")] + ["webhook/gate/assembly.py"]
    subprocess.run([sys.executable, "-m", "ruff", "check", "--fix", "--select", "I", "-q", *python], check=False)
    print(f"moved {len(MOVES)} modules into {len(PACKAGES)} packages; rewrote {len(changed)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
