"""Endpoint and server addresses read without ipaddress for a dotted quad are what ipaddress reads and writes."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check import escaping
from haproxy_check.render import endpoints

_PARTS = st.sampled_from(["0", "1", "9", "10", "99", "100", "255", "256", "999", "1000", "00", "01", "010", "-1",
                          "+1", " 1", "1 ", "\u0661", "", "0x1", "1e2"])


def _by_ipaddress(text: str) -> tuple[int, int, str] | None:
    ip = endpoints._ip(text)
    return None if ip is None else (ip.version, int(ip), str(ip))


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_PARTS, min_size=1, max_size=5), sep=st.sampled_from([".", ":", ". "]),
       tail=st.sampled_from(["", "\n", "%eth0", "/24"]))
def test_dotted_quads_read_as_ipaddress_reads_them(parts: list[str], sep: str, tail: str) -> None:
    text = sep.join(parts) + tail
    endpoints._parsed.cache_clear()
    assert endpoints._parsed(text) == _by_ipaddress(text)


def test_typical_addresses() -> None:
    for text in ("10.0.0.1", "0.0.0.0", "255.255.255.255", "192.168.1.10", "010.0.0.1", "10.0.0.256", "fd00::1"):
        endpoints._parsed.cache_clear()
        assert endpoints._parsed(text) == _by_ipaddress(text), text


def _server_address_by_ipaddress(text: str) -> str:
    """``escaping.server_address`` as it was: every address through ipaddress."""
    escaping.check(text, key=True, what="server address")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return escaping.ident(text, what="server address")
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is not None:
        raise escaping.Unsafe("zone")
    return f"[{ip}]" if ip.version == 6 else str(ip)


def _outcome(write: Callable[[str], str], text: str) -> str:
    try:
        return "ok " + write(text)
    except escaping.Unsafe:
        return "unsafe"


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_PARTS, min_size=1, max_size=5), sep=st.sampled_from([".", ":", ". "]),
       tail=st.sampled_from(["", "\n", "%eth0", "/24", "::1"]))
def test_server_addresses_are_those_ipaddress_writes(parts: list[str], sep: str, tail: str) -> None:
    text = sep.join(parts) + tail
    assert _outcome(escaping.server_address, text) == _outcome(_server_address_by_ipaddress, text)
