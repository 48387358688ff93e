"""Chaos for the checker: the haproxy binary is replaced mid-run, the scratch disk fills or turns
read-only. Every outcome that is not a clean judgement must be "could not decide" (Decision.ERROR),
never an allow; HAProxy's own "no listener" exit 2 stays a valid config.

The binary the gate runs is a script in tmp_path that first executes the real haproxy (so the state's
baseline is judged for real) and is then overwritten with one that hangs, dies by a signal, prints
garbage, exits 0 with an ALERT, or exits 1/2 with no ALERT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from haproxy_check.check import alerts, binaries
from haproxy_check.results import HAProxyBinary
from tests.webhook.gate.test_gates import named, state_with
from validators.changes import Change, Operation
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision

pytestmark = pytest.mark.haproxy

NO_LISTENER = "Configuration file has no error but will not start (no listener) => exit(2)."
ALERT = "[ALERT]    (1) : config : parsing [haproxy.cfg:1] : unknown keyword 'boom'"
BROKEN = {
    "hangs": "sleep 30",
    "dies by SIGSEGV": "kill -SEGV $$",
    "dies by SIGKILL": "kill -KILL $$",
    "prints garbage, exit 0": "echo 'Segmentation fault (core dumped)'; echo '\x01\x02zz'; exit 0",
    "prints garbage, exit 1": f"echo 'random text'; echo \"{ALERT}\"; exit 1",
    "exits 0 with an ALERT": f"echo \"{ALERT}\"; exit 0",
    "exits 1 with no ALERT": "exit 1",
    "exits 2 with no ALERT": "exit 2",
    "exits 3 with an ALERT": f"echo \"{ALERT}\"; exit 3",
    "exits 2 with an ALERT": f"echo \"{ALERT}\"; echo '{NO_LISTENER}'; exit 2",
}


@pytest.fixture(scope="module")
def binary(haproxy_path: str) -> HAProxyBinary:
    return asyncio.run(binaries.detect(haproxy_path))


def install(path: Path, body: str) -> None:
    """Replace the binary atomically, as a package upgrade or a corrupted image would."""
    tmp = path.with_suffix(".new")
    tmp.write_text(f"#!/bin/sh\n{body}\n")
    tmp.chmod(stat.S_IRWXU)
    os.replace(tmp, path)


@pytest.fixture
def swappable(binary: HAProxyBinary, tmp_path: Path) -> tuple[Gate, Path]:
    path = tmp_path / "haproxy"
    install(path, f'exec {binary.path} "$@"')
    fake = HAProxyBinary(path=str(path), version=binary.version)
    gate = assembly.build_gate(fake, assembly.GateSettings(check_timeout=2.0), schemas=None)
    return gate, path


@pytest.mark.parametrize("how", list(BROKEN))
async def test_a_checker_replaced_mid_run_never_allows(swappable: tuple[Gate, Path], how: str) -> None:
    gate, path = swappable
    before = await gate.review(Change(Operation.CREATE, named("shop")), state=state_with(version="real"))
    assert before.decision is Decision.ALLOW, before.message  # the real binary judged it
    install(path, BROKEN[how])
    # A state already broken by another object: the baseline rule would excuse a failure seen twice.
    state = state_with(named("broken"), version=f"after-{how}")
    for subject in ("shop", "broken"):
        change = Change(Operation.CREATE, named(subject))
        verdict = await gate.review(change, state=state if subject == "shop" else state_with(version=how))
        assert verdict.decision is Decision.ERROR, (how, subject, verdict.decision, verdict.message)
        assert "could not decide" in verdict.message


async def test_no_listener_exit_2_is_a_valid_config(swappable: tuple[Gate, Path]) -> None:
    gate, path = swappable
    install(path, "echo 'Configuration file has no error but will not start (no listener) => exit(2).'; exit 2")
    verdict = await gate.review(Change(Operation.CREATE, named("shop")), state=state_with(version="nl"))
    assert verdict.decision is Decision.ALLOW, verdict.message


async def test_a_missing_binary_is_undecided(swappable: tuple[Gate, Path]) -> None:
    gate, path = swappable
    path.unlink()
    verdict = await gate.review(Change(Operation.CREATE, named("shop")), state=state_with(version="gone"))
    assert verdict.decision is Decision.ERROR and "could not decide" in verdict.message


@contextlib.contextmanager
def tmpfs(where: Path, *, options: str) -> Iterator[Path]:
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the full/read-only scratch disk is not reproducible")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize("kind", ["full", "read-only"])
async def test_a_full_or_read_only_scratch_disk_is_undecided(binary: HAProxyBinary, tmp_path: Path,
                                                             kind: str) -> None:
    with tmpfs(tmp_path / "scratch", options="size=64k,mode=0700") as scratch:
        # Built first, as serve does at start (it checks the scratch base); the disk fills or turns
        # read-only afterwards.
        gate = assembly.build_gate(binary, assembly.GateSettings(scratch_dir=str(scratch / "checks")), schemas=None)
        if kind == "full":
            with contextlib.suppress(OSError), (scratch / "fill").open("wb") as fill:
                while True:
                    fill.write(b"\0" * 4096)
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(scratch)], check=True)  # noqa: ASYNC221
        verdict = await gate.review(Change(Operation.CREATE, named("shop")), state=state_with(version=kind))
        assert verdict.decision is Decision.ERROR, verdict.message
        assert "could not run" in verdict.message


@pytest.mark.parametrize(("exit_code", "output", "decided"), [
    (0, "", True),
    (0, "Configuration file is valid\n", True),
    (0, "[WARNING]  (1) : missing timeouts for backend 'b'.\n   | While not properly invalid\nWarnings were found.\n",
     True),
    (2, "Configuration file has no error but will not start (no listener) => exit(2).\n", True),
    (1, ALERT + "\n", True),
    (1, "", False),
    (0, ALERT + "\n", False),
    (-11, "", False),
    (2, "", False),
    (139, ALERT + "\n", False),
    (0, "garbage\n", False),
])
def test_only_clean_outcomes_are_judgements(exit_code: int, output: str, decided: bool) -> None:
    found, _ = alerts.parse(output)
    assert (alerts.undecided_reason(exit_code, output, found) is None) is decided
