"""The settings a render reads (timeouts, ports, the access log, the ExternalAuth agent, limits): one
frozen value, checked once, that every part of the render engine may read.

Kept apart from ``rendering`` so the parts ``rendering`` composes (``servertls``, ``http/*``, ``l4/*``)
can read the settings without importing the engine that imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from haproxy_check import escaping
from validators.limits import Limits

__all__ = ["RenderSettings"]

# HAProxy's time format (a bare number is milliseconds); ``us`` rounds up to 1 ms here
_TIME = re.compile(r"([0-9]{1,10})(us|ms|s|m|h|d)?")
_UNIT_MS = {"us": 0, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_MAX_TIMEOUT_MS = 2_147_483_647


@dataclass(frozen=True, slots=True)
class RenderSettings:
    haproxy_version: tuple[int, ...] = (2, 8)
    debug_headers: bool = False
    dynamic_cookie_key: str = "routegate"
    external_auth: bool = True  # the SPOA hub external-auth plugin is enabled
    external_auth_plaintext: bool = True  # allow_plaintext = true
    # The SPOA hub's SPOP listener (IP:port) the ExternalAuth SPOE engine talks to, and how long a check
    # may take (SPOE "timeout processing"; past it the request is denied with 401).
    external_auth_agent: str = "127.0.0.1:12345"
    external_auth_timeout: str = "1s"
    # The access log's target: the words after `log` (e.g. "stdout format raw local0"). Set, the HTTP
    # frontends log JSON lines with gw_route (<namespace>_<name>_<ruleIndex> of the winning rule);
    # empty: no access log (HAProxy ignores a log-format without a log address).
    access_log: str = ""
    # Nameservers (IP:port) of the `resolvers routegate` section that resolves ExternalName Services at
    # run time; empty: the data plane's /etc/resolv.conf (parse-resolv-conf).
    dns_nameservers: tuple[str, ...] = ()
    timeout_connect: str = "5s"
    timeout_client: str = "30s"
    timeout_server: str = "30s"
    timeout_http_request: str = "10s"
    # Passthrough TLS listeners on an HTTPS port: a TCP frontend owns the port and reads the SNI; names no
    # passthrough route claims go on to the HTTPS frontend (bound on an internal socket). Off: such
    # passthrough listeners are not rendered (RG0517).
    share_https_with_passthrough: bool = True
    # Internal sockets behind an SNI split are "<prefix>-https-<port>" and "<prefix>-tlst-<port>"; abstract
    # sockets are per network namespace, so two data planes sharing one need different prefixes.
    internal_socket_prefix: str = "abns@routegate"
    # Per-Gateway isolation: a Gateway that shares an HTTP/HTTPS port with an older Gateway listens on a
    # dedicated pod port in [base, base + span) (haproxy_check/render/isolation.py; docs/ISOLATION.md).
    isolation_pod_port_base: int = 20000
    isolation_pod_port_span: int = 10000
    retry_non_idempotent: bool = False  # retry POST/PATCH/... too (HAProxy retries every method otherwise)
    http_port: int = 80  # the pod ports HTTP and HTTPS traffic arrives on (the chart's; TCP listeners keep off)
    https_port: int = 443
    system_ca_file: str = ""
    limits: Limits = field(default_factory=Limits)  # servers per backend, lines per route
    # Output for a running data plane (routegate reconcile): the master's admin socket, with the listeners'
    # file descriptors handed over on reload, and map/cert paths relative to haproxy.cfg, not the cwd.
    stats_socket: str = ""

    def check(self) -> None:
        """Raise ValueError naming the setting when a value cannot be rendered (each one is written into
        haproxy.cfg as one word)."""
        for name in ("timeout_connect", "timeout_client", "timeout_server", "timeout_http_request"):
            value = getattr(self, name)
            match = _TIME.fullmatch(value) if isinstance(value, str) else None
            if match is None:
                raise ValueError(f"{name}: {value!r} is not an HAProxy time (a whole number with ms, s, m, h "
                                 "or d, e.g. 30s)")
            if int(match[1]) * _UNIT_MS[match[2] or "ms"] > _MAX_TIMEOUT_MS:
                raise ValueError(f"{name}: {value!r} is above HAProxy's longest timeout, 2147483647ms (24.8 days)")
        if not self.dynamic_cookie_key:
            raise ValueError("dynamic_cookie_key: must not be empty (it keys the cookie values of every server)")
        escaping.check(self.dynamic_cookie_key, key=False, what="dynamic_cookie_key")
        escaping.check(self.system_ca_file, key=True, what="system_ca_file")  # one server-line word
        escaping.check(self.stats_socket, key=True, what="stats_socket")  # one global-line word
        escaping.check(self.internal_socket_prefix, key=True, what="internal_socket_prefix")
        for name in ("http_port", "https_port"):
            port = getattr(self, name)
            if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                raise ValueError(f"{name}: {port!r} is not a port from 1 to 65535")
        if self.http_port == self.https_port:
            raise ValueError(f"http_port and https_port are both {self.http_port}: one port cannot be both")

    def base_lines(self) -> tuple[str, ...]:
        return (f"timeout connect {self.timeout_connect}", f"timeout client {self.timeout_client}",
                f"timeout server {self.timeout_server}", f"timeout http-request {self.timeout_http_request}")
