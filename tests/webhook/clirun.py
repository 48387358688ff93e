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
import socket
import subprocess
import sys
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


def in_process(*args: str, stdin: str | None = None, timeout: float = 120, cwd: Path | None = None,
               encoding: str = "utf-8", errors: str = "strict", plugin: bool = False, unset: tuple[str, ...] = (),
               **extra_env: str) -> subprocess.CompletedProcess[str]:
    """``routegate ARGS`` as ``webhook.cli.routegate.main(ARGS)`` in this process: stdin, stdout and
    stderr are pipes of their own (stdout's text ``encoding`` and ``errors`` as Python would pick them for
    a process), the environment is ``env``'s without ``unset``, the directory ``cwd`` (the checkout by default), and the
    answer the ``CompletedProcess`` a subprocess would give (argparse's ``SystemExit`` is the exit code).
    A crash is raised here, with its traceback, instead of turning into exit code 1. A command still
    running after ``timeout`` ends the test run with every thread's traceback (faulthandler), where a
    subprocess would have been killed: a hang fails loudly instead of holding the suite. ``plugin``: as
    ``kubectl-routegate`` (``run_kubectl_plugin``'s prog and kubectl's current context)."""
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
            faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
            try:
                code = main(list(args), prog="kubectl routegate" if plugin else "routegate", kubectl_plugin=plugin)
            except SystemExit as exc:  # argparse: usage errors, --help, --version
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
            finally:
                faulthandler.cancel_dump_traceback_later()
                out.flush()
                err.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(previous)
        structlog.configure(**logging_before)
    # read back as subprocess.run(text=True, errors="backslashreplace") reads a child's pipes
    stdout, stderr = (raw.getvalue().decode("utf-8", "backslashreplace") for raw in (out_bytes, err_bytes))
    return subprocess.CompletedProcess(["routegate", *args], code, stdout, stderr)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed again when this returns)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
