"""/readyz as a self-test through the Gate's own checker: each way the gate cannot judge says why.

The haproxy binary is a wrapper script swapped mid-run (as a broken upgrade or a full node would do
it); the scratch base is a tiny or read-only tmpfs where the kernel lets this test mount one.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from haproxy_check.check import binaries
from haproxy_check.check.checker import Checker
from haproxy_check.results import HAProxyBinary
from webhook.gate import assembly
from webhook.server import servers
from webhook.server.selftests import SelfTest
from webhook.sources import StaticSource

pytestmark = pytest.mark.haproxy


class Swappable:
    """A haproxy path whose behaviour a test replaces between probes."""

    def __init__(self, tmp_path: Path, real: str) -> None:
        self.path, self.real = tmp_path / "haproxy", real
        self.become(f'exec {real} "$@"')

    def become(self, body: str) -> None:
        staged = self.path.with_suffix(".new")
        staged.write_text("#!/bin/sh\n" + body + "\n")
        staged.chmod(0o755)
        staged.replace(self.path)  # atomic, as a package upgrade swaps a binary


def selftest(binary: Swappable, tmp_path: Path, *, scratch: Path | None = None, timeout: float = 1.0) -> SelfTest:
    checker = Checker(HAProxyBinary(str(binary.path), "2.8"), timeout=timeout, scratch_base=scratch or tmp_path / "s")
    return SelfTest(checker, scratch_base=checker.scratch_base, ttl=0.0, wait=5.0)


async def test_each_way_the_checker_breaks_is_a_reason_not_ready(tmp_path: Path, haproxy_path: str) -> None:
    binary = Swappable(tmp_path, haproxy_path)
    test = selftest(binary, tmp_path)
    healthy = await test.health()
    assert healthy.ready and healthy.reason == "", healthy

    binary.become("exec /bin/sleep 30")
    hung = await test.health()
    assert not hung.ready and hung.reason.startswith("haproxy -c hangs: haproxy -c did not finish within 1s")

    binary.become("kill -SEGV $$")
    crashed = await test.health()
    assert not crashed.ready and crashed.reason == (
        "haproxy -c crashed: killed by SIGSEGV on a known-valid configuration"), crashed.reason

    binary.become("echo 'garbage \x01 output'; exit 3")
    garbage = await test.health()
    # "rejects ... (exit code 3)", or "could not decide" from a checker that classifies such output
    assert not garbage.ready and "a known-valid configuration" in garbage.reason, garbage.reason

    binary.path.unlink()
    missing = await test.health()
    assert not missing.ready and missing.reason == f"haproxy binary {binary.path} is missing"

    binary.become(f'exec {haproxy_path} "$@"')
    binary.path.chmod(0o644)
    assert (await test.health()).reason == f"haproxy binary {binary.path} cannot be executed (permission denied)"
    binary.path.chmod(0o755)
    assert (await test.health()).ready  # repaired: ready again at the next probe


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


async def test_a_full_scratch_disk_is_a_reason_not_ready(tmp_path: Path, haproxy_path: str) -> None:
    with tmpfs(tmp_path / "small", "size=256k") as small:
        test = selftest(Swappable(tmp_path, haproxy_path), tmp_path, scratch=small)
        assert (await test.health()).ready
        filler = small / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as out:
            while True:
                out.write(b"\0" * 4096)
                out.flush()
        full = await test.health()
        assert not full.ready and full.reason == (
            f"scratch dir {small} is not writable: No space left on device (ENOSPC)"), full.reason
        filler.unlink()
        assert (await test.health()).ready


async def test_a_read_only_scratch_disk_is_a_reason_not_ready(tmp_path: Path, haproxy_path: str) -> None:
    with tmpfs(tmp_path / "ro", "ro,size=64k") as ro:
        test = selftest(Swappable(tmp_path, haproxy_path), tmp_path, scratch=ro)
        health = await test.health()
        assert not health.ready and health.reason == (
            f"scratch dir {ro} is not writable: Read-only file system (EROFS)"), health.reason


async def test_readyz_answers_503_with_the_reason_and_caches_the_self_test(tmp_path: Path, haproxy_path: str) -> None:
    binary = Swappable(tmp_path, haproxy_path)
    gate = assembly.build_gate(HAProxyBinary(str(binary.path), "2.8"), assembly.GateSettings(scratch_dir=str(tmp_path)))
    test = SelfTest(gate.checker, scratch_base=tmp_path, ttl=60.0, wait=5.0)
    server = TestServer(servers.make_app(gate, StaticSource(), selftest=test), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{server.port}/readyz") as resp:
                first = await resp.json()
                assert resp.status == 200 and first["ready"] and first["reasons"] == [], first
            binary.path.unlink()
            async with session.get(f"http://127.0.0.1:{server.port}/readyz") as resp:
                cached = await resp.json()
            assert resp.status == 200 and cached["selftest"]["checkedAt"] == first["selftest"]["checkedAt"]
            test.ttl = 0.0
            async with session.get(f"http://127.0.0.1:{server.port}/readyz") as resp:
                body = await resp.json()
            assert resp.status == 503 and body["ready"] is False
            assert body["reasons"] == [f"haproxy binary {binary.path} is missing"], body
            assert body["selftest"]["reason"] == body["reasons"][0]
    finally:
        await server.close()


@pytest.mark.parametrize("version", ["2.8", "3.2", "3.4"])
async def test_the_self_test_configuration_is_valid_on_every_supported_version(
        tmp_path: Path, haproxy_path: str, version: str) -> None:
    """HAProxy 3.3 and later reject a frontend and a backend of one name: the self-test's configuration
    must not have them, or a 3.3+ checker (what a 3.4 data plane calls for) never becomes ready."""
    from tests.haproxy_check.dataplanes import binary_of

    path = haproxy_path if version == "2.8" else binary_of(version)
    binary = await binaries.detect(path)
    assert binary.version.startswith(version), binary.version
    test = SelfTest(Checker(binary, timeout=20.0, scratch_base=tmp_path), scratch_base=tmp_path, ttl=0.0, wait=20.0)
    health = await test.health()
    assert health.ready and health.reason == "", health
