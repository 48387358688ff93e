"""Listener and TLSRoute shapes that attach nowhere or are dropped (seed 004, rule 11).

These are warnings: the API server accepts them and the gateway keeps running, but the listener or
route silently does nothing, which is what a user most needs to hear at apply time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from validators import codes, tlsmodes
from validators.contexts import Context
from validators.findings import Finding, Severity
from validators.objects import Obj, as_list, as_map, dig


def tlsroute_hostnames(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """A TLSRoute routes by SNI; without hostnames it attaches nowhere."""
    if not as_list(dig(obj, "spec", "hostnames")):
        yield Finding(
            codes.TLSROUTE_HOSTNAMES,
            "Required value: a TLSRoute needs at least one hostname (routing is by SNI); without one it "
            "attaches to no listener",
            ("spec", "hostnames"),
            Severity.WARN,
        )


def _listeners(obj: Obj) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for i, listener in enumerate(as_list(dig(obj, "spec", "listeners"))):
        if isinstance(listener, Mapping):
            yield i, listener


def tcp_ports(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """A TCP listener on the chart's HTTP or HTTPS port would bind twice, so it is dropped."""
    for i, listener in _listeners(obj):
        port = listener.get("port")
        if listener.get("protocol") == "TCP" and port in ctx.http_ports:
            yield Finding(
                codes.TCP_PORT_TAKEN,
                f"TCP listener on port {port} is dropped: the port is the gateway's HTTP/HTTPS port "
                f"({', '.join(str(p) for p in ctx.http_ports)}); choose another port",
                ("spec", "listeners", i, "port"),
                Severity.WARN,
            )


def tls_modes(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Passthrough and Terminate TLS listeners on one port with overlapping hostnames are a protocol
    conflict (distinct hostnames render through one SNI split: validators.tlsmodes)."""
    ports: dict[Any, list[tuple[int, str, str | None]]] = {}
    for i, listener in _listeners(obj):
        if listener.get("protocol") != "TLS":
            continue
        mode = as_map(listener.get("tls")).get("mode") or "Terminate"
        port, host = listener.get("port"), listener.get("hostname")
        if isinstance(port, int) and isinstance(mode, str):
            ports.setdefault(port, []).append((i, mode, host if isinstance(host, str) else None))
    for port, group in sorted(ports.items()):
        for i, mode, host in group:
            if not tlsmodes.conflicted(mode, host, [(m, h) for _, m, h in group]):
                continue
            yield Finding(
                codes.TLS_MODE_CONFLICT,
                f"port {port} has Passthrough and Terminate TLS listeners whose hostnames overlap (this one "
                f"is {mode}, hostname {host or 'unset: every name'}): a protocol conflict, so no route "
                "attaches to either; give them distinct hostnames or separate ports",
                ("spec", "listeners", i, "tls", "mode"),
                Severity.WARN,
            )


def pod_ports(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """A listener may not declare a port of the isolated Gateways' pod-port range: the assignment
    (``validators.views.podports``) relies on no listener taking one, so that a new listener cannot bind
    the pod port an existing Gateway's Service targets."""
    for i, listener in _listeners(obj):
        port = listener.get("port")
        if port in ctx.pod_ports:
            yield Finding(
                codes.POD_PORT_RESERVED,
                f"port {port} is within {ctx.pod_ports}, the pod ports of isolated Gateways (each Gateway "
                "sharing an HTTP/HTTPS port with an older one is reached on one of them); choose a port outside "
                "that range",
                ("spec", "listeners", i, "port"),
                Severity.DENY,
            )
