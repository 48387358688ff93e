"""Run routegate's CLI: the real console entry point in a subprocess (``python -m webhook``, this
checkout first), or its ``main`` in this process with the same argv, environment and captured output.

A test about the process itself (exit code of the entry point, a terminal, signals, what the interpreter
imports, the output encoding Python picks from the environment) starts the process; a test about what a
command prints or decides calls ``main`` in process (``in_process``): the same parser, the same command
code and the same writers, without paying a second of interpreter start and imports per call.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

# What ``env`` takes out of the inherited environment: a developer's own colour or binary choice must not
# change what a test sees.
_DROPPED = ("NO_COLOR", "ROUTEGATE_HAPROXY")


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**base, **extra}


def routegate(*args: str, stdin: str | None = None, timeout: float = 120, cwd: Path | None = None,
              **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True,
                          input=stdin if stdin is not None else "", timeout=timeout, env=env(**extra_env),
                          cwd=cwd or REPO)


@contextlib.contextmanager
def _environment(extra: dict[str, str], unset: tuple[str, ...] = ()) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for name in (*_DROPPED, *unset):
            os.environ.pop(name, None)
        os.environ.update(extra)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _stream(encoding: str, errors: str) -> tuple[io.TextIOWrapper, io.BytesIO]:
    """A pipe as the process would have it: not a terminal, bytes underneath, text in ``encoding``."""
    raw = io.BytesIO()
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline="\n", write_through=True), raw


class _Deadline:
    """After ``seconds``: note where the main thread is and interrupt it (SIGINT, which ``main`` answers
    with exit code 130 once asyncio has cancelled the command), so a hang fails its test with that stack
    instead of holding the suite. Should the interrupt not free it, faulthandler ends the run a minute
    later with every thread's stack."""

    def __init__(self, seconds: float) -> None:
        self.where = ""
        self._main = threading.main_thread().ident
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._seconds = seconds
        self._lock = threading.Lock()
        self._done = False

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._interrupt()

    def _interrupt(self) -> None:
        frame = sys._current_frames().get(self._main or 0)
        self.where = "".join(traceback.format_stack(frame)) if frame is not None else "(no stack)"
        faulthandler.dump_traceback_later(60, exit=True, file=sys.__stderr__)
        signal.pthread_kill(self._main or 0, signal.SIGINT)

    def __enter__(self) -> _Deadline:
        if threading.current_thread() is threading.main_thread():
            self._timer.start()
        else:  # on a test's worker thread (beside a fake apiserver): no interrupt, only the last resort
            faulthandler.dump_traceback_later(self._seconds + 60, exit=True, file=sys.__stderr__)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()
        faulthandler.cancel_dump_traceback_later()


def in_process(*args: str, stdin: str | None = None, timeout: float = 120, cwd: Path | None = None,
               encoding: str = "utf-8", errors: str = "strict", plugin: bool = False, unset: tuple[str, ...] = (),
               **extra_env: str) -> subprocess.CompletedProcess[str]:
    """``routegate ARGS`` as ``webhook.cli.routegate.main(ARGS)`` in this process: stdin, stdout and
    stderr are pipes of their own (stdout's text ``encoding`` and ``errors`` as Python would pick them for
    a process), the environment is ``env``'s without ``unset``, the directory ``cwd`` (the checkout by
    default), and the answer the ``CompletedProcess`` a subprocess would give (argparse's ``SystemExit`` is
    the exit code). A crash is raised here, with its traceback, instead of turning into exit code 1. A
    command still running after ``timeout`` is interrupted and fails the test with where it was
    (``_Deadline``), where a subprocess would have been killed. ``plugin``: as ``kubectl-routegate``
    (``run_kubectl_plugin``'s prog and kubectl's current context)."""
    import structlog

    from webhook.cli.routegate import main

    logging_before = structlog.get_config()  # serve and reconcile set their logging up for the process
    stdin_stream = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    (out, out_bytes), (err, err_bytes) = _stream(encoding, errors), _stream("utf-8", "backslashreplace")
    previous = os.getcwd()
    saved = sys.stdin, sys.stdout, sys.stderr
    try:
        os.chdir(cwd or REPO)
        with _environment(extra_env, unset):
            sys.stdin, sys.stdout, sys.stderr = stdin_stream, out, err
            try:
                with _Deadline(timeout) as deadline:
                    code = main(list(args), prog="kubectl routegate" if plugin else "routegate",
                                kubectl_plugin=plugin)
            except SystemExit as exc:  # argparse: usage errors, --help, --version
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
            finally:
                out.flush()
                err.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(previous)
        structlog.configure(**logging_before)
    if deadline.where:
        raise AssertionError(f"routegate {' '.join(args)}: still running after {timeout} s, at:\n{deadline.where}")
    # read back as subprocess.run(text=True, errors="backslashreplace") reads a child's pipes
    stdout, stderr = (raw.getvalue().decode("utf-8", "backslashreplace") for raw in (out_bytes, err_bytes))
    return subprocess.CompletedProcess(["routegate", *args], code, stdout, stderr)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed again when this returns)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
