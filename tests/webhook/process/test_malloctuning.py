"""The serve process fixes glibc's mmap threshold, reconcile caps its heaps and returns what each run freed
(see webhook.process.malloctuning); elsewhere it does nothing."""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from webhook.process import malloctuning

ROOT = Path(__file__).resolve().parents[2]
GLIBC = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt and malloc_trim")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_accepts_the_threshold() -> None:
    assert malloctuning.return_large_blocks() is True


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoMallopt:
        def __init__(self, name: Any) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert malloctuning.return_large_blocks() is False


def test_a_missing_c_library_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: Any) -> Any:
        raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert malloctuning.return_large_blocks() is False


# -- reconcile: heaps capped, freed memory returned after each run and each background full check

TRIM_PROBE = """
import sys, threading
from webhook.process import malloctuning
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
keep = []
def work():  # in a thread: a heap (arena) of its own, as asyncio.to_thread's workers get
    blocks = [bytes(2048) for _ in range(50_000)]  # ~100 MiB of malloc'd blocks (over pymalloc's 512 bytes)
    keep.extend(blocks[::64])  # a few stay: the free pages between them are not returned by free() itself
thread = threading.Thread(target=work)
thread.start()
thread.join()
before = rss()
if sys.argv[1] == "trim":
    malloctuning.give_back()
print(before, rss())
"""

ARENA_PROBE = """
import ctypes, os, sys, tempfile, threading
from webhook.process import malloctuning
if sys.argv[1] == "limit":
    malloctuning.limit_arenas()
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    for _ in range(2000):
        bytes(4096)  # malloc from this thread's heap while the others do too
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
fd, path = tempfile.mkstemp()
os.close(fd)
handle = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, handle)
libc.fclose(handle)
print(open(path).read().count("<heap nr="))
os.unlink(path)
"""


def _probe(code: str, arg: str) -> list[int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, arg], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    return [int(word) for word in done.stdout.split()]


@GLIBC
def test_give_back_returns_the_free_pages_a_thread_left_in_its_heap() -> None:
    before, after = _probe(TRIM_PROBE, "trim")
    assert before >= 80 and after < before - 60, (before, after)
    before, after = _probe(TRIM_PROBE, "no")  # the probe itself: without the trim they stay resident
    assert after > before - 10, (before, after)


@GLIBC
def test_limit_arenas_caps_the_heaps_threads_use() -> None:
    assert _probe(ARENA_PROBE, "limit") == [malloctuning.ARENAS]
    assert _probe(ARENA_PROBE, "no")[0] > malloctuning.ARENAS  # eight threads at once: more heaps uncapped


def test_give_back_without_glibc_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloctuning, "_trim", [])

    def missing(name: Any) -> Any:
        raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert malloctuning.give_back() is False
    assert malloctuning.limit_arenas() is False


async def test_each_reconcile_run_and_background_check_gives_memory_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from haproxy_check.results import CheckResult, HAProxyBinary, RenderResult
    from webhook.reconcile import reconcilechecks, reconciling

    calls: list[str] = []

    def give_back_soon() -> bool:
        calls.append("trim")
        return True

    monkeypatch.setattr(malloctuning, "give_back_soon", give_back_soon)

    class Gate:  # what reconciler_for reads of a gate
        scope = None
        renderer = None
        checker = None

    args = argparse.Namespace(output_dir=str(tmp_path), keep=2)
    monkeypatch.setattr(reconciling, "Reconciler", lambda *a, **k: k)
    hooks = reconciling.reconciler_for(Gate(), args, None)["on_outcome"]  # type: ignore[arg-type,index]
    assert hooks[-1] is reconciling._give_back  # last: after the statuses, once the run's transients are gone
    await hooks[-1](None, None)
    assert calls == ["trim"]

    class Passing:
        binary = HAProxyBinary("haproxy", "2.8.0")

        async def check(self, render: RenderResult) -> CheckResult:
            calls.append("check")
            return CheckResult(ok=True, binary=self.binary, exit_code=0)

    checks = reconcilechecks.BackgroundFullChecks(Passing())
    render = RenderResult(files={}, origins={}, description=None, findings=(), statuses={})  # type: ignore[arg-type]
    checks.submit(reconcilechecks.Promotion("v1", render, None, ()))  # type: ignore[arg-type]
    await checks.idle()
    assert calls == ["trim", "check", "trim"]


def test_give_back_soon_runs_one_trim_at_a_time_off_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    started, release, done = threading.Event(), threading.Event(), threading.Event()
    where: list[str] = []

    def give_back() -> bool:
        where.append(threading.current_thread().name)
        started.set()
        release.wait(10)
        done.set()
        return True

    monkeypatch.setattr(malloctuning, "give_back", give_back)
    assert malloctuning.give_back_soon() is True
    assert started.wait(10)
    assert malloctuning.give_back_soon() is False  # one runs: it returns what this one would
    release.set()
    assert done.wait(10)
    assert where == ["routegate-malloc-trim"]  # not the caller's thread (the event loop's)
    for _ in range(100):  # the lock is released once the thread ends
        if malloctuning.give_back_soon():
            break
        threading.Event().wait(0.01)
    else:
        raise AssertionError("no trim could start again")
