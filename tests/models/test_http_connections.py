"""The chat request's own HTTP/1.1 path (hub/models/_http.py) against a server that answers
byte for byte as scripted: keep-alive kept and given up when it should be, every way a body
can be framed, a body compressed though not asked for, a server that breaks off or answers
with something that is not HTTP, and a reader slower than the server."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from hub.errors import ModelError
from hub.models import ModelRequest, Usage
from hub.models import _http as http
from hub.models._http import _HIGH_WATER, Origin, ReadTimeout
from hub.models.openai import OpenAIModel

Answer = Callable[[int, bytes], bytes | None]  # (request number, request) -> bytes to send, None: close


def sse(*texts: str) -> bytes:
    events = [b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % t.encode() for t in texts]
    return b"".join(events) + b"data: [DONE]\n\n"


def ok(body: bytes, *headers: str) -> bytes:
    head = "\r\n".join(["HTTP/1.1 200 OK", "Content-Type: text/event-stream", *headers])
    return head.encode() + b"\r\n\r\n" + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


class Scripted:
    """A loopback server: each request is answered by ``answer``; it counts connections."""

    def __init__(self, answer: Answer, *, close_after: Callable[[int], bool] = lambda n: False) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = self.answer(len(self.requests), request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after(len(self.requests)):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            for w in self.writers:
                w.close()
            server.close()
            await server.wait_closed()


async def ask(model: OpenAIModel) -> str:
    out = []
    async for piece in model.stream(ModelRequest(system="s", messages=[{"role": "user", "content": "hi"}])):
        if isinstance(piece, str):
            out.append(piece)
        else:
            assert isinstance(piece, Usage)
    return "".join(out)


async def test_content_length_chunked_and_read_to_close_bodies_all_arrive_whole() -> None:
    body = sse("one ", "two")
    answers = [
        ok(body, f"Content-Length: {len(body)}"),
        ok(chunked(body[:7], body[7:30], body[30:]), "Transfer-Encoding: chunked"),
        ok(body),  # no length: the body ends with the connection
    ]
    server = Scripted(lambda n, _: answers[n - 1], close_after=lambda n: n == 3)
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        assert [await ask(model) for _ in answers] == ["one two"] * 3
        assert model._lease.origin().idle == []  # the third's body ended with the connection
        await model.close()
    assert server.connections == 1  # the first two kept it for the next


async def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    body = sse("fresh")
    server = Scripted(lambda n, _: ok(body, f"Content-Length: {len(body)}"))
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        assert await ask(model) == "fresh"
        origin = model._lease.origin()
        (idle,) = origin.idle
        server.writers[0].close()  # the server's keep-alive timeout
        while not idle.closed:
            await asyncio.sleep(0.01)
        assert await ask(model) == "fresh"
        await model.close()
    assert server.connections == 2


async def test_connection_close_is_honoured() -> None:
    body = sse("bye")
    server = Scripted(lambda n, _: ok(body, f"Content-Length: {len(body)}", "Connection: close"))
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        assert [await ask(model), await ask(model)] == ["bye", "bye"]
        assert model._lease.origin().idle == []
        await model.close()
    assert server.connections == 2


async def test_a_gzip_body_sent_unasked_is_read_as_text() -> None:
    body = gzip.compress(sse("squeezed"))
    server = Scripted(lambda n, _: ok(body, f"Content-Length: {len(body)}", "Content-Encoding: gzip"))
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        assert await ask(model) == "squeezed"
        await model.close()


async def test_a_body_cut_off_fails_the_stream_retryably_and_its_connection_is_dropped() -> None:
    body = sse("never", "finished")
    server = Scripted(lambda n, _: ok(body[:40], f"Content-Length: {len(body)}"), close_after=lambda n: True)
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        with pytest.raises(ModelError, match="broke while reading") as e:
            await ask(model)
        assert e.value.retryable
        assert model._lease.origin().idle == []
        await model.close()


async def test_an_answer_that_is_not_http_is_a_clear_retryable_error() -> None:
    server = Scripted(lambda n, _: b"SSH-2.0-OpenSSH_9.2\r\n\r\n", close_after=lambda n: True)
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        with pytest.raises(ModelError, match="not HTTP/1.1") as e:
            await ask(model)
        assert e.value.retryable
        await model.close()


async def test_a_request_names_its_host_length_and_headers_once() -> None:
    body = sse("x")
    server = Scripted(lambda n, _: ok(body, f"Content-Length: {len(body)}"))
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="secret-key")
        await ask(model)
        await model.close()
    head, _, payload = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    names = [line.split(b":")[0].lower() for line in lines[1:]]
    assert sorted(names) == sorted(set(names)), "no header twice"
    port = url.split(":")[2].split("/")[0]
    assert f"Host: 127.0.0.1:{port}".encode() in lines
    assert f"Content-Length: {len(payload)}".encode() in lines
    assert b"Authorization: Bearer secret-key" in lines


async def test_a_slow_reader_pauses_the_socket_and_loses_nothing() -> None:
    big = b"x" * (3 * _HIGH_WATER)
    server = Scripted(lambda n, _: ok(big, f"Content-Length: {len(big)}"))
    async with server.serving() as url:
        origin = Origin(url)
        response = await origin.request(b"POST /v1 HTTP/1.1\r\nHost: x", b"{}", timeout=30)
        conn = response._conn
        while not conn.paused:  # nobody takes the body: reading stops at the high-water mark
            await asyncio.sleep(0.01)
        assert conn.buffered <= _HIGH_WATER + 65536 * 4
        assert await response.read() == big
        assert not conn.paused
        origin.release(response)
        assert origin.idle == [conn]
        origin.close()


async def test_no_byte_for_the_timeout_is_a_read_timeout_and_the_connection_is_closed() -> None:
    server = Scripted(lambda n, _: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
    async with server.serving() as url:
        origin = Origin(url)
        response = await origin.request(b"POST /v1 HTTP/1.1\r\nHost: x", b"{}", timeout=0.2)
        with pytest.raises(ReadTimeout):
            await response.read()
        origin.release(response)
        assert origin.idle == [] and response._conn.closed


async def test_idle_connections_are_closed_after_the_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "KEEPALIVE", 0.05)
    body = sse("x")
    server = Scripted(lambda n, _: ok(body, f"Content-Length: {len(body)}"))
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        await asyncio.gather(ask(model), ask(model), ask(model))  # three at once: three connections
        origin = model._lease.origin()
        conns = list(origin.idle)
        assert len(conns) == 3
        while origin.idle:  # the sweep closes them, with no request to notice
            await asyncio.sleep(0.01)
        assert all(c.closed for c in conns)
        await model.close()


def test_a_header_with_a_line_break_or_not_ascii_is_refused_by_name_not_value() -> None:
    for key in ("sk-abc\r\nX-Evil: 1", "sk-clé"):
        with pytest.raises(ValueError, match="'Authorization'") as e:
            OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key=key)
        assert key not in str(e.value)


async def test_bytes_after_a_whole_response_retire_the_connection() -> None:
    body = sse("once")
    whole = ok(body, f"Content-Length: {len(body)}")
    # the first request answered twice: in the same read, and in a read of its own
    server = Scripted(lambda n, _: whole + whole if n == 1 else whole)
    async with server.serving() as url:
        model = OpenAIModel("m", base_url=url, api_key="k")
        assert await ask(model) == "once"
        # a second response, in the first's read or in one of its own: the connection retired
        while any(not c.closed for c in model._lease.origin().idle):
            await asyncio.sleep(0.01)
        assert await ask(model) == "once"  # on a new connection
        (second,) = [c for c in model._lease.origin().idle if not c.closed]
        server.writers[1].write(whole)  # a response nobody asked for, on the idle connection
        while not second.closed:
            await asyncio.sleep(0.01)
        assert await ask(model) == "once"  # on a third connection, not the stray response
        await model.close()
    assert server.connections == 3
