"""A check started ahead of its configuration (``haproxy_check.check.warmstarts``) judges exactly what
a check started for it does: the same exit code, alerts, lines and warnings, on 2.8 and 3.x; and it
leaves no process or directory behind."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from haproxy_check.check import sandboxes, scratches, warmstarts
from haproxy_check.check.checker import Checker
from haproxy_check.check.sandboxes import RunOutput
from haproxy_check.results import CheckResult, HAProxyBinary, RenderResult

pytestmark = pytest.mark.haproxy

HEAD = b"global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n"
CONFIGS: dict[str, dict[str, bytes]] = {
    "valid, with a map": {
        "haproxy.cfg": HEAD + b"frontend f\n  bind 127.0.0.1:18080\n"
                              b"  http-request set-var(txn.b) path,map_beg(maps/paths.map)\n",
        "maps/paths.map": b"/api be_api\n/web be_web\n"},
    "a missing map": {
        "haproxy.cfg": HEAD + b"frontend f\n  bind 127.0.0.1:18080\n"
                              b"  http-request set-var(txn.b) path,map_beg(maps/absent.map)\n"},
    "a bad regex in a map": {
        "haproxy.cfg": HEAD + b"frontend f\n  bind 127.0.0.1:18080\n"
                              b"  http-request set-var(txn.b) path,map_reg(maps/re.map)\n",
        "maps/re.map": b"^/ok ok\n^/bad( bad\n"},
    "an unknown keyword on line 8": {
        "haproxy.cfg": HEAD + b"frontend f\n  frobnicate yes\n  bind 127.0.0.1:18080\n"},
    "no listener": {"haproxy.cfg": HEAD + b"backend b\n  server s 127.0.0.1:1\n"},
}


async def _answered(checker: Checker) -> None:
    """What the gate does once a review is answered (``Gate.review``), and the wait for its top-up."""
    checker.top_up_soon()
    await asyncio.sleep(sandboxes.TOP_UP_AFTER_ANSWER + 0.005)


def _judged(result: CheckResult) -> tuple[object, ...]:
    return (result.ok, result.decided, result.exit_code, result.error,
            tuple((a.message, a.file, a.line) for a in result.alerts), tuple(result.warnings))


@pytest.mark.skipif(not warmstarts.supported() or scratches.memory_base() is None,
                    reason="needs pidfds and a tmpfs at /dev/shm")
def test_a_check_started_ahead_judges_as_one_started_for_it(haproxy_paths: list[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[bytes] = []
    hand_over = warmstarts.hand_over

    def counted(waiting: warmstarts.Waiting, config: bytes) -> float:
        handed.append(config)
        return hand_over(waiting, config)

    monkeypatch.setattr(warmstarts, "hand_over", counted)

    async def both(path: str) -> None:
        binary = HAProxyBinary(path=path, version="")
        cold, warm = Checker(binary, timeout=30), Checker(binary, timeout=30, warm=True)
        await warm.check(RenderResult(files=CONFIGS["valid, with a map"]))  # starts the first one ahead
        for name, files in CONFIGS.items():
            expected = _judged(await cold.check(RenderResult(files=files)))
            got = _judged(await warm.check(RenderResult(files=files)))
            assert got == expected, (path, name)
            assert handed[-1] == files["haproxy.cfg"], (path, name)
        assert len(handed) == len(CONFIGS)
        await _answered(warm)  # the next ones are started once the review is answered
        ahead = warm.runner.waiting_ahead
        assert len(ahead) == warm.runner.pool and all(w.alive() for w in ahead)  # the next ones wait ahead
        warm.runner.close()
        assert not warm.runner.waiting_ahead
        assert all(w.proc.returncode is not None for w in ahead)
        scratches.wait_for_removals()
        assert not any(w.workdir.exists() for w in ahead)

    for path in haproxy_paths:
        handed.clear()
        asyncio.run(both(path))


def taken_ahead(haproxy_path: str, tmp_path: Path) -> tuple[Checker, warmstarts.Waiting]:
    """A warm Checker and the check it started ahead, taken from its pool as a review takes it."""
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    checker = Checker(HAProxyBinary(path=haproxy_path, version=""), warm=True)
    checker.runner.start_waiting(base)
    waiting = checker.runner.take_waiting(base)
    assert waiting is not None
    return checker, waiting


@pytest.mark.skipif(not warmstarts.supported() or scratches.memory_base() is None,
                    reason="needs pidfds and a tmpfs at /dev/shm")
def test_a_server_gone_before_the_handover_leaves_no_haproxy_waiting(haproxy_path: str, tmp_path: Path) -> None:
    """The FIFO's other end closes with this process: haproxy reads an empty configuration and exits."""
    checker, waiting = taken_ahead(haproxy_path, tmp_path)
    asyncio.run(warmstarts.ready(waiting, within=30))
    os.close(waiting.fifo)  # as the kernel does for a server that died
    waiting.fifo = -1  # closed: no later discard may close its number again (it may be another file's)
    assert waiting.proc.wait(timeout=30) != 0
    warmstarts.discard(waiting)
    checker.runner.close()


@pytest.mark.skipif(not warmstarts.supported() or scratches.memory_base() is None,
                    reason="needs pidfds and a tmpfs at /dev/shm")
