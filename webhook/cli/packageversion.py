"""routegate's own version, from the installed package's metadata (``--version``, ``version`` output
and the reports that name the tool).

Apart from ``cli`` so that the commands it runs can name the version without importing the CLI.
"""

from __future__ import annotations


def routegate_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("routegate")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"
