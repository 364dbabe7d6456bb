"""GET /events with Last-Event-ID: a client that reconnects is sent what it missed, from the
run store, then the live events, nothing twice."""

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


async def messages(resp: aiohttp.ClientResponse, *, until: str = "run_ended", count: int = 1) -> list[dict[str, Any]]:
    """SSE messages (``id`` and the decoded ``data``) up to the ``count``-th of kind ``until``."""
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
        got.append({"id": fields.get("id"), **json.loads(fields["data"])})
        fields = {}
        if got[-1]["kind"] == until:
            count -= 1
            if not count:
                break
    return got


async def test_reconnecting_with_last_event_id_replays_what_followed(http_config: HubConfig, make_chat_hub) -> None:
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}/events?context=test:chat:42"
        async with session.get(base, headers=AUTH) as resp:
            first = await hub.send("test:chat:42", None, "one")
            seen = await asyncio.wait_for(messages(resp), 10)
        ids = [m["id"] for m in seen]
        assert ids[0] == f"{first.run_id}:0" and ids[-1] == f"{first.run_id}:end"
        assert ids[1:-1] == [f"{first.run_id}:{n}" for n in range(1, len(ids) - 1)]

        # the client went away after the input event; meanwhile the run ended and another ran
        second = await hub.send("test:chat:42", None, "two")
        await hub.send("test:chat:7", None, "elsewhere")  # not this stream's conversation
        async with session.get(base, headers={**AUTH, "Last-Event-ID": ids[1]}) as resp:
            replay = await asyncio.wait_for(messages(resp, count=2), 10)
            third = await hub.send("test:chat:42", None, "three")  # live again after the replay
            live = await asyncio.wait_for(messages(resp), 10)
    assert [m["id"] for m in replay] == ids[2:] + [
        f"{second.run_id}:{n}" for n in range(1, len(replay) - len(ids) + 2)
    ] + [f"{second.run_id}:end"]
    assert {m["run_id"] for m in replay} == {first.run_id, second.run_id}
    assert [m["entry"]["kind"] for m in replay if m["kind"] != "run_ended"][-1] == "state"
    assert {m["run_id"] for m in live} == {third.run_id} and live[0]["kind"] == "run_started"


async def test_a_run_filtered_stream_resumes_only_that_run(http_config: HubConfig, make_chat_hub) -> None:
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        result = await hub.send("test:chat:42", None, "one")
        await hub.send("test:chat:42", None, "two")
        url = f"http://127.0.0.1:{hub.http.port}/events?run={result.run_id}&last_event_id={result.run_id}:2"
        async with session.get(url, headers=AUTH) as resp:
            got = await asyncio.wait_for(messages(resp), 10)
            assert await resp.content.read() == b""  # the run had ended: the stream ends
        assert {m["run_id"] for m in got} == {result.run_id}
        assert got[0]["id"] == f"{result.run_id}:3" and got[-1]["kind"] == "run_ended"
        bad = f"http://127.0.0.1:{hub.http.port}/events?run={result.run_id}&last_event_id={result.run_id}:x"
        async with session.get(bad, headers=AUTH) as resp:
            assert resp.status == 400 and "is not RUN_ID:N" in (await resp.json())["error"]
