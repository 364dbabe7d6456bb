"""GET /events (Server-Sent Events) and GET /runs/{id}: behind [http] token, redacted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from hub import HubConfig
from hub.config import HttpSection

TOKEN = "events-token-for-tests-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def http_config(config: HubConfig) -> HubConfig:
    config.http = HttpSection(port=0, token=TOKEN)
    return config


async def sse(resp: aiohttp.ClientResponse, *, until: str = "run_ended") -> list[dict[str, Any]]:
    """The events of an SSE response, up to the first of kind ``until``."""
    got: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
            continue
        event = json.loads(fields["data"])
        assert event["kind"] == fields["event"]
        got.append(event)
        fields = {}
        if event["kind"] == until:
            break
    return got


async def test_the_routes_are_off_without_a_token(config: HubConfig, make_chat_hub) -> None:
    config.http = HttpSection(port=0)
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        for path in ("/events", "/runs/abc"):
            async with session.get(base + path, headers=AUTH) as resp:
                assert resp.status == 404
                assert "set [http] token" in (await resp.json())["error"]


async def test_events_refuse_a_request_without_the_token(http_config: HubConfig, make_chat_hub) -> None:
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            for path in ("/events", "/runs/abc"):
                async with session.get(base + path, headers=headers) as resp:
                    assert resp.status == 401, (path, headers)
                    assert "Bearer TOKEN" in (await resp.json())["error"]
        assert hub.bus.subscribers == 0  # nothing was subscribed for them
        async with session.get(base + "/events?kinds=outptu", headers=AUTH) as resp:
            assert resp.status == 400 and "unknown event kind(s) outptu" in (await resp.json())["error"]


async def test_a_run_streams_in_order_and_redacted_then_reads_back_as_json(
    http_config: HubConfig, make_chat_hub, monkeypatch
) -> None:
    secret = "sk-live-events-0123456789abcdef"
    monkeypatch.setenv("EVENTS_HTTP_API_KEY", secret)
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        async with session.get(base + "/events?context=test:chat:42", headers=AUTH) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
            result = await hub.send("test:chat:42", None, f"hello {secret}")
            await hub.send("test:chat:7", None, "another conversation")  # filtered out
            events = await asyncio.wait_for(sse(resp), 10)
        assert [e["kind"] for e in events] == ["run_started", "input", "output", "step", "state", "run_ended"]
        assert {e["run_id"] for e in events} == {result.run_id}
        assert [e["seq"] for e in events] == list(range(1, 7))
        assert events[-1]["state"] == "completed"
        assert secret not in json.dumps(events) and "hello" in json.dumps(events)

        async with session.get(f"{base}/runs/{result.run_id[:8]}", headers=AUTH) as resp:
            body = await resp.json()
        assert body["run"]["id"] == result.run_id and body["run"]["state"] == "completed"
        assert [e["kind"] for e in body["events"]] == ["input", "output", "step", "state"]
        assert secret not in json.dumps(body)
        async with session.get(f"{base}/runs/nope", headers=AUTH) as resp:
            assert resp.status == 404 and "no run matches 'nope'" in (await resp.json())["error"]
        # a run that already ended: its end at once, then the stream closes
        async with session.get(f"{base}/events?run={result.run_id}", headers=AUTH) as resp:
            events = await asyncio.wait_for(sse(resp), 10)
            assert [e["kind"] for e in events] == ["run_ended"] and await resp.content.read() == b""


async def test_stopping_the_hub_ends_open_streams(http_config: HubConfig, make_chat_hub) -> None:
    hub = make_chat_hub()
    await hub.start()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{hub.http.port}/events", headers=AUTH) as resp:
            assert resp.status == 200
            await asyncio.wait_for(hub.stop(), 10)
            with pytest.raises(
                (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, asyncio.IncompleteReadError)
            ):
                while await asyncio.wait_for(resp.content.readany(), 10):
                    pass
                raise aiohttp.ServerDisconnectedError()  # a clean end is an end too
    assert hub.bus.subscribers == 0


def test_check_says_the_routes_are_off_without_a_token(config: HubConfig) -> None:
    from hub.cli import check_config

    config.http = HttpSection(port=0)
    assert any("http.token: empty: /events and /runs/{id} are off" in w for w in check_config(config).warnings)
    assert any("the dashboard at /ui/ is off" in w for w in check_config(config).warnings)
    config.http = HttpSection(port=0, token=TOKEN)
    assert not any("http.token" in w for w in check_config(config).warnings)


async def test_a_client_that_goes_away_is_unsubscribed(http_config: HubConfig, make_chat_hub) -> None:
    async with make_chat_hub() as hub:
        session = aiohttp.ClientSession()
        resp = await session.get(f"http://127.0.0.1:{hub.http.port}/events", headers=AUTH)
        assert resp.status == 200 and hub.bus.subscribers == 1
        resp.close()
        await session.close()  # the connection breaks mid-stream
        for i in range(3):  # the next write to it fails, and its subscription ends
            await hub.send("test:chat:42", None, f"hello {i}")
            for _ in range(200):
                if hub.bus.subscribers == 0:
                    break
                await asyncio.sleep(0.01)
        assert hub.bus.subscribers == 0
