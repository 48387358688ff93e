"""What the data plane's HAProxy version accepts, and how the checker's version relates to it.

The checker (``haproxy -c``) and the data plane may run different HAProxy versions (the pip install
checks with 2.8, production data planes run 3.x). The render emits only what both accept: a line
only the data plane knows would be refused by the checker, a line only the checker knows would be
refused by the data plane. Every version-dependent keyword of the render is listed here, with the
first version that accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping

Version = tuple[int, ...]

#: HTTP statuses ``retry-on`` accepts, each with the first HAProxy version that knows it (checked
#: against the 2.8 and 3.2 binaries: 2.8 refuses 421 and 429 as "unknown keyword"; both arrived in 3.1,
#: haproxy/haproxy#2687 and #2794). 2.8 is the oldest version routegate renders for.
RETRY_CODES_SINCE: Mapping[int, Version] = {
    401: (2, 4), 403: (2, 4), 404: (2, 0), 408: (2, 0), 421: (3, 1), 425: (2, 0), 429: (3, 1),
    500: (2, 0), 501: (2, 0), 502: (2, 0), 503: (2, 0), 504: (2, 0),
}

#: ``guid`` on proxies and servers (stable object identity across reloads) exists since 3.0.
GUID_SINCE: Version = (3, 0)


def text(version: Version) -> str:
    return ".".join(str(v) for v in version) or "unknown"


def major_minor(version: Version) -> Version:
    return tuple(version[:2])


def target(checker: Version, dataplane: Version | None) -> Version:
    """The version the render writes for: the older of the checker's and the data plane's (major.minor
    decides every keyword in the tables above)."""
    if dataplane is None or not dataplane:
        return tuple(checker)
    if not checker:
        return tuple(dataplane)
    return min(major_minor(checker), major_minor(dataplane))


def retry_codes(version: Version) -> frozenset[int]:
    """The statuses ``retry-on`` of HAProxy ``version`` accepts."""
    return frozenset(code for code, since in RETRY_CODES_SINCE.items() if major_minor(version) >= since)


def mismatch(checker: Version, dataplane: Version | None) -> str:
    """A warning when the checker's major.minor is not the data plane's; "" when they agree or the data
    plane's version was not given (then :func:`assumed` says so)."""
    if dataplane is None or not checker or major_minor(checker) == major_minor(dataplane):
        return ""
    return (f"checked with HAProxy {text(major_minor(checker))}, data plane {text(major_minor(dataplane))}: "
            f"only what both accept is rendered, and a data plane {text(major_minor(dataplane))} may judge "
            "some lines differently (run the checker at the data plane's version)")


def assumed(checker: Version, dataplane: Version | None) -> str:
    """The note when no data plane version was given: the checker's is assumed."""
    if dataplane is not None:
        return ""
    return (f"data plane HAProxy version not set (--dataplane-version): assumed the checker's "
            f"{text(major_minor(checker))}")
