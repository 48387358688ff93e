"""Checking a render with the real haproxy: scratch dir -> sandboxed ``haproxy -c`` -> traced alerts."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from haproxy_check.check import alerts, sandboxes, scratches, tlsbinds, warmstarts
from haproxy_check.check.sandboxes import Runner, RunOutput
from haproxy_check.results import CheckResult, HAProxyBinary, RenderResult

# A delta check's tree (a few dozen files, tens of KiB: under a millisecond into the page cache) is
# written on the event loop: a round trip to the worker thread costs more than that, and it lies on
# every review's path. A larger one (a batch, the whole state) goes to the thread.
INLINE_WRITE = 64 * 1024
INLINE_FILES = 64


class CheckTimedOut(RuntimeError):
    """haproxy -c did not finish before the deadline: the gate cannot decide (not a deny)."""


class Checker:
    def __init__(
        self,
        binary: HAProxyBinary,
        *,
        timeout: float = 5.0,
        concurrency: int = 2,
        scratch_base: Path | None = None,
        isolation: str = "auto",
        niceness: int = 0,
        warm: bool = False,
    ) -> None:
        self.binary = binary
        # warm: a small check in the memory base starts the next one ahead (haproxy_check.check.warmstarts)
        self.runner = Runner(binary.path, timeout=timeout, concurrency=concurrency, isolation=isolation,
                             niceness=niceness, warm=warm)
        self.scratch_base = scratch_base
        self.proven_tls = tlsbinds.ProvenBinds()

    @property
    def isolation(self) -> str:
        """How ``haproxy -c`` is kept off the network: sandboxes.NETWORK_NAMESPACE or NO_INIT_ADDR."""
        return self.runner.isolation

    async def _in_scratch(self, base: Path | None, files: Mapping[str, bytes], small: bool,
                          memory: bool = False) -> tuple[RunOutput, str]:
        if memory and base is not None and self.runner.warm:
            try:
                waiting = self.runner.take_waiting(base)
                if waiting is not None and not warmstarts.fits(waiting, files[warmstarts.CONFIG]):
                    warmstarts.discard(waiting)
                elif waiting is not None and (handed := await self._handed_over(waiting, files)) is not None:
                    return handed
            finally:
                # the pool is topped up once this review is answered (``top_up_soon``): its own check, and
                # what it computes meanwhile and after, are not slowed by it
                self.runner.top_up_later(base)
        # Removed after the check, off its path: haproxy has read every file by the time it exits.
        with scratches.scratch_dir(base, remove_after=True) as workdir:
            if small:
                scratches.write_tree(workdir, files)
            else:
                await asyncio.to_thread(scratches.write_tree, workdir, files)
            return await self.runner.run(workdir), str(workdir)

    async def _handed_over(self, waiting: warmstarts.Waiting, files: Mapping[str, bytes],
                           ) -> tuple[RunOutput, str] | None:
        """The check of ``files`` by a haproxy started ahead: every file but the configuration written into its
        directory, then the configuration handed to it; None when it died before it could read it."""
        config = files[warmstarts.CONFIG]
        try:
            scratches.write_tree(waiting.workdir, {k: v for k, v in files.items() if k != warmstarts.CONFIG})
            ready = await warmstarts.ready(waiting, within=self.runner.timeout)
        except BaseException:
            warmstarts.discard(waiting)
            raise
        if not ready:
            warmstarts.discard(waiting)
            return None
        try:
            return await self.runner.run_waiting(waiting, config), str(waiting.workdir)
        finally:
            scratches.remove_later(waiting.workdir)

    def top_up_soon(self) -> None:
        """A review using this checker is answered: checks taken ahead are replaced now
        (``Runner.top_up_soon``)."""
        self.runner.top_up_soon()

    async def check(self, render: RenderResult) -> CheckResult:
        files = render.files
        # Only the checked copy is rewritten (never promoted); every line keeps its number.
        rendered = files["haproxy.cfg"]
        stripped, proves = self.proven_tls.prepare(rendered, files)
        config = sandboxes.without_session_cache(rendered if stripped is None else stripped)
        if self.runner.isolation == sandboxes.NO_INIT_ADDR:
            config = sandboxes.without_address_lookups(config)
        if config is not files["haproxy.cfg"]:
            files = {**files, "haproxy.cfg": config}
        small = sum(map(len, files.values())) <= INLINE_WRITE and len(files) <= INLINE_FILES
        memory = scratches.memory_base() if self.scratch_base is None and small else None
        try:
            try:
                run, scratch = await self._in_scratch(memory or self.scratch_base, files, small,
                                                      memory=memory is not None)
            except OSError:
                if memory is None:
                    raise
                # A full (or vanished) /dev/shm must not leave the review undecided: the disk as before.
                run, scratch = await self._in_scratch(None, files, small)
        except scratches.UnsafeBase as exc:  # the base became writable by others after start
            return CheckResult(ok=False, binary=self.binary, decided=False, error=f"--scratch-dir: {exc}")
        except OSError as exc:  # scratch disk full or read-only, binary gone or not executable
            return CheckResult(ok=False, binary=self.binary, decided=False,
                               error=f"haproxy -c could not run: {exc.strerror or exc}"
                               + (f" ({Path(exc.filename).name})" if exc.filename else ""))
        if run.timed_out:
            raise CheckTimedOut(f"haproxy -c did not finish within {self.runner.timeout:g}s and was killed")
        found, warned = alerts.parse(
            run.output, config=render.config, origins=render.origins, scratch=scratch
        )
        undecided = alerts.undecided_reason(run.exit_code, run.output, found)
        if undecided is not None:
            return CheckResult(ok=False, binary=self.binary, warnings=tuple(warned), duration=run.duration,
                               exit_code=run.exit_code, decided=False, error=undecided)
        ok = not found  # a judgement: exit 1 with ALERTs, or a valid exit 0 / 2 (no listener)
        if proves and ok and not warned and run.exit_code == 0:
            self.proven_tls.learn(proves)
        return CheckResult(
            ok=ok, binary=self.binary, alerts=tuple(found), warnings=tuple(warned),
            duration=run.duration, timed_out=False, exit_code=run.exit_code,
        )
