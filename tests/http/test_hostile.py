"""The HTTP endpoint under hostile and broken input, on loopback: poison bodies, undecodable
credentials, replays, slow clients, a failing store. Every answer is a 2xx or a 4xx (or the
documented 503), and the hub goes on answering."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from hub import Hub, HubConfig
from hub.config import HttpSection, WebhookSection
from hub.errors import StoreError
from hub.http import signature
from hub.logs import InputLog
from hub.store import InMemoryInbox
from tests._support.chat import Said

from .test_server import SECRET, no_runs, signed

BEARER = {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"}


@pytest.fixture
def http_config(config: HubConfig) -> HubConfig:
    config.http = HttpSection(port=0, max_body=4_000_000, header_timeout=1.0, body_timeout=1.0)
    config.webhooks = {
        "deploys": WebhookSection(context="test:chat:42", secret=SECRET),
        "strict": WebhookSection(context="test:chat:7", secret=SECRET, require_timestamp=True),
    }
    return config


@pytest.fixture
async def served(http_config: HubConfig, make_chat_hub) -> AsyncIterator[tuple[Hub, aiohttp.ClientSession, str]]:
    async with make_chat_hub() as hub:
        assert hub.http is not None and hub.http.port
        async with aiohttp.ClientSession() as session:
            yield hub, session, f"http://127.0.0.1:{hub.http.port}"


async def raw_request(port: int, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """One request written byte for byte (headers aiohttp's client would refuse to send)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[1]


# --- poison bodies ----------------------------------------------------------------------


async def test_a_lone_surrogate_becomes_u_fffd_and_the_run_completes(served, said: Said) -> None:
    hub, session, base = served
    body = b'{"s": "\\ud800", "\\udfffkey": ["ok \\ud83d\\ude00"]}'  # valid JSON; the last is a real pair
    async with session.post(f"{base}/webhooks/deploys?wait=1", data=body, headers=signed(body)) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert answer["state"] == "completed"
    first = (await hub.runs.events(answer["run_id"]))[0]
    assert first.content == {"s": "\ufffd", "\ufffdkey": ["ok \U0001f600"]}
    assert await hub.inbox.pending() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"[NaN, Infinity]", "body[0]: nan"),
        (b'{"a": {"b": [1, -Infinity]}}', "body.a.b[1]: -inf"),
        (b'{"x": 1e999}', "body.x: inf"),
    ],
)
async def test_non_finite_numbers_are_400_naming_the_field_and_store_nothing(served, body: bytes, field: str) -> None:
    hub, session, base = served
    async with session.post(f"{base}/webhooks/deploys", data=body, headers=signed(body)) as resp:
        assert resp.status == 400
        assert field in (await resp.json())["error"]
    await no_runs(hub)


async def test_json_nested_too_deep_is_400(served) -> None:
    hub, session, base = served
    for body in (b"[" * 100_000, b"[" * 65 + b"]" * 65, b'{"a": ' * 2000 + b"1" + b"}" * 2000):
        async with session.post(f"{base}/webhooks/deploys", data=body, headers=signed(body)) as resp:
            assert resp.status == 400
            assert "nested more than 64 levels deep" in (await resp.json())["error"]
    await no_runs(hub)


# --- credentials --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [b"Authorization: Bearer \xff\xfe", b"X-Hub-Signature-256: sha256=\xc3\xa9", b"X-Hub-Timestamp: \xe2\x82\xac"],
)
async def test_undecodable_credentials_are_401_not_500(served, header: bytes) -> None:
    hub, _, _ = served
    status, body = await raw_request(
        hub.http.port, b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n", b"{}"
    )
    assert status == 401
    assert b"is not ASCII" in body
    await no_runs(hub)


