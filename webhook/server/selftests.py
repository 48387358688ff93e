"""``/readyz`` as a real self-test: the gate can still judge, not merely the process answers.

Every review writes a scratch tree and runs a sandboxed ``haproxy -c``; so readiness does the same,
through the very checker the Gate uses (same binary, sandbox, scratch base and concurrency slots):

1. a scratch-dir write probe (a private dir, 64 KiB written and fsynced, removed): a full or
   read-only disk fails here with its errno, before any review would fail on it;
2. ``haproxy -c`` of a tiny configuration that is valid on every supported version (its frontend and
   backend have different names: HAProxy 3.3 and later reject two proxies of one name): a missing or
   non-executable binary, a haproxy that hangs (the checker's deadline), crashes (a signal) or
   rejects a known-valid configuration each gives its own reason.

A result is cached for ``ttl`` seconds, and probes never wait long for a run: while one is in flight
the last result is answered (a hang is reported once the checker's deadline ends it). Cost: one
tiny check per ``ttl`` at most, whatever the probe rate.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from haproxy_check.check import scratches
from haproxy_check.check.checker import CheckTimedOut
from haproxy_check.results import RenderResult
from webhook.gate.gates import Checks

log = structlog.get_logger("routegate")

SELFTEST_CONFIG = b"""global
    maxconn 16

defaults
    mode http
    timeout connect 1s
    timeout client 1s
    timeout server 1s

frontend selftest
    bind 127.0.0.1:8
    default_backend selftest_servers

backend selftest_servers
    server selftest 127.0.0.1:9
"""
PROBE_BYTES = 64 * 1024
DEFAULT_TTL = 5.0
DEFAULT_WAIT = 0.8  # a probe waits at most this long for a fresh run (kubelet's default timeout is 1 s)


@dataclass(frozen=True, slots=True)
class Health:
    ready: bool
    reason: str = ""  # why not ready, in words; "" when ready
    checked_at: float = 0.0  # wall time the run finished
    duration: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "reason": self.reason or None, "checkedAt": round(self.checked_at, 3),
                "duration": round(self.duration, 4), **self.details}


class SelfTest:
    def __init__(self, checker: Checks, *, scratch_base: Path | None = None, ttl: float = DEFAULT_TTL,
                 wait: float = DEFAULT_WAIT, clock: Callable[[], float] = time.monotonic) -> None:
        self.checker = checker
        self.scratch_base = scratch_base
        self.ttl = ttl
        self.wait = wait
        self._clock = clock
        self._last: Health | None = None
        self._last_at = 0.0
        self._running: asyncio.Task[Health] | None = None

    async def health(self) -> Health:
        if self._last is not None and self._clock() - self._last_at < self.ttl:
            return self._last
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._run(), name="readiness self-test")
        try:
            return await asyncio.wait_for(asyncio.shield(self._running), self.wait)
        except TimeoutError:
            if self._last is not None:
                return self._last  # the run in flight answers a later probe (or its deadline does)
            return Health(False, "the first self-test (haproxy -c of a tiny configuration) is still running")

    async def _run(self) -> Health:
        started = self._clock()
        reason = await self._scratch_problem() or await self._check_problem()
        health = Health(not reason, reason, checked_at=time.time(), duration=self._clock() - started,
                        details=_isolation(self.checker))
        if reason and (self._last is None or self._last.reason != reason):
            log.warning("self-test failed", reason=reason)
        self._last, self._last_at = health, self._clock()
        return health

    def _scratch_where(self) -> str:
        return str(self.scratch_base) if self.scratch_base is not None else tempfile.gettempdir()

    async def _scratch_problem(self) -> str:
        try:
            await asyncio.to_thread(_write_probe, self.scratch_base)
        except OSError as exc:
            return f"scratch dir {self._scratch_where()} is not writable: {_os_error(exc)}"
        return ""

    async def _check_problem(self) -> str:
        path = self.checker.binary.path
        missing = await asyncio.to_thread(_binary_problem, path)
        if missing:
            return missing
        try:
            result = await self.checker.check(RenderResult(files={"haproxy.cfg": SELFTEST_CONFIG}))
        except CheckTimedOut as exc:
            return f"haproxy -c hangs: {exc}"
        except OSError as exc:
            return f"haproxy -c cannot run: {_os_error(exc)} (scratch dir {self._scratch_where()})"
        except Exception as exc:  # whatever else ends a check without a judgement is a reason too
            return f"haproxy -c self-test failed: {type(exc).__name__}: {exc}"
        if result.ok:
            return ""
        code = result.exit_code
        if code is not None and code < 0:
            return f"haproxy -c crashed: killed by {_signal_name(-code)} on a known-valid configuration"
        error = str(getattr(result, "error", "") or "")
        if getattr(result, "decided", True) is False and error:  # a checker that tells "could not decide"
            return f"haproxy -c could not decide on a known-valid configuration: {error}"
        first = result.alerts[0].message if result.alerts else "no alert"
        return f"haproxy -c rejects a known-valid configuration (exit code {code}): {first}"


def _binary_problem(path: str) -> str:
    if not os.path.exists(path):
        return f"haproxy binary {path} is missing"
    if not os.access(path, os.X_OK):
        return f"haproxy binary {path} cannot be executed (permission denied)"
    return ""


def _write_probe(base: Path | None) -> None:
    with scratches.scratch_dir(base) as workdir:
        fd = os.open(workdir / "probe", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(b"\0" * PROBE_BYTES)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)


def _os_error(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _isolation(checker: Checks) -> dict[str, Any]:
    """The checker's network isolation, when the sandbox reports one (``isolation`` on the checker,
    its runner or the binary info): shown on /readyz so operators see which one is active."""
    for owner in (checker, getattr(checker, "runner", None), checker.binary):
        value = getattr(owner, "isolation", None)
        if value is not None:
            return {"isolation": value if isinstance(value, str | bool | int | float) else str(value)}
    return {}
