"""After a promotion: bring the running data plane to the new version by Runtime API, or reload it.

``RuntimeApplier`` is an ``on_promoted`` hook (``routegate reconcile --runtime-socket PATH``). For each
promotion it plans (``haproxy_check.runtime.runtimeplans``) from the description the data plane is known to run
to the promoted one, for the data plane's HAProxy version, and

- nothing to do: done (the promoted files say the same as what runs);
- runtime: sends the commands over the stats socket (``haproxy_check.runtime.runtimeapi``), checking each answer;
- reload (the plan says so, a command failed, or the socket could not be reached): signals a reload,
  which reads the promoted files (they are live before any hook runs).

What the data plane is known to run: the live version when the applier first runs (the one it was
started on or last reloaded to), then each version applied or reloaded to. When a reload cannot be
signalled the running state is unknown, and the next promotion plans from nothing (rule 1: a reload).

How a reload is signalled (``Reload``), one of:

- ``--reload-pidfile FILE``: SIGUSR2 to the pid in FILE, a ``haproxy -W`` master's pidfile (``-p``);
- ``--reload-command CMD``: run CMD (split like a shell line, not run by a shell), exit 0 is success; the
  environment has ROUTEGATE_VERSION (the promoted directory) and ROUTEGATE_RELOAD_REASON;
- neither: write ``OUTPUT/reload/requested`` (atomically, a new content each time). A hitless-reload
  wrapper pointed at that directory (haproxy-reload-wrapper: ``WATCH_PATH=OUTPUT/reload``) reloads when
  it changes. A wrapper watching haproxy.cfg or the whole OUTPUT would reload on every promotion and make
  the runtime path pointless.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from haproxy_check.check import scratches
from haproxy_check.descriptions import Description
from haproxy_check.runtime import runtimeapi, runtimeplans
from haproxy_check.runtime.promotion import Promoted, Promoter
from webhook import metrics

log = structlog.get_logger("routegate.reconcile")

TRIGGER_DIR = "reload"
TRIGGER_FILE = "requested"
RELOAD_COMMAND_TIMEOUT = 60.0


class Reload(Protocol):
    """Makes the data plane reload the promoted files; returns an error text, or "" on success."""

    def describe(self) -> str: ...

    async def reload(self, promoted: Promoted, reason: str) -> str: ...


@dataclass(frozen=True, slots=True)
class PidfileReload:
    pidfile: Path

    def describe(self) -> str:
        return f"SIGUSR2 to the pid in {self.pidfile}"

    async def reload(self, promoted: Promoted, reason: str) -> str:
        try:
            text = (await asyncio.to_thread(self.pidfile.read_text)).split()
            pid = int(text[0]) if text else 0
        except (OSError, ValueError) as exc:
            return f"{self.pidfile}: {exc}"
        if pid <= 1:
            return f"{self.pidfile}: no pid in it"
        try:
            os.kill(pid, signal.SIGUSR2)
        except OSError as exc:
            return f"SIGUSR2 to {pid} (from {self.pidfile}): {exc.strerror or exc}"
        return ""


@dataclass(frozen=True, slots=True)
class CommandReload:
    argv: tuple[str, ...]
    timeout: float = RELOAD_COMMAND_TIMEOUT

    @classmethod
    def parse(cls, line: str) -> CommandReload:
        argv = tuple(shlex.split(line))
        if not argv:
            raise ValueError("--reload-command is empty")
        return cls(argv)

    def describe(self) -> str:
        return f"run {shlex.join(self.argv)}"

    async def reload(self, promoted: Promoted, reason: str) -> str:
        env = {**os.environ, "ROUTEGATE_VERSION": promoted.version, "ROUTEGATE_RELOAD_REASON": reason}
        try:
            proc = await asyncio.create_subprocess_exec(*self.argv, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
        except OSError as exc:
            return f"{self.argv[0]}: {exc.strerror or exc}"
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return f"{self.argv[0]} did not finish within {self.timeout:g}s"
        if proc.returncode != 0:
            tail = out.decode(errors="replace").strip()[-300:]
            return f"{self.argv[0]} exited with {proc.returncode}" + (f": {tail}" if tail else "")
        return ""


@dataclass(frozen=True, slots=True)
class TriggerReload:
    """Writes OUTPUT/reload/requested for a wrapper watching that directory."""

    output: Path

    def describe(self) -> str:
        return f"write {self.output / TRIGGER_DIR / TRIGGER_FILE} (a reload wrapper watches {TRIGGER_DIR}/)"

    async def reload(self, promoted: Promoted, reason: str) -> str:
        def write() -> None:
            where = self.output / TRIGGER_DIR
            where.mkdir(parents=True, exist_ok=True)
            tmp = where / f".{TRIGGER_FILE}.tmp"
            body = {"version": promoted.version, "contentHash": promoted.content_hash, "reason": reason,
                    "requestedAt": time.time()}
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(json.dumps(body, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(tmp, where / TRIGGER_FILE)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            return f"{self.output / TRIGGER_DIR}: {exc.strerror or exc}"
        return ""


@dataclass(frozen=True, slots=True)
class Applied:
    """What one hook call did (kept on the applier for /readyz, logs and tests)."""

    version: str
    action: str  # "none", "runtime" or "reload"
    commands: int = 0  # commands sent and answered as expected
    reason: str = ""  # why a reload ("" otherwise)
    error: str = ""  # the reload could not be signalled


class RuntimeApplier:
    """The ``on_promoted`` hook; see the module docstring."""

    def __init__(self, promoter: Promoter, socket_path: str, *, dataplane_version: tuple[int, ...],
                 reload: Reload, timeout: float = runtimeapi.COMMAND_TIMEOUT) -> None:
        self.promoter = promoter
        self.socket_path = socket_path
        self.dataplane_version = tuple(dataplane_version)
        self.reload = reload
        self.timeout = timeout
        self.last: Applied | None = None
        self._running: str | None = None  # the version directory the data plane is known to run
        self._started = False

    async def __call__(self, previous: Promoted | None, promoted: Promoted) -> None:
        if not self._started:
            self._started = True
            self._running = previous.version if previous is not None else None
        self.last = await self._apply(promoted)
        metrics.DATAPLANE_UPDATES.labels(self.last.action if not self.last.error else "reload_failed").inc()

    async def _apply(self, promoted: Promoted) -> Applied:
        old = await asyncio.to_thread(self._description, self._running)
        new = await asyncio.to_thread(self._description, promoted.version)
        if new is None:
            return await self._reload(promoted, f"{promoted.version}/description.json cannot be read")
        files = await asyncio.to_thread(self._certificates, promoted.version, new)
        plan = runtimeplans.plan(old, new, dataplane_version=self.dataplane_version, files=files)
        if plan.action is runtimeplans.Action.NONE:
            self._running = promoted.version
            log.info("data plane already runs this version", version=promoted.version)
            return Applied(promoted.version, "none")
        if plan.action is runtimeplans.Action.RELOAD:
            return await self._reload(promoted, "; ".join(plan.reasons[:3]))
        mark = time.perf_counter()
        result = await runtimeapi.apply(plan, self.socket_path, files=files, timeout=self.timeout)
        metrics.RECONCILE_SECONDS.labels("runtime").observe(time.perf_counter() - mark)
        metrics.RUNTIME_COMMANDS.labels("ok").inc(result.applied)
        if not result.ok:
            metrics.RUNTIME_COMMANDS.labels("failed").inc()
            log.warning("runtime update failed; reloading", version=promoted.version, error=result.error,
                        applied=result.applied, of=len(plan.commands))
            return await self._reload(promoted, f"runtime command failed: {result.error}")
        self._running = promoted.version
        log.info("applied at runtime", version=promoted.version, commands=len(plan.commands))
        return Applied(promoted.version, "runtime", result.applied)

    async def _reload(self, promoted: Promoted, reason: str) -> Applied:
        error = await self.reload.reload(promoted, reason)
        if error:
            self._running = None  # what runs now is unknown: the next promotion reloads
            log.error("reload could not be signalled", version=promoted.version, how=self.reload.describe(),
                      error=error, reason=reason)
            return Applied(promoted.version, "reload", reason=reason, error=error)
        self._running = promoted.version
        log.info("reload signalled", version=promoted.version, how=self.reload.describe(), reason=reason)
        return Applied(promoted.version, "reload", reason=reason)

    def _description(self, version: str | None) -> Description | None:
        if version is None:
            return None
        try:
            data = json.loads((self.promoter.output / version / "description.json").read_text(encoding="utf-8"))
            return Description.from_dict(data)
        except (OSError, ValueError, TypeError):
            return None  # pruned, or written before descriptions were promoted: plan from nothing

    def _certificates(self, version: str, description: Description) -> dict[str, bytes]:
        """The certificate/CA files of the promoted version (payloads of ``set ssl``); a file that cannot
        be read is left out, and the command that needs it fails to the reload."""
        out: dict[str, bytes] = {}
        base = self.promoter.output / version
        for file in description.files:
            if file.kind == "other":
                continue
            try:
                out[file.path] = base.joinpath(*scratches.safe_relative(file.path).parts).read_bytes()
            except (OSError, scratches.UnsafePath):
                continue
        return out
