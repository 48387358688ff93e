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

What it runs is published for predictions (``webhook.gate.loadedindex``): ``OUTPUT/dataplane.json`` (the
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
import contextlib
import json
import os
import shlex
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import structlog

from haproxy_check.check import scratches
from haproxy_check.descriptions import Description
from haproxy_check.runtime import descriptionfiles, predictions, running, runtimeapi, runtimeplans
from haproxy_check.runtime.promotion import Promoted, Promoter
from webhook import metrics
from webhook.gate.loadedindex import Published
from webhook.reconcile.promotedmemory import SEEN_AT, PromotedMemory, observe_propagation

log = structlog.get_logger("routegate.reconcile")

TRIGGER_DIR = "reload"
PUBLISHED = "dataplane.json"  # what the data plane runs, for predictions (webhook.gate.loadedindex)
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
    # a reload put off until --min-reload-interval has passed since the last one: the data plane does not
    # run ``version`` yet (it will, or a later version will, when the interval ends)
    deferred: bool = False
    timings: dict[str, float] = field(default_factory=dict)  # plan, runtime, reload, publish (seconds)


class RuntimeApplier:
    """The ``on_promoted`` hook; see the module docstring.

    Reloads cannot storm: a reload the plan asks for less than ``min_reload_interval`` seconds after the
    previous one is put off to the end of the interval, and every reload asked for meanwhile is the same
    one, to the newest version then. A runtime plan never waits: it is applied at once, and when the
    newest version is reachable at runtime from what runs (an object flapped back), the pending reload is
    dropped."""

    updates_dataplane = True  # the reconciler leaves the propagation metric to this hook

    def __init__(self, promoter: Promoter, socket_path: str, *, dataplane_version: tuple[int, ...],
                 reload: Reload, timeout: float = runtimeapi.COMMAND_TIMEOUT,
                 publish: Callable[[Published | None], None] | None = None,
                 memory: PromotedMemory | None = None, min_reload_interval: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.promoter = promoter
        self.memory = memory if memory is not None else PromotedMemory()  # the reconciler's, when wired
        self.min_reload_interval = max(min_reload_interval, 0.0)
        self._clock = clock
        self._last_reload: float | None = None  # when the last reload was signalled
        self._deferred: asyncio.Task[None] | None = None  # the pending reload's timer
        self._deferred_to: tuple[Promoted, str, float | None] | None = None  # version, reason, first seen
        self._serial = asyncio.Lock()  # a deferred reload firing never interleaves with an apply
        self.reloads = 0  # signalled (for tests and the benchmark)
        # called once a deferred reload was signalled (the status writer says Programmed again)
        self.after_deferred: list[Callable[[], Awaitable[None]]] = []
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
        async with self._serial:
            if not self._started or self._running is None:
                learned = await self.learn()
                if not self._started:
                    self._running = learned or (previous.version if previous is not None else None)
                else:
                    self._running = learned
                self._started = True
            self.last = await self._apply(promoted)
            if self.last.deferred:
                return  # counted, published and timed when the reload is signalled
            self._done(self.last, SEEN_AT.get())
            await self._publish_timed(self.last)

    def _done(self, applied: Applied, seen_at: float | None) -> None:
        how = applied.action if not applied.error else "reload_failed"
        metrics.DATAPLANE_UPDATES.labels(how).inc()
        observe_propagation(how, seen_at)

    async def _publish_timed(self, applied: Applied) -> None:
        mark = time.perf_counter()
        await self._publish()
        applied.timings["publish"] = time.perf_counter() - mark
        metrics.RECONCILE_SECONDS.labels("publish").observe(applied.timings["publish"])

    def _defer(self, promoted: Promoted, reason: str, prediction: predictions.Prediction,
               planned_from: str) -> Applied | None:
        """Put a reload off while the last one is younger than the interval; None: reload now."""
        if self._last_reload is None or self.min_reload_interval <= 0:
            return None
        wait = self._last_reload + self.min_reload_interval - self._clock()
        if wait <= 0 and self._deferred is None:
            return None
        seen = SEEN_AT.get()
        if self._deferred_to is not None:  # the pending reload now takes the newest version
            first = self._deferred_to[2]
            seen = first if seen is None or (first is not None and first < seen) else seen
        self._deferred_to = (promoted, reason, seen)
        if self._deferred is None:
            self._deferred = asyncio.ensure_future(self._fire_after(max(wait, 0.0)))
        metrics.RELOADS_DEFERRED.inc()
        log.info("reload deferred: the last one is younger than --min-reload-interval", version=promoted.version,
                 seconds=round(max(wait, 0.0), 3), reason=reason)
        return Applied(promoted.version, "reload", reason=reason, prediction=prediction, planned_from=planned_from,
                       deferred=True)

    def _drop_deferred(self) -> None:
        if self._deferred is not None:
            self._deferred.cancel()
        self._deferred, self._deferred_to = None, None

    async def _fire_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        async with self._serial:
            if self._deferred_to is None or self._deferred is not asyncio.current_task():
                return
            promoted, reason, seen = self._deferred_to
            self._deferred, self._deferred_to = None, None
            applied = await self._reload(promoted, reason)
            self.last = replace(applied, prediction=self.last.prediction if self.last else None,
                                planned_from=self.last.planned_from if self.last else "")
            self._done(self.last, seen)
            await self._publish_timed(self.last)
        for hook in self.after_deferred:
            try:
                await hook()
            except Exception as exc:  # a status refresh failing never undoes the reload
                log.error("after-deferred-reload hook failed", error=repr(exc))

    async def close(self) -> None:
        """Stop a pending reload's timer (the process is ending; the next start plans from what runs)."""
        task = self._deferred
        self._drop_deferred()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

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
        found = await asyncio.to_thread(running.which, observed, candidates)  # seconds at 10,000 routes
        log.info("the data plane's loaded version, read over the socket", version=found,
                 candidates=len(candidates))
        return found

    async def _publish(self) -> None:
        """What the data plane runs, for predictions (module docstring)."""
        version = self._running
        desc = await self._description_of(version) if version is not None else None
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
        mark = time.perf_counter()
        timings: dict[str, float] = {}
        old = await self._description_of(self._running)
        new = await self._description_of(promoted.version)
        if new is None:
            return await self._reload(promoted, f"{promoted.version}/description.json cannot be read")
        kept = self.memory.get(promoted.version)
        files = (dict(kept.files) if kept is not None
                 else await asyncio.to_thread(self._certificates, promoted.version, new))
        # off the event loop (serve --reconcile answers admission reviews on it)
        plan = await asyncio.to_thread(runtimeplans.plan, old, new, dataplane_version=self.dataplane_version,
                                       files=files)
        prediction = predictions.Prediction.of(plan)
        planned_from = self._running if old is not None else ""
        timings["plan"] = time.perf_counter() - mark
        metrics.RECONCILE_SECONDS.labels("plan").observe(timings["plan"])
        if plan.action is not runtimeplans.Action.RELOAD:
            self._drop_deferred()  # the newest version is reachable without the reload that was pending
        if plan.action is runtimeplans.Action.NONE:
            self._running = promoted.version
            log.info("data plane already runs this version", version=promoted.version)
            return Applied(promoted.version, "none", prediction=prediction, planned_from=planned_from or "",
                           timings=timings)
        if plan.action is runtimeplans.Action.RELOAD:
            reason = "; ".join(plan.reasons[:3])
            deferred = self._defer(promoted, reason, prediction, planned_from or "")
            if deferred is not None:
                return replace(deferred, timings=timings)
            reloaded = await self._reload(promoted, reason)
            return replace(reloaded, prediction=prediction, planned_from=planned_from or "",
                           timings={**timings, **reloaded.timings})
        mark = time.perf_counter()
        result = await runtimeapi.apply(plan, self.socket_path, files=files, timeout=self.timeout)
        timings["runtime"] = time.perf_counter() - mark
        metrics.RECONCILE_SECONDS.labels("runtime").observe(timings["runtime"])
        metrics.RUNTIME_COMMANDS.labels("ok").inc(result.applied)
        if not result.ok:
            metrics.RUNTIME_COMMANDS.labels("failed").inc()
            log.warning("runtime update failed; reloading", version=promoted.version, error=result.error,
                        applied=result.applied, of=len(plan.commands))
            # at once, not deferred: what runs is in part the new version now
            reloaded = await self._reload(promoted, f"runtime command failed: {result.error}")
            return replace(reloaded, prediction=prediction, planned_from=planned_from or "",
                           timings={**timings, **reloaded.timings})
        self._running = promoted.version
        log.info("applied at runtime", version=promoted.version, commands=len(plan.commands))
        return Applied(promoted.version, "runtime", result.applied, prediction=prediction,
                       planned_from=planned_from or "", timings=timings)

    async def _reload(self, promoted: Promoted, reason: str) -> Applied:
        self._drop_deferred()  # this reload takes what was pending too
        mark = time.perf_counter()
        error = await self.reload.reload(promoted, reason)
        seconds = time.perf_counter() - mark
        metrics.RECONCILE_SECONDS.labels("reload").observe(seconds)
        if error:
            self._running = None  # what runs now is unknown: the next promotion reloads
            log.error("reload could not be signalled", version=promoted.version, how=self.reload.describe(),
                      error=error, reason=reason)
            return Applied(promoted.version, "reload", reason=reason, error=error, timings={"reload": seconds})
        self._running = promoted.version
        self._last_reload = self._clock()
        self.reloads += 1
        log.info("reload signalled", version=promoted.version, how=self.reload.describe(), reason=reason)
        return Applied(promoted.version, "reload", reason=reason, timings={"reload": seconds})

    async def _description_of(self, version: str | None) -> Description | None:
        """From memory when this process promoted ``version``; else its description.json."""
        kept = self.memory.get(version)
        if kept is not None:
            return kept.description
        return await asyncio.to_thread(self._description, version)

    def _description(self, version: str | None) -> Description | None:
        if version is None:
            return None
        kept = self.memory.get(version)
        if kept is not None:
            return kept.description
        try:
            return descriptionfiles.read(self.promoter.output / version)
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
