"""Bounds on what a slow or idle client can hold: connection cap, header, body and idle timeouts.

aiohttp's server has a keep-alive timeout but nothing that bounds a connection before its first
request, nor a request whose headers trickle in one byte at a time: by default a client may hold
a connection (and a file descriptor) for as long as it likes. So each accepted connection gets a
small guard protocol in front of aiohttp's own, with one timer whose meaning follows the request:

- TLS handshake: at most ``header_timeout`` (asyncio's ``ssl_handshake_timeout``);
- from the handshake (or the end of the last response) to the first byte of a request: at most
  ``header_timeout`` for the first request, ``idle_timeout`` between keep-alive requests;
- from the first byte of a request to its complete headers (the handler starts): ``header_timeout``;
- the body: ``body_timeout`` from the handler's start (enforced where the body is read, a 408),
  then at most LINGERING seconds in which aiohttp reads and drops what is left of it;
- the handler itself: the review timeout (webhook.servers).

A connection past ``max_connections`` is closed right after its handshake, so the cap holds whatever
the fd limit. The defaults leave the apiserver's client alone: its idle connections live 90 s (Go's
``IdleConnTimeout``), and the idle bound is above that so the server never closes a connection the
client is about to reuse.
"""

from __future__ import annotations

import asyncio
import enum
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

log = structlog.get_logger("routegate")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LINGERING = 1.0  # aiohttp's default (10 s) would let a slow body hold the connection past its 408


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 256
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    idle_timeout: float = 100.0


def runner_options(limits: ConnectionLimits) -> dict[str, Any]:
    """The AppRunner options that go with these limits (aiohttp's own keep-alive and lingering)."""
    return {"keepalive_timeout": limits.idle_timeout, "lingering_time": LINGERING}


class _Phase(enum.Enum):
    WAITING = "idle"  # no request in progress: the next byte starts one
    HEADERS = "header"  # a request started; its headers are not complete yet
    HANDLING = "handling"  # the handler runs (reads the body within its own bound)


class Guards:
    """The live guarded connections of one listener, and counts of the ones cut or refused."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._by_transport: dict[asyncio.BaseTransport, _Guard] = {}
        self.cut: Counter[str] = Counter()  # "idle", "header", "body", "refused"

    def __len__(self) -> int:
        return len(self._by_transport)

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guard(inner(), self)

    def of(self, request: web.Request) -> _Guard | None:
        transport = request.transport
        return None if transport is None else self._by_transport.get(transport)

    def install(self, app: web.Application) -> None:
        """Tell the guards when a request's headers are complete and when its response starts."""
        app.middlewares.append(self._headers_complete)
        app.on_response_prepare.append(self._responding)

    @web.middleware
    async def _headers_complete(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        guard = self.of(request)
        if guard is not None:
            guard.enter(_Phase.HANDLING)
        return await handler(request)

    async def _responding(self, request: web.Request, response: web.StreamResponse) -> None:
        guard = self.of(request)
        if guard is not None:
            guard.enter(_Phase.WAITING)


class _Guard(asyncio.Protocol):
    """Sits between the transport and aiohttp's RequestHandler; passes everything through."""

    def __init__(self, inner: asyncio.Protocol, guards: Guards) -> None:
        self.inner = inner
        self.guards = guards
        self.transport: asyncio.Transport | None = None
        self.phase = _Phase.WAITING
        self.served = 0
        self._timer: asyncio.TimerHandle | None = None
        self._passed = False  # the inner protocol saw connection_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if len(self.guards) >= self.guards.limits.max_connections:
            self.guards.cut["refused"] += 1
            transport.abort()
            return
        self.guards._by_transport[transport] = self
        self._passed = True
        self.inner.connection_made(transport)
        self._arm(self.guards.limits.header_timeout)

    def data_received(self, data: bytes) -> None:
        if self.phase is _Phase.WAITING:
            self.phase = _Phase.HEADERS
            self._arm(self.guards.limits.header_timeout)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self.transport is not None:
            self.guards._by_transport.pop(self.transport, None)
        if self._passed:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def enter(self, phase: _Phase) -> None:
        self.phase = phase
        if phase is _Phase.HANDLING:
            self._cancel()
        elif phase is _Phase.WAITING:
            self.served += 1
            self._arm(self.guards.limits.idle_timeout)

    def _arm(self, seconds: float) -> None:
        self._cancel()
        self._timer = asyncio.get_running_loop().call_later(seconds, self._expire, self.phase)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self, phase: _Phase) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        what = phase.value
        self.guards.cut[what] += 1
        log.info("connection cut", reason=f"{what} timeout", peer=_peer(self.transport))
        self.transport.abort()


def _peer(transport: asyncio.BaseTransport) -> str:
    peer: Any = transport.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)


class GuardedSite(web.BaseSite):
    """A TCP site (like ``web.TCPSite``) whose connections pass through :class:`Guards` and whose TLS
    handshake is bounded by the header timeout. The runner stops it at cleanup like any site."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, guards: Guards,
                 ssl_context: ssl.SSLContext | None = None, backlog: int = 128) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self.host, self.port, self.guards = host, port, guards

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def bound_port(self) -> int:
        sockets = getattr(self._server, "sockets", None) or ()
        return int(sockets[0].getsockname()[1]) if sockets else self.port

    async def start(self) -> None:
        await super().start()  # registers the site with the runner
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self.guards.factory(server), self.host, self.port, ssl=self._ssl_context, backlog=self._backlog,
            ssl_handshake_timeout=self.guards.limits.header_timeout if self._ssl_context else None,
        )
