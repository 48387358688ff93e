"""Checking a render with the real haproxy: scratch dir -> sandboxed ``haproxy -c`` -> traced alerts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from haproxy_check import alerts, scratches
from haproxy_check.results import Alert, CheckResult, HAProxyBinary, RenderResult
from haproxy_check.sandboxes import Runner


class CheckTimedOut(RuntimeError):
    """haproxy -c did not finish before the deadline: the gate cannot decide (not a deny)."""


class ScratchUnsafe(CheckTimedOut):
    """The scratch base became writable by others after start: no check runs there, and the gate cannot
    decide (a subclass of the timeout so every caller already answers "could not decide")."""


class Checker:
    def __init__(
        self,
        binary: HAProxyBinary,
        *,
        timeout: float = 5.0,
        concurrency: int = 2,
        scratch_base: Path | None = None,
    ) -> None:
        self.binary = binary
        self.runner = Runner(binary.path, timeout=timeout, concurrency=concurrency)
        self.scratch_base = scratch_base

    async def check(self, render: RenderResult) -> CheckResult:
        try:
            with scratches.scratch_dir(self.scratch_base) as workdir:
                await asyncio.to_thread(scratches.write_tree, workdir, render.files)
                run = await self.runner.run(workdir)
                scratch = str(workdir)
        except scratches.UnsafeBase as exc:
            raise ScratchUnsafe(f"--scratch-dir: {exc}") from None
        if run.timed_out:
            raise CheckTimedOut(f"haproxy -c did not finish within {self.runner.timeout:g}s and was killed")
        found, warned = alerts.parse(
            run.output, config=render.config, origins=render.origins, scratch=scratch
        )
        ok = run.exit_code == 0
        if not ok and not found:
            # A failure with no ALERT line we could read (a crash, a signal): say so without raw output.
            found = [Alert(message=f"haproxy -c failed with exit code {run.exit_code} and no readable alert")]
        return CheckResult(
            ok=ok, binary=self.binary, alerts=tuple(found) if not ok else (), warnings=tuple(warned),
            duration=run.duration, timed_out=False, exit_code=run.exit_code,
        )
