"""After a promotion: bring the running data plane to the new version by Runtime API, or reload it.

``RuntimeApplier`` is an ``on_promoted`` hook (``routegate reconcile --runtime-socket PATH``). For each
promotion it plans (``haproxy_check.runtime.runtimeplans``) from the description the data plane is known to run
to the promoted one, for the data plane's HAProxy version, and

- nothing to do: done (the promoted files say the same as what runs);
- runtime: sends the commands over the stats socket (``haproxy_check.runtime.runtimeapi``), checking each answer;
- reload (the plan says so, a command failed, or the socket could not be reached): signals a reload,
  which reads the promoted files (they are live before any hook runs).

What the data plane is known to run: when the applier first runs, and whenever that became unknown (a
reload that could not be signalled: the pid file did not exist yet, the data plane was not running),
it is read over the socket (``haproxy_check.runtime.running``: the newest kept version whose backends,
servers and map entries the Runtime API shows), else the live version at start; then each version
applied or reloaded to. Unknown, the next promotion plans from nothing (rule 1: a reload).

What it runs is published for predictions (``webhook.loadedindex``): ``OUTPUT/dataplane.json`` (the
version, the data plane's HAProxy version, the profiles and maps it loads; ``{"version": null}`` while
unknown), read by ``serve --dataplane-state``, and the ``publish`` callback (``serve --reconcile``).

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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import structlog

from haproxy_check.check import scratches
from haproxy_check.descriptions import Description
from haproxy_check.runtime import predictions, running, runtimeapi, runtimeplans
from haproxy_check.runtime.promotion import Promoted, Promoter
from webhook import metrics
from webhook.loadedindex import Published

log = structlog.get_logger("routegate.reconcile")

TRIGGER_DIR = "reload"
PUBLISHED = "dataplane.json"  # what the data plane runs, for predictions (webhook.loadedindex)
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
    prediction: predictions.Prediction | None = None  # the planner's answer, in the words admission uses
    planned_from: str = ""  # the version planned from ("" when unknown)


class RuntimeApplier:
    """The ``on_promoted`` hook; see the module docstring."""

    def __init__(self, promoter: Promoter, socket_path: str, *, dataplane_version: tuple[int, ...],
                 reload: Reload, timeout: float = runtimeapi.COMMAND_TIMEOUT,
                 publish: Callable[[Published | None], None] | None = None) -> None:
        self.promoter = promoter
        # called with what the data plane runs after each promotion (Published, or None when unknown)
        self.publish = publish
        self.socket_path = socket_path
        self.dataplane_version = tuple(dataplane_version)
        self.reload = reload
        self.timeout = timeout
        self.last: Applied | None = None
        self._running: str | None = None  # the version directory the data plane is known to run
        self._started = False

    async def __call__(self, previous: Promoted | None, promoted: Promoted) -> None:
        if not self._started or self._running is None:
            learned = await self.learn()
            if not self._started:
                self._running = learned or (previous.version if previous is not None else None)
            else:
                self._running = learned
            self._started = True
        self.last = await self._apply(promoted)
        metrics.DATAPLANE_UPDATES.labels(self.last.action if not self.last.error else "reload_failed").inc()
        await self._publish()

    async def learn(self) -> str | None:
        """The kept version the data plane runs, read over the socket (``running.which``); None when it
        does not answer or its state matches no version (or several that differ where it cannot show).
        The version being applied is a candidate too: a data plane that started after its swap runs it."""
        names = await asyncio.to_thread(self.promoter.versions)
        candidates = [(v, d) for v in names if (d := await asyncio.to_thread(self._description, v)) is not None]
        if not candidates:
            return None
        try:
            observed = await running.observe(self.socket_path, (m.path for _, d in candidates for m in d.maps),
                                             timeout=self.timeout)
        except runtimeapi.SocketError as exc:
            log.info("the data plane's loaded version cannot be read", error=str(exc))
            return None
        found = running.which(observed, candidates)
        log.info("the data plane's loaded version, read over the socket", version=found,
                 candidates=len(candidates))
        return found

    async def _publish(self) -> None:
        """What the data plane runs, for predictions (module docstring)."""
        version = self._running
        desc = await asyncio.to_thread(self._description, version) if version is not None else None
        published = (Published(runtimeplans.Loaded.of(desc), version, ".".join(map(str, self.dataplane_version)))
                     if version is not None and desc is not None else None)
        body = published.as_dict() if published is not None else {"version": None}

        def write() -> None:
            tmp = self.promoter.output / f".{PUBLISHED}.tmp"
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(json.dumps(body, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(tmp, self.promoter.output / PUBLISHED)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            log.warning("what the data plane runs cannot be published", error=str(exc))
        if self.publish is not None:
            self.publish(published)

    async def _apply(self, promoted: Promoted) -> Applied:
        old = await asyncio.to_thread(self._description, self._running)
        new = await asyncio.to_thread(self._description, promoted.version)
        if new is None:
            return await self._reload(promoted, f"{promoted.version}/description.json cannot be read")
        files = await asyncio.to_thread(self._certificates, promoted.version, new)
        plan = runtimeplans.plan(old, new, dataplane_version=self.dataplane_version, files=files)
        prediction = predictions.Prediction.of(plan)
        planned_from = self._running if old is not None else ""
        if plan.action is runtimeplans.Action.NONE:
            self._running = promoted.version
            log.info("data plane already runs this version", version=promoted.version)
            return Applied(promoted.version, "none", prediction=prediction, planned_from=planned_from or "")
        if plan.action is runtimeplans.Action.RELOAD:
            return replace(await self._reload(promoted, "; ".join(plan.reasons[:3])), prediction=prediction,
                           planned_from=planned_from or "")
        mark = time.perf_counter()
        result = await runtimeapi.apply(plan, self.socket_path, files=files, timeout=self.timeout)
        metrics.RECONCILE_SECONDS.labels("runtime").observe(time.perf_counter() - mark)
        metrics.RUNTIME_COMMANDS.labels("ok").inc(result.applied)
        if not result.ok:
            metrics.RUNTIME_COMMANDS.labels("failed").inc()
            log.warning("runtime update failed; reloading", version=promoted.version, error=result.error,
                        applied=result.applied, of=len(plan.commands))
            return replace(await self._reload(promoted, f"runtime command failed: {result.error}"),
                           prediction=prediction, planned_from=planned_from or "")
        self._running = promoted.version
        log.info("applied at runtime", version=promoted.version, commands=len(plan.commands))
        return Applied(promoted.version, "runtime", result.applied, prediction=prediction,
                       planned_from=planned_from or "")

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