async def test_an_unknown_name_answers_exactly_like_a_bad_credential(served) -> None:
    hub, session, base = served
    body = b'{"a": 1}'
    attempts = [
        {},
        {"Authorization": "Bearer wrong"},
        {"X-Hub-Signature-256": signature("guess-guess-guess", body)},
        {"X-Hub-Signature-256": "md5=1"},
    ]
    for headers in attempts:
        answers = []
        for name in ("deploys", "no-such-hook"):
            async with session.post(f"{base}/webhooks/{name}", data=body, headers=headers) as resp:
                answers.append((resp.status, await resp.read(), resp.headers.get("WWW-Authenticate")))
        assert answers[0] == answers[1] and answers[0][0] == 401, headers
    await no_runs(hub)


async def test_a_wrong_bearer_is_refused_before_the_body_is_sent(served) -> None:
    hub, _, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", hub.http.port)
    # announces a body it never sends: the answer comes from the headers alone
    writer.write(
        b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 1000\r\n\r\n"
    )
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert line.startswith(b"HTTP/1.1 401")


async def test_a_signed_timestamp_is_checked_and_bounds_replays(served, said: Said) -> None:
    hub, session, base = served
    body = b'{"deploy": 1}'
    now = int(time.time())

    def headers(ts: int, signed_ts: int | None = None) -> dict[str, str]:
        sig = signature(SECRET, body, ts if signed_ts is None else signed_ts)
        return {"X-Hub-Signature-256": sig, "X-Hub-Timestamp": str(ts)}

    async with session.post(f"{base}/webhooks/strict", data=body, headers=headers(now)) as resp:
        assert resp.status == 202
    async with session.post(f"{base}/webhooks/strict", data=body, headers=headers(now - 600)) as resp:
        assert resp.status == 401 and "outside the 300s window" in (await resp.json())["error"]
    async with session.post(f"{base}/webhooks/strict", data=body, headers=headers(now, signed_ts=now - 1)) as resp:
        assert resp.status == 401 and "does not match the timestamp and the body" in (await resp.json())["error"]
    async with session.post(f"{base}/webhooks/strict", data=body, headers=signed(body)) as resp:
        assert resp.status == 401 and "X-Hub-Timestamp is required" in (await resp.json())["error"]
    async with session.post(f"{base}/webhooks/deploys", data=body, headers=signed(body)) as resp:
        assert resp.status == 202  # optional where not required
    await said.wait_for(2)
    assert len(await hub.runs.list()) == 2


async def test_a_bad_idempotency_key_is_400(served) -> None:
    hub, _, _ = served
    head = (
        b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + SECRET.encode()
        + b"\r\nIdempotency-Key: \xed\xa0\x80\r\n"
    )
    status, body = await raw_request(hub.http.port, head, b"{}")
    assert status == 400 and b"Idempotency-Key" in body
    await no_runs(hub)


