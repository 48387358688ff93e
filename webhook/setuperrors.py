"""The error every command turns into one line on stderr and exit 2: a setting that cannot be used.

Its own module, importing nothing, so that the CLI can catch it without importing the gate (about a
second of imports that a command failing on its flags, or on an unreachable cluster, must not pay).
"""

from __future__ import annotations


class SetupError(ValueError):
    """A setting or settings file that cannot be used; the CLI exits 2 with the message."""
