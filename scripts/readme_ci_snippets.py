"""Run the documented commands as a newcomer would, so they cannot rot: the shell lines of the CI
snippets in docs/CHECK.md, and README.md's command that sets up and runs the service.

    python scripts/readme_ci_snippets.py REPO WORKDIR

For each snippet (the YAML block under "## In GitHub Actions" and under "## In GitLab CI") a workspace
is made that looks like the platform team's repository the snippet expects: ``deploy/routes/`` and
``deploy/cluster-state/`` from examples/, and routegate itself at ``.routegate/`` (a copy of this
checkout: what the snippets' ``actions/checkout`` step or git submodule puts there). Every shell line
(GitHub ``run:``, GitLab ``script:``) then runs in order under bash, inside a brand-new virtualenv (a
CI image's Python), and must exit 0.

The service command ("## The two commands") runs verbatim in a fresh copy of the checkout with an empty
home directory: it must answer ``/healthz`` on its default address within the time limit, then stop
cleanly on SIGTERM. Needs PyYAML (the installed routegate's environment has it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path

import yaml

BASH = shutil.which("bash") or "/bin/bash"  # what a CI runner's `run:` and `script:` lines execute in
SNIPPETS = {"GitHub Actions": "## In GitHub Actions", "GitLab CI": "## In GitLab CI"}
_NOT_COPIED = shutil.ignore_patterns(".git", ".venv*", ".haproxy3*", ".haproxy34", "dist", "build", "*.egg-info",
                                     "__pycache__", ".mypy_cache", ".ruff_cache", ".hypothesis", ".pytest_cache")


def snippet(page: str, heading: str) -> object:
    """The first ```yaml block after ``heading`` (a line of its own), parsed."""
    start = page.index("\n" + heading + "\n")
    block = re.search(r"```yaml\n(.*?)```", page[start:], re.DOTALL)
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


SERVE_HEALTHZ = "https://127.0.0.1:8443/healthz"  # `routegate serve`'s default --listen
SERVE_SECONDS = 600  # a fresh virtualenv's install, then the start


def serve_command(readme: str) -> str:
    section = readme[readme.index("## The two commands"):]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None and "routegate serve" in block.group(1), "the README's first command runs the service"
    (line,) = [line for line in block.group(1).splitlines() if line.strip()]
    return line


def healthy() -> bool:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE  # the self-signed default pair
    try:
        with urllib.request.urlopen(SERVE_HEALTHZ, timeout=2, context=insecure) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def run_serve(repo: Path, work: Path, readme: str) -> None:
    """The README's service command, verbatim, until /healthz answers; then SIGTERM, which must end it."""
    root = work / "serve"
    shutil.copytree(repo, root, ignore=_NOT_COPIED)
    home = work / "serve-home"
    home.mkdir()
    line = serve_command(readme)
    print(f"readme_ci_snippets: service: $ {line}", flush=True)
    env = {**os.environ, "HOME": str(home), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("XDG_CACHE_HOME", None)
    log = (work / "serve.log").open("w")
    process = subprocess.Popen([BASH, "-eu", "-c", line], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + SERVE_SECONDS
        while not healthy():
            if process.poll() is not None or time.monotonic() > deadline:
                sys.stdout.write((work / "serve.log").read_text()[-4000:])
                what = f"exited {process.returncode}" if process.returncode is not None else \
                    f"did not answer {SERVE_HEALTHZ} within {SERVE_SECONDS} s"
                raise SystemExit(f"readme_ci_snippets: the service command {what}")
            time.sleep(1)
        print(f"readme_ci_snippets: service: {SERVE_HEALTHZ} answered 200", flush=True)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise SystemExit("readme_ci_snippets: the service did not stop within 30 s of SIGTERM") from None
        log.close()


def run(repo: Path, work: Path) -> None:
    readme = (repo / "README.md").read_text(encoding="utf-8")
    ci_page = (repo / "docs" / "CHECK.md").read_text(encoding="utf-8")
    for name, heading in SNIPPETS.items():
        root = workspace(repo, work / name.replace(" ", "-"))
        env_dir = root.parent / (root.name + "-python")
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
        env = {**os.environ, "VIRTUAL_ENV": str(env_dir), "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        for line in shell_lines(name, snippet(ci_page, heading)):
            print(f"readme_ci_snippets: {name}: $ {line}", flush=True)
            done = subprocess.run([BASH, "-euo", "pipefail", "-c", line], cwd=root, env=env, check=False,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                sys.stdout.write(done.stdout[-4000:])
                raise SystemExit(f"readme_ci_snippets: {name}: {line!r} exited {done.returncode}")
    print(f"readme_ci_snippets: the {' and '.join(SNIPPETS)} snippets ran as written")
    run_serve(repo, work, readme)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: readme_ci_snippets.py REPO WORKDIR")
    run(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
