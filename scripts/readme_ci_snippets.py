"""Run the shell lines of README.md's CI snippets as a CI runner would, so they cannot rot.

    python scripts/readme_ci_snippets.py REPO WORKDIR

For each snippet (the YAML block under "### In GitHub Actions" and under "### In GitLab CI") a workspace
is made that looks like the platform team's repository the snippet expects: ``deploy/routes/`` and
``deploy/cluster-state/`` from examples/, and routegate itself at ``.routegate/`` (a copy of this
checkout: what the snippets' ``actions/checkout`` step or git submodule puts there). Every shell line
(GitHub ``run:``, GitLab ``script:``) then runs in order under bash, inside a brand-new virtualenv (a
CI image's Python), and must exit 0. Needs PyYAML (the installed routegate's environment has it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import yaml

SNIPPETS = {"GitHub Actions": "### In GitHub Actions", "GitLab CI": "### In GitLab CI"}
_NOT_COPIED = shutil.ignore_patterns(".git", ".venv*", ".haproxy3*", ".haproxy34", "dist", "build", "*.egg-info",
                                     "__pycache__", ".mypy_cache", ".ruff_cache", ".hypothesis", ".pytest_cache")


def snippet(readme: str, heading: str) -> object:
    """The first ```yaml block after ``heading``, parsed."""
    start = readme.index(heading + "\n")
    block = re.search(r"```yaml\n(.*?)```", readme[start:], re.DOTALL)
    if block is None:
        raise SystemExit(f"readme_ci_snippets: no yaml block under {heading!r}")
    return yaml.safe_load(block.group(1))


def shell_lines(name: str, doc: object) -> list[str]:
    if name == "GitHub Actions":
        assert isinstance(doc, list), "the GitHub snippet is a list of steps"
        return [str(step["run"]) for step in doc if isinstance(step, dict) and "run" in step]
    assert isinstance(doc, dict) and len(doc) == 1, "the GitLab snippet is one job"
    (job,) = doc.values()
    return [str(line) for line in job["script"]]


def workspace(repo: Path, root: Path) -> Path:
    shutil.copytree(repo / "examples" / "state", root / "deploy" / "cluster-state")
    (root / "deploy" / "routes").mkdir(parents=True)
    shutil.copy(repo / "examples" / "route.yaml", root / "deploy" / "routes" / "route.yaml")
    shutil.copytree(repo, root / ".routegate", ignore=_NOT_COPIED)
    return root


def run(repo: Path, work: Path) -> None:
    readme = (repo / "README.md").read_text(encoding="utf-8")
    for name, heading in SNIPPETS.items():
        root = workspace(repo, work / name.replace(" ", "-"))
        env_dir = root.parent / (root.name + "-python")
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
        env = {**os.environ, "VIRTUAL_ENV": str(env_dir), "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        for line in shell_lines(name, snippet(readme, heading)):
            print(f"readme_ci_snippets: {name}: $ {line}", flush=True)
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=root, env=env, check=False,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                sys.stdout.write(done.stdout[-4000:])
                raise SystemExit(f"readme_ci_snippets: {name}: {line!r} exited {done.returncode}")
    print(f"readme_ci_snippets: the {' and '.join(SNIPPETS)} snippets ran as written")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: readme_ci_snippets.py REPO WORKDIR")
    run(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
