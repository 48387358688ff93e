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
- the handler itself: the review timeout (webhook.server.servers).

Connections past ``max_connections`` are *answered*, not dropped: up to ``busy_connections`` more are
served one answer each, HTTP 503 with ``Retry-After`` ("busy", a call failure the apiserver hands to
the webhook's ``failurePolicy``, see webhook.server.reviews), and closed; only past both is a connection
closed right after its handshake, so the hard bound holds whatever the fd limit. A dropped connection
is worse than a 503 for the caller: Go's client reports it as a transport error with no reason, and
a request that was already sent may be retried blindly or not at all.

The cap is sized for the apiserver's client, which opens one HTTP/1.1 connection per call in flight
(Go's transport keeps no limit per host for it): the apiserver admits at most
``--max-requests-inflight`` + ``--max-mutating-requests-inflight`` requests at once (400 + 200 by
default, the seats of API Priority and Fairness), and only writes reach a validating webhook, so one
apiserver holds at most about 600 connections to one replica; 1,024 leaves room for a second
apiserver's share or a burst that outlives a connection. The defaults leave the apiserver's client
alone otherwise: its idle connections live 90 s (Go's ``IdleConnTimeout``), and the idle bound is
above that so the server never closes a connection the client is about to reuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import resource
import ssl
import time
from asyncio import sslproto
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

from webhook.server import reviews

log = structlog.get_logger("routegate")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RECEIVED = web.RequestKey("received", float)  # time.perf_counter() when the request began (see _Guard)
# Seconds its connection waited for its TLS handshake's turn, when that was past half the handshake bound
# (Handshakes): the review queue then refuses it at once on its guessed cost too (webhook.server.admission).
WAITED = web.RequestKey("waited", float)
LINGERING = 1.0  # aiohttp's default (10 s) would let a slow body hold the connection past its 408


MAX_CONNECTIONS = 1024
HANDSHAKES = 32  # TLS handshakes in progress at once (see Handshakes)
SLOT_SECONDS = 0.5  # how long one handshake holds its slot at most (a server-side handshake takes milliseconds)
TLS_READ_BUFFER = 32 * 1024  # bytes a TLS connection reads at a time (asyncio's default: 256 KiB)
SPARE_FDS = 256  # descriptors kept for everything else: haproxy -c pipes, scratch files, watches, logs


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = MAX_CONNECTIONS
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    idle_timeout: float = 100.0
    busy_connections: int = -1  # connections answered "busy" past the cap; -1: a quarter of the cap
    handshakes: int = HANDSHAKES  # TLS handshakes in progress at once

    @property
    def busy(self) -> int:
        return self.busy_connections if self.busy_connections >= 0 else max(self.max_connections // 4, 16)

    @property
    def hard(self) -> int:
        """Open connections at most: past this one is closed after its handshake without an answer."""
        return self.max_connections + self.busy


def descriptors_for(limits: ConnectionLimits) -> tuple[int, int]:
    """(needed, available): file descriptors the limits need, and the soft RLIMIT_NOFILE after raising
    it towards the hard limit (a container's default soft limit is often 1,024)."""
    needed = limits.hard + SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        wanted = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return needed, (needed if soft == resource.RLIM_INFINITY else soft)


def runner_options(limits: ConnectionLimits) -> dict[str, Any]:
    """The AppRunner options that go with these limits (aiohttp's own keep-alive and lingering)."""
    return {"keepalive_timeout": limits.idle_timeout, "lingering_time": LINGERING}


class _Phase(enum.Enum):
    WAITING = "idle"  # no request in progress: the next byte starts one
    HEADERS = "header"  # a request started; its headers are not complete yet
    HANDLING = "handling"  # the handler runs (reads the body within its own bound)


class Guards:
    """The live guarded connections of one listener, and counts of the ones cut, refused or answered
    busy."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._by_transport: dict[asyncio.BaseTransport, _Guard] = {}
        self._busy_open = 0  # live connections admitted past the cap (each gets one "busy" answer)
        self.cut: Counter[str] = Counter()  # "idle", "header", "body", "refused"; "busy": answered 503

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
            request[RECEIVED] = guard.began
            if guard.waited:
                request[WAITED] = guard.waited
            if guard.busy:
                # Past the cap: answered at once, its body left to aiohttp's lingering read, closed. A
                # connection under the cap is judged however long its handshake waited for its turn: its
                # budget counts from the accept, and the review queue refuses it ("could not decide")
                # when no run can finish it in time, at once for one that waited long (WAITED).
                self.cut["busy"] += 1
                response = unavailable(
                    f"routegate is busy: {self.limits.max_connections} connections are open "
                    f"(--max-connections); retry")
                response.force_close()
                return response
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
        self.busy = False  # admitted past the cap: its request is answered "busy" and it is closed
        self.waited = 0.0  # seconds it waited for its TLS handshake's turn, when past Handshakes.overdue
        # When the current request began (time.perf_counter): the first one at the accept, before the
        # TLS handshake, as the apiserver's timeout counts from its dial; a later one at its first byte.
        self.began = time.perf_counter()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        guards, limits = self.guards, self.guards.limits
        if len(guards) >= limits.hard:
            guards.cut["refused"] += 1
            transport.abort()
            return
        if len(guards) - guards._busy_open >= limits.max_connections:
            self.busy = True
            guards._busy_open += 1
        guards._by_transport[transport] = self
        self._passed = True
        self.inner.connection_made(transport)
        self._arm(self.guards.limits.header_timeout)

    def data_received(self, data: bytes) -> None:
        if self.phase is _Phase.WAITING:
            self.phase = _Phase.HEADERS
            if self.served:
                self.began = time.perf_counter()
            self._arm(self.guards.limits.header_timeout)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self.transport is not None and self.guards._by_transport.pop(self.transport, None) is not None:
            self.guards._busy_open -= self.busy
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


def unavailable(message: str) -> web.Response:
    """A call failure (HTTP 503, ``Retry-After``, a one-line reason): the apiserver hands the write to
    the webhook's ``failurePolicy``. Past the cap, and for every review that could not decide
    (webhook.server.servers)."""
    return web.json_response(reviews.call_failure(message), status=503,
                             headers={"Retry-After": str(reviews.RETRY_AFTER)})


def _peer(transport: asyncio.BaseTransport) -> str:
    peer: Any = transport.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)


class GuardedSite(web.BaseSite):
    """A TCP site (like ``web.TCPSite``) whose connections pass through :class:`Guards` and whose TLS
    handshake is bounded by the header timeout. The runner stops it at cleanup like any site."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, guards: Guards,
                 ssl_context: ssl.SSLContext | None = None, backlog: int | None = None) -> None:
        # The listen queue holds every connection the limits admit: an apiserver that opens one per call
        # opens hundreds at once, and a SYN past a full queue is dropped and retried by the client's
        # kernel after 1, 3, 7 s, which alone spends a 10 s review budget (the kernel caps it at
        # net.core.somaxconn).
        super().__init__(runner, ssl_context=ssl_context,
                         backlog=backlog if backlog is not None else max(128, guards.limits.hard))
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
        loop = asyncio.get_running_loop()
        guarded = self.guards.factory(server)
        context, bound = self._ssl_context, self.guards.limits.header_timeout
        handshakes = Handshakes(self.guards.limits.handshakes, overdue=bound / 2)

        def factory() -> asyncio.BaseProtocol:
            if context is None:
                return guarded()
            # What ``create_server(ssl=...)`` builds (a socket transport, asyncio's TLS protocol, the
            # application's), with a smaller read buffer and a turn for the handshake: see LeanTLS. No
            # waiter: asyncio's TLS layer checks for None.
            return LeanTLS(loop, guarded(), context, None, server_side=True, ssl_handshake_timeout=bound,
                           handshakes=handshakes)

        self._server = await loop.create_server(factory, self.host, self.port, backlog=self._backlog)


class Handshakes:
    """At most ``limit`` TLS handshakes in progress; the connections past it wait unread, in accept order.

    Without it a burst's handshakes advance in lockstep: the loop answers every ClientHello before any
    client's Finished, so no request is read until nearly all handshakes are done, and under a burst
    the server can spend a review's whole budget there. In order, the first connections' requests are
    judged while the later ones wait in the kernel's buffers (each still under the handshake bound)."""

    def __init__(self, limit: int, *, overdue: float) -> None:
        self.limit = limit
        self.overdue = overdue  # seconds waited for a turn past which a connection is told it waited (WAITED)
        self.running = 0
        self._waiting: deque[LeanTLS] = deque()

    def admit(self, tls: LeanTLS) -> bool:
        if self.running < self.limit:
            self.running += 1
            return True
        self._waiting.append(tls)
        return False

    def withdraw(self, tls: LeanTLS) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(tls)

    def release(self) -> None:
        self.running -= 1
        while self._waiting and self.running < self.limit:
            if self._waiting.popleft().proceed():
                self.running += 1


class LeanTLS(sslproto.SSLProtocol):
    """asyncio's TLS layer, reading into a 32 KiB buffer instead of its 256 KiB one, and taking its turn
    for the handshake (:class:`Handshakes`).

    The buffer is allocated (and zeroed, so resident) for every connection when it is accepted: with the
    cap sized for an apiserver that opens one connection per call, a burst of 1,000 held 250 MiB of
    read buffers alone. A TLS record carries at most 16 KiB, so two fit; a larger body is read in more
    turns, each as cheap as before."""

    max_size = TLS_READ_BUFFER

    def __init__(self, loop: asyncio.AbstractEventLoop, app_protocol: asyncio.BaseProtocol, *args: Any,
                 handshakes: Handshakes | None = None, **kwargs: Any) -> None:
        super().__init__(loop, app_protocol, *args, **kwargs)
        self._handshakes = handshakes
        self._guard = app_protocol
        self._accepted = time.perf_counter()
        self._turn = False  # holds one of the handshake slots
        self._slot: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # arms the handshake bound (from the accept); nothing is read yet
        if self._handshakes is None:
            return
        if self._handshakes.admit(self):
            self._take_turn()
        else:
            # Its ClientHello waits in the socket until a slot is free. Paused on the next loop turn: the
            # socket transport adds its reader by a callback scheduled before this one, and before Python
            # 3.11.4 that callback did not honour a pause made here (the reader was added anyway, the
            # connection read on and was judged without its turn).
            self._loop.call_soon(self._hold, transport)

    def _hold(self, transport: asyncio.BaseTransport) -> None:
        if self._turn or not isinstance(transport, asyncio.ReadTransport) or transport.is_closing():
            return  # its turn came meanwhile, or it is gone
        transport.pause_reading()

    def proceed(self) -> bool:
        """Its turn came: read on; False when the connection is gone meanwhile. One that waited past
        ``overdue`` says so to its request (WAITED)."""
        transport = self._transport
        if not isinstance(transport, asyncio.ReadTransport) or transport.is_closing():
            return False
        waited = time.perf_counter() - self._accepted
        if self._handshakes is not None and waited > self._handshakes.overdue and isinstance(self._guard, _Guard):
            self._guard.waited = waited
        self._take_turn()
        transport.resume_reading()
        return True

    def _take_turn(self) -> None:
        self._turn = True
        # A client that does not go on with its handshake keeps its slot only briefly: a few idle
        # connections must not hold everyone else's handshakes up to the bound.
        self._slot = self._loop.call_later(SLOT_SECONDS, self._give_turn_back)

    def _give_turn_back(self) -> None:
        self._slot = None
        if self._turn and self._handshakes is not None:
            self._turn = False
            self._handshakes.release()  # its handshake goes on, outside the count

    def _done(self) -> None:
        if self._slot is not None:
            self._slot.cancel()
            self._slot = None
        if self._handshakes is None:
            return
        if self._turn:
            self._turn = False
            self._handshakes.release()
        else:
            self._handshakes.withdraw(self)

    # asyncio.sslproto's hook at the end of every handshake, passed or failed (3.11 to 3.13)
    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        self._done()
        super()._on_handshake_complete(handshake_exc)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._done()
        super().connection_lost(exc)
