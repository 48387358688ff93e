"""``--scratch-dir`` must be private (issue 16, item 8): a directory other users can write without the
sticky bit, or that another user owns, is refused with one line naming the flag."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path

import pytest

from haproxy_check.check import scratches
from haproxy_check.check.checker import Checker
from haproxy_check.results import HAProxyBinary, RenderResult
from tests.webhook.conftest import INPUTS, STATE_DIR
from webhook.cli.routegate import main


def test_a_private_directory_and_a_sticky_shared_one_are_accepted(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    scratches.check_base(private)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    scratches.check_base(sticky)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_directory_others_can_write_without_the_sticky_bit_is_refused(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(scratches.UnsafeBase, match="writable by other users without the sticky bit"):
        scratches.check_base(shared)
    with pytest.raises(scratches.UnsafeBase), scratches.scratch_dir(shared):
        pass


def test_a_parent_others_can_write_is_refused_too(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    inner = tmp_path / "inner"
    inner.mkdir(mode=0o700)
    with pytest.raises(scratches.UnsafeBase, match=str(tmp_path)):
        scratches.check_base(inner)
    tmp_path.chmod(0o700)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 54321, 54321)
    with pytest.raises(scratches.UnsafeBase, match="owned by another user"):
        scratches.check_base(theirs)


@pytest.mark.haproxy
def test_the_cli_refuses_it_in_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        haproxy_path: str) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code = main(["check", "--state", str(STATE_DIR), "-f", str(INPUTS / "good.yaml"), "--scratch-dir", str(shared)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"routegate: --scratch-dir {shared}: ")
    assert "sticky bit" in err


def test_a_base_that_turns_unsafe_after_start_makes_the_check_undecided(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    checker = Checker(HAProxyBinary(path="/nonexistent", version="2.8"), scratch_base=base)
    base.chmod(0o777)
    result = asyncio.run(checker.check(RenderResult(files={"haproxy.cfg": b""})))
    assert not result.decided and not result.ok and "--scratch-dir" in result.error


def test_a_checks_scratch_dir_is_removed_after_the_check_without_holding_it_up(
        tmp_path: Path, haproxy_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Removing the directory (milliseconds on some disks) happens on the remover thread: the check's
    result is there while the removal still waits, and the directory is gone once it ran."""
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    release = threading.Event()
    real_rmtree = shutil.rmtree

    def held_rmtree(path: Path, ignore_errors: bool = False) -> None:
        release.wait(10)
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(scratches.shutil, "rmtree", held_rmtree)
    binary = HAProxyBinary(path=haproxy_path, version="2.8")
    config = b"global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" \
             b"frontend f\n  bind 127.0.0.1:18080\n"
    result = asyncio.run(Checker(binary, scratch_base=base).check(RenderResult(files={"haproxy.cfg": config})))
    assert result.decided and result.ok, result.error
    assert [p.name.startswith("routegate-") for p in base.iterdir()] == [True], "still there while removal waits"
    release.set()
    scratches.remove_later(tmp_path / "nothing").result(10)  # the remover runs in order: the check's is done
    assert list(base.iterdir()) == []


def test_a_small_tree_goes_to_memory_without_a_base_and_to_the_base_when_one_is_set(
        tmp_path: Path, haproxy_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No --scratch-dir: a review's small tree is written under the tmpfs at /dev/shm when there is a
    safe one (a disk-backed /tmp costs milliseconds per review); a large one, and any tree when a base
    is set, are not."""
    made: list[str | None] = []
    real = scratches.tempfile.mkdtemp

    def mkdtemp(prefix: str, dir: Path | None = None) -> str:
        made.append(None if dir is None else str(dir))
        return real(prefix=prefix, dir=dir)

    monkeypatch.setattr(scratches.tempfile, "mkdtemp", mkdtemp)
    binary = HAProxyBinary(path=haproxy_path, version="2.8")
    config = b"global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" \
             b"frontend f\n  bind 127.0.0.1:18080\n"
    big = {"haproxy.cfg": config, "maps/big.map": b"k v\n" * 20_000}
    for files in ({"haproxy.cfg": config}, big):
        assert asyncio.run(Checker(binary).check(RenderResult(files=files))).ok
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    assert asyncio.run(Checker(binary, scratch_base=base).check(RenderResult(files={"haproxy.cfg": config}))).ok
    memory = scratches.memory_base()
    assert made == [None if memory is None else str(memory), None, str(base)]


def test_a_memory_base_that_cannot_take_the_tree_falls_back_to_the_disk(
        tmp_path: Path, haproxy_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full or vanished /dev/shm (here: a file where the directory should be) must not leave a review
    undecided: the tree is written where it went before."""
    blocked = tmp_path / "shm"
    blocked.write_text("not a directory")
    monkeypatch.setattr(scratches, "memory_base", lambda: blocked)
    config = b"global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" \
             b"frontend f\n  bind 127.0.0.1:18080\n"
    result = asyncio.run(Checker(HAProxyBinary(path=haproxy_path, version="2.8")).check(
        RenderResult(files={"haproxy.cfg": config})))
    assert result.decided and result.ok, result.error


def test_a_removal_queued_while_concurrent_futures_holds_its_global_lock_does_not_wait_for_it(
        tmp_path: Path) -> None:
    """A finalizer (``warmstarts``: a check started ahead that nobody took) queues its directory's removal
    wherever the garbage collector runs, e.g. in a thread still starting while the main thread sits in
    ``ThreadPoolExecutor.submit`` holding concurrent.futures' global lock and waiting for that thread. The
    removal must not need that lock: a ThreadPoolExecutor remover waited for it for ever (a hang seen in
    the admission server's tests)."""
    import concurrent.futures.thread as futures_thread

    gone = tmp_path / "scratch"
    gone.mkdir()
    (gone / "haproxy.cfg").write_text("global\n")
    queued = threading.Event()

    def finalizer() -> None:
        scratches.remove_later(gone)
        queued.set()

    with futures_thread._global_shutdown_lock:  # as ThreadPoolExecutor.submit holds it
        worker = threading.Thread(target=finalizer, daemon=True)
        worker.start()
        assert queued.wait(10), "the removal waited for concurrent.futures' global lock"
    scratches.remove_later(tmp_path / "nothing").result(10)  # in order: the first one is done
    assert not gone.exists()
