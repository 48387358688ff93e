"""Argument types for the ``routegate`` parser: every flag is range-checked before anything runs.

A value the parser refuses exits 2 with one line naming the flag (argparse adds the flag's name to
the :class:`argparse.ArgumentTypeError` message). Nothing here imports more than the standard library,
so ``routegate --help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``routegate check: ...; see --help``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def nonnegative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text}")
    return value


def host_port(text: str) -> str:
    """``HOST:PORT`` (``[::1]:8443``, ``:8443`` for all addresses); the value is kept as given."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT with a port from 1 to 65535")
    if host.startswith("[") != host.endswith("]"):
        raise argparse.ArgumentTypeError(f"{text!r}: an IPv6 address goes in brackets, e.g. [::1]:8443")
    return text


def existing_dir(text: str) -> str:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


def existing_path(text: str) -> str:
    """A file or directory that exists (``-`` is stdin)."""
    if text != "-" and not Path(text).exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or directory")
    return text


def readable_file(text: str) -> str:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file" if not path.exists() else f"{text}: not a file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


def dns_name(text: str) -> str:
    """A DNS name for a certificate SAN (checked by the same function that writes the certificate)."""
    from certs import generation  # cryptography is heavy: only when the flag is given

    try:
        generation.check_dns_name(text)
    except generation.CertError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def namespace(text: str) -> str:
    """A namespace name: a DNS label (lowercase letters, digits and -, at most 63), as the API server wants."""
    import re

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name (a DNS label: lowercase letters, "
                                         "digits and -, at most 63)")
    return text


def kinds(text: str) -> frozenset[str]:
    """A comma-separated list of kinds (``Secret,ConfigMap``)."""
    names = frozenset(k.strip() for k in text.split(",") if k.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of kinds, e.g. Secret,ConfigMap")
    return names


COLOUR_MODES = ("auto", "always", "never")


def colour_wanted(stream: object = None, mode: str = "auto") -> bool:
    """``--color``: ``always`` and ``never`` say it; ``auto`` (the default) follows the environment
    the way CPython's own ``_colorize.can_colorize`` does: never with ``NO_COLOR`` set
    (https://no-color.org), always with ``FORCE_COLOR`` set (https://force-color.org), never on
    ``TERM=dumb``, else only on a terminal. A flag on the command line outranks the environment."""
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR", "") != "":
        return False
    if os.environ.get("FORCE_COLOR", "") != "":
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    out = stream if stream is not None else sys.stdout
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False
