"""Apply a runtime plan over HAProxy's stats socket, checking every answer.

One connection per command (the CLI's non-interactive mode answers and closes), so every answer is
exactly that command's. The first answer that is not the expected one stops the apply: the result
names the command and the answer, and the caller falls back to a reload (seed 000: "If a runtime
operation fails, the agent attempts a reload"). Commands already applied are not undone; the reload
that follows replaces the whole running state anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from haproxy_check.runtime.runtimeplans import Action, Command, Plan, UnsafeValue, pem_payload

COMMAND_TIMEOUT = 10.0
RETRY_PAUSE = 0.1
MAX_ANSWER = 1 << 20


class SocketError(Exception):
    """The socket could not be reached or did not answer in time."""


@dataclass(frozen=True, slots=True)
class Answer:
    command: str  # as printed (payloads left out)
    answer: str
    ok: bool


@dataclass(frozen=True, slots=True)
class ApplyResult:
    ok: bool
    answers: tuple[Answer, ...] = ()
    error: str = ""  # why it stopped: the failing command and its answer, or a socket error

    @property
    def applied(self) -> int:
        return sum(1 for a in self.answers if a.ok)


async def send(socket_path: str, line: str, payload: tuple[str, ...] = (), *,
               timeout: float = COMMAND_TIMEOUT, limit: int = MAX_ANSWER) -> str:
    """One command (with its ``<<`` payload) on the socket; the answer text (at most about ``limit`` bytes).

    ``socket_path``: a unix socket path, or ``HOST:PORT`` / ``ipv4@HOST:PORT`` for a TCP stats socket."""
    answer = await send_bytes(socket_path, line, payload, timeout=timeout, limit=limit)
    return answer.decode(errors="replace")


async def send_bytes(socket_path: str, line: str, payload: tuple[str, ...] = (), *,
                     timeout: float = COMMAND_TIMEOUT, limit: int = MAX_ANSWER) -> bytearray:
    """``send``'s answer as the socket sent it, undecoded: a reader that takes it a line at a time (``show
    map`` of a million entries, ``haproxy_check.runtime.running``) holds one copy of it, not two."""
    if "\n" in line or "\r" in line:
        raise UnsafeValue(f"command {line!r} has a line break")
    data = line + (" <<\n" + "\n".join(payload) + "\n\n" if payload else "\n")

    async def exchange() -> bytearray:
        if "/" not in socket_path and ":" in socket_path:
            host, _, port = socket_path.removeprefix("ipv4@").rpartition(":")
            reader, writer = await asyncio.open_connection(host, int(port))
        else:
            reader, writer = await asyncio.open_unix_connection(socket_path)
        try:
            writer.write(data.encode())
            await writer.drain()
            # one growing buffer, not chunks joined: a ``show map`` of a large configuration is tens of
            # MiB, and chunks + their join + the text were three copies of it at once
            answer = bytearray()
            while chunk := await reader.read(65536):
                answer += chunk
                if len(answer) > limit:
                    break
            return answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    try:
        return await asyncio.wait_for(exchange(), timeout)
    except (TimeoutError, OSError) as exc:
        raise SocketError(f"stats socket {socket_path}: {exc or type(exc).__name__}") from exc


def _line(command: Command, version: str | None) -> str:
    if not command.versioned:
        return command.line
    if version is None:
        raise UnsafeValue(f"{command.text()} needs the version of a preceding prepare map")
    verb, _, rest = command.line.partition(" ")
    verb2, _, rest = rest.partition(" ")
    return f"{verb} {verb2} @{version} {rest}"


async def apply(plan: Plan, socket_path: str, *, files: Mapping[str, bytes] | None = None,
                timeout: float = COMMAND_TIMEOUT) -> ApplyResult:
    """Send ``plan``'s commands in order; stop at the first unexpected answer.

    ``files``: the render's files, for commands whose payload is a file the planner was not given."""
    if plan.action is Action.RELOAD:
        return ApplyResult(False, (), "the plan is a reload: " + "; ".join(plan.reasons[:3]))
    answers: list[Answer] = []
    version: str | None = None
    for command in plan.commands:
        try:
            payload = command.payload
            if not payload and command.payload_file:
                if files is None or command.payload_file not in files:
                    raise UnsafeValue(f"the contents of {command.payload_file} were not given")
                payload = pem_payload(files[command.payload_file], what=command.payload_file)
            line = _line(command, version)
            answer, ok = await _until_expected(socket_path, line, payload, command, timeout)
        except (UnsafeValue, SocketError) as exc:
            answers.append(Answer(command.text(), str(exc), False))
            return ApplyResult(False, tuple(answers), f"{command.text()}: {exc}")
        answers.append(Answer(command.text(), answer, ok))
        if not ok:
            return ApplyResult(False, tuple(answers), f"{command.text()}: HAProxy answered {answer!r}")
        if command.captures_version:
            match = re.search(command.expect, answer)
            version = match.group(1) if match else None
    return ApplyResult(True, tuple(answers))


async def _until_expected(socket_path: str, line: str, payload: tuple[str, ...], command: Command,
                          timeout: float) -> tuple[str, bool]:
    deadline = time.monotonic() + command.retry
    while True:
        answer = (await send(socket_path, line, payload, timeout=timeout)).strip()
        ok = re.search(command.expect, answer) is not None
        if ok or time.monotonic() >= deadline:
            return answer, ok
        await asyncio.sleep(RETRY_PAUSE)
