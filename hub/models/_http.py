"""The streaming chat request's HTTP/1.1 path: keep-alive connections on asyncio's
transports, responses parsed by httptools (llhttp, the parser aiohttp's own C parser is).

A turn is two model requests, and aiohttp's general client (its request object, headers
merged and checked per request, a task to write the body, a stream reader per response)
was about a quarter of a turn's CPU (docs/benchmarks/history.md). This path does only
what the chat request needs: one prebuilt request written in one call, the body handed on
as it is read, connections kept per loop and origin and reused while the server keeps
them. Errors are OSError subclasses and `ReadTimeout` (a `TimeoutError`), which
``_openai_errors.connection_error`` words as the SDK's. A proxy, a caller's SDK client or
any other request goes through aiohttp and the SDK as before.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

__all__ = ["Origin", "Response", "ReadTimeout", "Disconnected", "KEEPALIVE"]

KEEPALIVE = 15.0
"""Seconds an idle connection is kept for the next request (aiohttp's default): servers
close theirs after 5 to 120 s, and one older than this is not trusted to be open."""

_HIGH_WATER = 1 << 20  # bytes of body read but not yet taken before the socket is paused


class ReadTimeout(TimeoutError):
    """No byte of the response came for ``timeout`` seconds (the read timeout, as aiohttp's
    ``sock_read``: between two reads, not in all)."""

    def __init__(self) -> None:
        super().__init__("Timeout on reading data from socket")


class Disconnected(ConnectionError):
    """The server closed the connection before the response was complete."""


class Response:
    """One response as it is read: its status and raw headers once they came, then its body."""

    __slots__ = ("status", "raw_headers", "_conn")

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status = conn.parser.get_status_code()
        self.raw_headers = conn.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, a piece per network read (all that came since the last piece)."""
        conn = self._conn
        while True:
            if conn.body:
                yield conn.take()
                continue
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                return
            await conn.wait()

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.chunks()])


class _Connection(asyncio.Protocol):
    """A keep-alive connection: one request at a time, its response parsed as it comes."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.busy = True  # a request is on it (it is made for one)
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.stray = False  # a second response to one request: ignored, the connection retired
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.decoder: zlib._Decompress | None = None
        self.paused = False
        self.last_read = self.loop.time()
        self.timer: asyncio.TimerHandle | None = None
        self.timeout = 0.0

    # --- asyncio's protocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # bytes nobody asked for (after a whole response): never reused
            self.close()
            return
        self.last_read = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(Disconnected(f"the server's response is not HTTP/1.1: {e}"))
            self.close()
        if self.stray:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._stop_timer()
        if self.complete or self.error is not None:
            return
        if self.headers_done and not self._framed():
            self.on_message_complete()  # a body that ends with the connection (no length given)
            return
        self._fail(Disconnected(f"Server disconnected{f': {exc}' if exc else ''}"))

    def eof_received(self) -> bool | None:
        self.closed = True  # the server is done with it: never handed out again
        return None  # the transport closes; connection_lost follows

    def pause_writing(self) -> None:  # the request is one write; nothing waits for the drain
        pass

    def resume_writing(self) -> None:
        pass

    # --- httptools' callbacks ---------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.headers_done:
            self.stray = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.stray:
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.stray:
            return
        self.headers_done = True
        for name, value in self.headers:
            if name.lower() == b"content-encoding":
                coding = value.strip().lower()
                if coding in (b"gzip", b"x-gzip"):
                    self.decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
                elif coding == b"deflate":
                    self.decoder = zlib.decompressobj()
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self.stray:
            return
        if self.decoder is not None:
            try:
                body = self.decoder.decompress(body)
            except zlib.error as e:
                self._fail(Disconnected(f"the response's body cannot be decompressed: {e}"))
                self.close()
                return
        if not body:
            return
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True  # the reader is slower than the server: stop reading the socket
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.stray:
            return
        if self.decoder is not None:
            rest = self.decoder.flush()
            if rest:
                self.body.append(rest)
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # read now: llhttp resets it for the next message
        self._stop_timer()
        self._wake()

    # --- the reader's side ------------------------------------------------------------

    def take(self) -> bytes:
        body = self.body
        data = body.popleft() if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    async def wait(self) -> None:
        waiter = self.waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self.waiter = None

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self.error is None and not self.complete:
            self.error = error
        self._wake()

    def _framed(self) -> bool:
        """The response said how its body ends (a length or chunks), so EOF before it is a break."""
        return any(n.lower() in (b"content-length", b"transfer-encoding") for n, _ in self.headers)

    # --- the read timeout: one timer per ``timeout``, moved only when it is due -----------

    def start_timer(self, timeout: float) -> None:
        self.timeout = timeout
        if timeout:
            self.timer = self.loop.call_at(self.last_read + timeout, self._due)

    def _due(self) -> None:
        due = self.last_read + self.timeout
        if self.loop.time() < due:  # data came since: wait for the rest of the new interval
            self.timer = self.loop.call_at(due, self._due)
            return
        self.timer = None
        self._fail(ReadTimeout())
        self.close()  # a connection with a response half read is never reused

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def close(self) -> None:
        self.closed = True
        self._stop_timer()
        if self.transport is not None:
            self.transport.close()

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and self.error is None and not self.closed


class Origin:
    """The keep-alive connections to one scheme, host and port, on one event loop."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = None
        self._sweep: asyncio.TimerHandle | None = None

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()  # verified, as aiohttp's and the SDK's
        return self._ssl

    async def _connection(self, connect_timeout: float) -> _Connection:
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            transport = conn.transport
            alive = transport is not None and not transport.is_closing() and not conn.closed
            if alive and now - conn.idle_since < KEEPALIVE:
                conn._reset()
                conn.busy = True
                return conn
            conn.close()
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(connect_timeout or None):
            _, protocol = await loop.create_connection(
                lambda: _Connection(self),
                self.host,
                self.port,
                ssl=self._context() if self.tls else None,
                server_hostname=self.host if self.tls else None,
            )
        return protocol

    async def request(self, head: bytes, body: bytes, *, timeout: float) -> Response:
        """Send ``head`` (the request line and headers, without the blank line that ends
        them) and ``body``; the response once its headers came. ``timeout``: to connect,
        and between two reads. Release the response's connection with `release`."""
        conn = await self._connection(timeout)
        assert conn.transport is not None
        conn.transport.write(b"%s\r\nContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
        conn.start_timer(timeout)
        try:
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait()
        except BaseException:
            conn.close()
            raise
        return Response(conn)

    def release(self, response: Response) -> None:
        """The response's connection back to the pool when it is whole and the server keeps
        it; closed otherwise (a response left half read is never reused)."""
        conn = response._conn
        conn._stop_timer()
        if conn.reusable():
            conn.busy = False
            conn.idle_since = time.monotonic()
            self.idle.append(conn)
            if self._sweep is None:
                self._sweep = conn.loop.call_later(KEEPALIVE, self._swept)
        else:
            conn.close()

    def _swept(self) -> None:
        """Close what has been idle for `KEEPALIVE` seconds or the server closed: a burst of
        a thousand requests leaves no thousand sockets open after it."""
        self._sweep = None
        now = time.monotonic()
        kept = []
        for conn in self.idle:
            if conn.closed or now - conn.idle_since >= KEEPALIVE:
                conn.close()
            else:
                kept.append(conn)
        self.idle = kept
        if kept:
            self._sweep = asyncio.get_running_loop().call_later(KEEPALIVE, self._swept)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in self.idle:
            conn.close()
        self.idle.clear()
