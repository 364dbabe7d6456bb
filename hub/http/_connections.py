"""The HTTP endpoint's connection defences, under aiohttp's protocol: a deadline for each
request's headers, a cap on open connections that drops the oldest unproven one when full
(or answers 503 when none is), and aiohttp's malformed-request errors logged as the client's
mistake. The listener and the routes are in `hub.http`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from ._security import set_security_headers

# --- connections ----------------------------------------------------------------------


class _ProtocolLog(logging.LoggerAdapter):
    """aiohttp's logger for its protocol: a malformed request (its 400) is the client's
    mistake, logged in one line at INFO, not as the hub's error with a traceback."""

    def exception(self, msg: Any, *args: Any, exc_info: Any = True, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            first = (exc_info.message or "").splitlines()[:1]
            self.logger.info("%s: %s %s", msg % args, exc_info.code, first[0] if first else "")
            return
        self.logger.exception(msg, *args, exc_info=exc_info, **kw)


class _Handler(RequestHandler):
    """aiohttp's protocol, whose own error answers carry the security headers too: a request
    its parser refuses (a garbage request line, a 20 KB header, Content-Length with
    Transfer-Encoding) never reaches the app, so ``on_response_prepare`` never sees it."""

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        response = super().handle_error(request, status, exc, message)
        set_security_headers("/", response)  # the path of a request that did not parse means nothing
        return response


def handler_factory(server: web.Server, **kwargs: Any) -> Callable[[], RequestHandler]:
    """What makes each connection's `_Handler`, with the keywords ``server`` was built with."""
    loop = asyncio.get_running_loop()
    return lambda: _Handler(server, loop=loop, **kwargs)


class _Connection(asyncio.Protocol):
    """One client connection: aiohttp's protocol inside, with a deadline for each request's headers.

    ``proven`` is False while the client has shown nothing (its headers are not in, or its
    body is not verified yet): such a connection is the first to go when the endpoint is full.
    """

    def __init__(self, guard: _Guard, inner: RequestHandler) -> None:
        self.guard = guard
        self.inner = inner
        self.opened = time.monotonic()
        self.proven = False
        self.transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.guard.opened(self)
        self.inner.connection_made(transport)
        self.wait_for_request()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.disarm()
        self.guard.closed(self)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        self.inner.eof_received()  # aiohttp's handler returns None: close the transport
        return None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def wait_for_request(self) -> None:
        """The next request's headers must arrive within ``header_timeout``."""
        self.proven = False
        self.disarm()
        self._deadline = asyncio.get_running_loop().call_later(self.guard.header_timeout, self._expired)

    def disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        self.guard.timeouts += 1
        self.drop()

    def drop(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()


class _Refuse(asyncio.Protocol):
    """Answers a connection the full endpoint cannot take: 503, then close."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        body = b'{"error": "too many connections: try again shortly"}'
        resp = web.Response()
        set_security_headers("/", resp)
        security = "".join(f"{k}: {v}\r\n" for k, v in resp.headers.items() if k != "Content-Type")
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            f"{security}Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        transport.write(head.encode() + body)  # type: ignore[attr-defined]
        transport.close()


class _Guard:
    """The connections of one endpoint: a cap, header deadlines, and who goes when it is full."""

    def __init__(self, factory: Callable[[], RequestHandler], *, limit: int, header_timeout: float) -> None:
        self.factory = factory
        self.limit = limit
        self.header_timeout = header_timeout
        self.live: dict[RequestHandler, _Connection] = {}
        self.evicted = 0
        self.refused = 0
        self.timeouts = 0

    def __call__(self) -> asyncio.Protocol:
        if len(self.live) >= self.limit:
            unproven = [c for c in self.live.values() if not c.proven]
            if not unproven:
                self.refused += 1
                return _Refuse()
            oldest = min(unproven, key=lambda c: c.opened)
            self.evicted += 1
            oldest.drop()
            self.live.pop(oldest.inner, None)  # its slot is taken now; connection_lost follows
        return _Connection(self, self.factory())

    def opened(self, conn: _Connection) -> None:
        self.live[conn.inner] = conn

    def closed(self, conn: _Connection) -> None:
        if self.live.get(conn.inner) is conn:
            del self.live[conn.inner]

    def of(self, request: web.Request) -> _Connection | None:
        return self.live.get(request.protocol)
