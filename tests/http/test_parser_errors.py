"""Requests aiohttp's parser refuses still get the security headers, and a client that hangs
up mid-body is logged in one line, not as the hub's error with a traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping

import pytest

from hub import Extension, Hub, HubConfig, Route, RouteAnswer, RouteRequest
from hub.config import HttpSection
from hub.http._security import API_CSP

HEADERS = {
    b"content-security-policy": API_CSP.encode(),
    b"x-frame-options": b"DENY",
    b"x-content-type-options": b"nosniff",
    b"server": b"hub",
}


class Stamped:
    """A verifier that takes any headers with a stamp: the body is what it waits for."""

    def headers(self, headers: Mapping[str, str]) -> str | None:
        return None if headers.get("X-Stamp") else "X-Stamp is missing"

    def body(self, headers: Mapping[str, str], body: bytes) -> str | None:
        return None


async def ignore(request: RouteRequest) -> RouteAnswer | None:
    return None


@pytest.fixture
async def hub(config: HubConfig, make_chat_hub) -> AsyncIterator[Hub]:
    config.http = HttpSection(port=0, max_body=100_000, body_timeout=30)
    route = Route("/signed/events", ignore, verify=Stamped())
    async with make_chat_hub(extra=[Extension(name="signed", routes=[route])]) as hub:
        yield hub


async def exchange(port: int, raw: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head = answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    fields = dict(line.split(b": ", 1) for line in head[1:])
    return head[0], {k.lower(): v for k, v in fields.items()}


@pytest.mark.parametrize(
    "raw",
    [
        b"\x16\x03\x01garbage that is no request line\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n",
        b"POST /webhooks/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
    ids=["garbage-line", "20kb-header", "length-and-chunked"],
)
async def test_a_request_the_parser_refuses_gets_400_with_the_security_headers(hub: Hub, raw: bytes) -> None:
    assert hub.http is not None and hub.http.port
    status, headers = await exchange(hub.http.port, raw)
    assert b" 400 " in status
    for name, value in HEADERS.items():
        assert headers.get(name) == value, (name, headers)


async def test_a_client_that_hangs_up_mid_body_is_one_line(hub: Hub, caplog: pytest.LogCaptureFixture) -> None:
    assert hub.http is not None and hub.http.port
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", hub.http.port)
        writer.write(b"POST /signed/events HTTP/1.1\r\nHost: x\r\nX-Stamp: 1\r\nContent-Length: 5000\r\n\r\npart")
        await writer.drain()
        writer.transport.abort()
    async with asyncio.timeout(10):
        while len(lost := [r for r in caplog.records if "hung up" in r.getMessage()]) < 3:
            await asyncio.sleep(0.01)
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in lost)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
