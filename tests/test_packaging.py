"""What the image, the package metadata and CI promise, read from the files themselves."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement

from tests.conftest import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.splitlines()
                                             if not line.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_base_image_is_pinned_to_a_patch_release() -> None:
    froms = [args for word, args in instructions() if word == "FROM"]
    assert len(froms) == 1
    assert re.fullmatch(r"haproxy:3\.\d+\.\d+-bookworm", froms[0]), froms[0]


def test_the_image_has_a_writable_cert_dir_for_serve_without_flags() -> None:
    steps = instructions()
    env = " ".join(args for word, args in steps if word == "ENV")
    cache = re.search(r"XDG_CACHE_HOME=(\S+)", env)
    assert cache, "routegate serve without flags writes under $XDG_CACHE_HOME (HOME is /nonexistent)"
    user = next(args for word, args in reversed(steps) if word == "USER")
    uid = user.split(":")[0]
    runs = " ".join(args for word, args in steps if word == "RUN")
    assert re.search(rf"install -d -o {uid} -g \d+ -m 07\d\d {re.escape(cache.group(1))}\b", runs), runs


def test_the_python_dependencies_install_under_constraints() -> None:
    steps = instructions()
    copied = " ".join(args for word, args in steps if word == "COPY")
    assert "constraints.txt" in copied
    pip = next(args for word, args in steps if word == "RUN" and "pip install" in args)
    assert "-c constraints.txt" in pip
    pinned = {line.split("==")[0] for line in (REPO / "constraints.txt").read_text().splitlines()
              if line and not line.startswith("#")}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for dep in project["dependencies"]:
        name = re.sub(r"[-_.]+", "-", Requirement(dep).name).lower()
        assert name in pinned, f"{name} is a dependency but not in constraints.txt"


def test_the_cel_engine_is_a_default_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {Requirement(d).name for d in project["dependencies"]}
    assert {"common-expression-language", "cel-expr-python"} <= names


def test_ci_fetches_haproxy3_with_the_projects_own_script() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^fetch \.haproxy3 sid$", ci, re.MULTILINE) and "shared/" not in ci
    assert re.search(r"^fetch \.haproxy34 experimental$", ci, re.MULTILINE)  # the runtime tests' 3.4
    assert 'bash scripts/get-haproxy3 "$1" "$2"' in ci
    script = REPO / "scripts" / "get-haproxy3"
    assert script.stat().st_mode & 0o111
    readme = (REPO / "README.md").read_text()
    assert "scripts/get-haproxy3" in readme


def test_the_image_carries_the_oci_annotations() -> None:
    labels = " ".join(args for word, args in instructions() if word == "LABEL")
    found = dict(re.findall(r'(org\.opencontainers\.image\.[a-z.]+)="([^"]*)"', labels))
    for key in ("title", "description", "version", "revision", "licenses", "source", "base.name"):
        assert found.get(f"org.opencontainers.image.{key}"), f"LABEL org.opencontainers.image.{key} is missing"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert re.search(rf"ARG VERSION={re.escape(project['version'])}\b", DOCKERFILE), "the package's version"
    assert found["org.opencontainers.image.licenses"] == project["license"]["text"]
    base = next(args for word, args in instructions() if word == "FROM")
    assert found["org.opencontainers.image.base.name"].endswith(base)


def test_every_package_on_disk_is_in_the_wheel() -> None:
    """setuptools ships only the packages pyproject lists: a new subpackage missing there imports from a
    checkout but not from an installed wheel (scripts/check-package would find it later, slower)."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {str(init.parent.relative_to(REPO)).replace("/", ".")
               for top in ("webhook", "validators", "haproxy_check", "certs")
               for init in (REPO / top).rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