async def test_metrics_are_behind_the_http_token_when_one_is_set(http_config: HubConfig, make_chat_hub) -> None:
    http_config.http.token = "metrics-token-0123456789"
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{hub.http.port}/metrics"
        async with session.get(url) as resp:
            assert resp.status == 401
        async with session.get(url, headers={"Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 401
        async with session.get(url, headers={"Authorization": "Bearer metrics-token-0123456789"}) as resp:
            assert resp.status == 200 and "hub_runs_running" in await resp.text()
        async with session.get(f"http://127.0.0.1:{hub.http.port}/healthz") as resp:
            assert resp.status == 200  # the health check needs no token


# --- a failing store ----------------------------------------------------------------------


class FullDisk(InMemoryInbox):
    """An inbox whose writes fail while ``full`` is set, as SQLite's do on a full disk."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False

    async def record(self, context: str, entry: InputLog) -> bool:
        if self.full:
            raise StoreError("hub.db: write failed: database or disk is full")
        return await super().record(context, entry)


async def test_a_failing_store_answers_503_json_and_the_next_message_is_answered(
    http_config, make_chat_hub, said: Said
) -> None:
    inbox = FullDisk()
    async with make_chat_hub(inbox=inbox) as hub, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{hub.http.port}/webhooks/deploys"
        inbox.full = True
        async with session.post(url, json={"n": 1}, headers=BEARER) as resp:
            assert resp.status == 503
            assert "disk is full" in (await resp.json())["error"]
        assert await hub.runs.list() == [] and await inbox.pending() == []
        inbox.full = False
        async with session.post(f"{url}?wait=1", json={"n": 2}, headers=BEARER) as resp:
            assert resp.status == 200 and (await resp.json())["state"] == "completed"
        assert [text for _, text in said.items] == ['echo: {"n": 2}']


# --- slow clients ---------------------------------------------------------------------------


async def open_slow(port: int, n: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(n):
        _, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"P")
        writers.append(w)
    return writers


async def dribble(writers: list[asyncio.StreamWriter], stop: asyncio.Event) -> None:
    """One more byte of a request line on every socket each second, as a slowloris does."""
    while not stop.is_set():
        for w in writers:
            if not w.is_closing():
                try:
                    w.write(b"O")
                except (ConnectionError, RuntimeError):
                    pass
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def test_320_slow_clients_do_not_starve_healthz_or_webhooks(http_config, make_chat_hub, said: Said) -> None:
    http_config.http.max_connections = 64
    http_config.http.header_timeout = 30.0  # eviction, not the timeout, has to make room here
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        slow = await open_slow(hub.http.port, 320)
        stop = asyncio.Event()
        task = asyncio.create_task(dribble(slow, stop))
        try:
            t0 = time.monotonic()
            async with session.get(f"{base}/healthz", timeout=aiohttp.ClientTimeout(total=5)) as resp:
                assert resp.status == 200
            async with session.post(
                f"{base}/webhooks/deploys?wait=1", json={"n": 1}, headers=BEARER, timeout=aiohttp.ClientTimeout(total=5)
            ) as resp:
                assert resp.status == 200 and (await resp.json())["state"] == "completed"
            assert time.monotonic() - t0 < 5
            guard = hub.http._guard
            assert len(guard.live) <= 64 and guard.evicted >= 320 - 64
        finally:
            stop.set()
            await task
            for w in slow:
                w.close()


async def test_headers_that_do_not_arrive_in_time_close_the_connection(served) -> None:
    hub, _, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", hub.http.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
    await writer.drain()
    t0 = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the hub (header_timeout = 1s)
    assert 0.5 < time.monotonic() - t0 < 4
    writer.close()
    assert hub.http._guard.timeouts == 1


async def test_a_body_that_does_not_arrive_in_time_is_408(served) -> None:
    hub, _, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", hub.http.port)
    writer.write(
        b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + SECRET.encode()
        + b'\r\nContent-Length: 100\r\n\r\n{"a": '
    )
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert line.startswith(b"HTTP/1.1 408")
    await no_runs(hub)


async def test_when_every_connection_is_busy_a_new_one_gets_503(http_config, make_chat_hub) -> None:
    http_config.http.max_connections = 2
    async with make_chat_hub() as hub:
        port = hub.http.port
        held = []
        for _ in range(2):  # authenticated webhooks whose bodies are still coming: proven, kept
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(
                b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                + SECRET.encode()
                + b"\r\nContent-Length: 10\r\n\r\n"
            )
            held.append((r, w))
        await asyncio.sleep(0)  # let them be accepted before the third
        for _ in range(50):
            if sum(c.proven for c in hub.http._guard.live.values()) == 2:
                break
            await asyncio.sleep(0.02)
        status, body = await raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert status == 503 and b"too many connections" in body
        for r, w in held:
            assert (await asyncio.wait_for(r.readline(), 5)).startswith(b"HTTP/1.1 408")
            w.close()
        status, _ = await raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert status == 200


async def test_a_malformed_request_is_400_and_no_error_in_the_log(served, caplog: pytest.LogCaptureFixture) -> None:
    hub, _, _ = served
    caplog.set_level(logging.INFO)
    status, _ = await raw_request(
        hub.http.port, b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x00\x01\r\n", b"{}"
    )
    assert status == 400
    status, _ = await raw_request(hub.http.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    assert status == 200  # sent after it: the first is logged by now
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert any("Error handling request" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