def test_a_check_discarded_twice_closes_its_configuration_once(haproxy_path: str, tmp_path: Path) -> None:
    """The exit hook discards every check waiting ahead (a process about to ``os._exit``), and a Runner's
    finalizer discards its own again: by then the FIFO's number may be another file's, and closing it a
    second time took that file from whoever had it (``routegate`` run in process then failed to start
    haproxy with "Bad file descriptor")."""
    checker, waiting = taken_ahead(haproxy_path, tmp_path)
    number = waiting.fifo
    warmstarts.discard(waiting)
    other = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(other, number)  # another file now has the FIFO's number
        warmstarts.discard(waiting)
        os.fstat(number)  # still open
    finally:
        os.close(other)
        if number != other:
            os.close(number)
        checker.runner.close()


def _outlive(hook: bool) -> None:
    if hook:
        warmstarts._discard_all()
    time.sleep(3)
    os._exit(0)


@pytest.mark.skipif(not warmstarts.supported() or scratches.memory_base() is None,
                    reason="needs pidfds and a tmpfs at /dev/shm")
def test_a_forked_child_neither_holds_the_configuration_open_nor_ends_the_check(haproxy_path: str) -> None:
    """Rule workers are forked while a check waits ahead: their copy of the FIFO's write end would keep
    haproxy reading until the deadline (every such check timed out: "could not decide"), and a child's
    exit hook must not end the parent's check."""

    async def run(hook: bool) -> tuple[bool, float]:
        checker = Checker(HAProxyBinary(path=haproxy_path, version=""), timeout=20, warm=True)
        await checker.check(RenderResult(files=CONFIGS["valid, with a map"]))  # starts the next one ahead
        await asyncio.sleep(0.2)
        assert warmstarts._WAITING, "a check waits ahead"
        child = os.fork()
        if child == 0:  # a worker that outlives the next check, without exec (which would close the FIFO)
            _outlive(hook)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            result = await checker.check(RenderResult(files=CONFIGS["valid, with a map"]))
            return result.ok, loop.time() - started
        finally:
            await asyncio.to_thread(os.waitpid, child, 0)

    for hook in (False, True):
        ok, seconds = asyncio.run(run(hook))
        assert ok and seconds < 2.5, (hook, ok, seconds)


@pytest.mark.skipif(not warmstarts.supported() or scratches.memory_base() is None,
                    reason="needs pidfds and a tmpfs at /dev/shm")
def test_the_next_review_finds_a_check_that_has_long_reached_its_configuration(haproxy_path: str) -> None:
    """haproxy takes 8-12 ms from its start to the open of its configuration, about a lone review's whole
    time: a single check started when the previous one ended was not there yet when the next review came
    (the review waited for it). The pool keeps more than one, and a review takes the oldest: one started
    before the previous review, which has had all of that review's time to get there."""

    async def run() -> None:
        checker = Checker(HAProxyBinary(path=haproxy_path, version=""), timeout=30, warm=True)
        try:
            files = CONFIGS["valid, with a map"]
            assert (await checker.check(RenderResult(files=files))).ok  # cold; starts the pool
            await asyncio.sleep(0)  # an empty pool is filled at once, answered or not
            first = checker.runner.waiting_ahead
            assert len(first) >= 2, "more than one check waits ahead"
            for waiting in first:
                assert await warmstarts.ready(waiting, within=30)
            handed: list[warmstarts.Waiting] = []
            run_waiting = checker.runner.run_waiting

            async def recorded(waiting: warmstarts.Waiting, config: bytes) -> RunOutput:
                handed.append(waiting)
                return await run_waiting(waiting, config)

            checker.runner.run_waiting = recorded  # type: ignore[method-assign]
            assert (await checker.check(RenderResult(files=files))).ok
            assert handed == [first[0]], "the oldest is taken"
            await _answered(checker)
            # right after a check, one that was started before it still waits, already at its configuration
            now = checker.runner.waiting_ahead
            assert now[0] is first[1] and warmstarts._holds_config(now[0])
            assert len(now) == checker.runner.pool
        finally:
            checker.runner.close()

    asyncio.run(run())


@pytest.mark.skipif(not warmstarts.supported() or scratches.memory_base() is None,
                    reason="needs pidfds and a tmpfs at /dev/shm")
def test_a_check_taken_ahead_is_replaced_after_the_answer_not_on_the_reviews_path(haproxy_path: str) -> None:
    """Starting a check ahead holds the GIL through a spawn and takes a core for haproxy's start: done
    right after the check, it delayed the review's reload note, traffic diff and answer. While a check
    still waits ahead, the one taken is replaced once the review is answered (``top_up_soon``), or at the
    latest ``TOP_UP_AT_LATEST`` seconds later; an emptied pool is filled at once."""

    async def run() -> None:
        checker = Checker(HAProxyBinary(path=haproxy_path, version=""), timeout=30, warm=True)
        files = CONFIGS["valid, with a map"]
        try:
            assert (await checker.check(RenderResult(files=files))).ok  # cold; the empty pool fills at once
            await asyncio.sleep(0)
            assert len(checker.runner.waiting_ahead) == checker.runner.pool
            assert (await checker.check(RenderResult(files=files))).ok
            await asyncio.sleep(0.01)  # what the review computes after its check: nothing started meanwhile
            assert len(checker.runner.waiting_ahead) == checker.runner.pool - 1
            await _answered(checker)
            assert len(checker.runner.waiting_ahead) == checker.runner.pool
            assert (await checker.check(RenderResult(files=files))).ok
            await asyncio.sleep(sandboxes.TOP_UP_AT_LATEST + 0.02)  # never answered: replaced all the same
            assert len(checker.runner.waiting_ahead) == checker.runner.pool
        finally:
            checker.runner.close()

    asyncio.run(run())
