"""Run the real console entry point in a subprocess (``python -m webhook``, this checkout first)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "ROUTEGATE_HAPROXY")}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**base, **extra}


def routegate(*args: str, stdin: str | None = None, timeout: float = 120, cwd: Path | None = None,
              **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True,
                          input=stdin if stdin is not None else "", timeout=timeout, env=env(**extra_env),
                          cwd=cwd or REPO)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed again when this returns)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
