"""The streaming request's read timeout on the body (``[model] timeout`` between two reads,
as the SDK's httpx client and aiohttp's ``sock_read`` apply it), kept by one timer a request
instead of one per network read."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from aiohttp import web

from hub import ModelError, ModelRequest
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI

REQ = ModelRequest(system="sys", messages=[{"role": "user", "content": "hello"}])


class Trickle(FakeOpenAI):
    """Streams ``events`` events, each ``gap`` seconds after the last, then stops (``stall``:
    waits until released instead of ending the body); once released it answers normally."""

    def __init__(self, events: int, gap: float, *, stall: bool = False) -> None:
        super().__init__(["<response><output>ok</output></response>"])
        self.events, self.gap, self.stall = events, gap, stall
        self.release = asyncio.Event()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self.release.is_set():
            return await super()._chat(request)
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(self.events):
            if i:
                await asyncio.sleep(self.gap)
            await resp.write(b'data: {"choices": [{"delta": {"content": "e%d "}}]}\n\n' % i)
        if self.stall:
            await self.release.wait()
            return resp
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def test_a_body_slower_in_all_than_the_timeout_but_never_between_two_reads_is_read_whole() -> None:
    async with Trickle(events=8, gap=0.1) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k", timeout=0.35)
        pieces = [p async for p in model.stream(REQ) if isinstance(p, str)]
        await model.close()
    assert "".join(pieces).split() == [f"e{i}" for i in range(8)]


async def test_a_body_that_stops_is_the_sdks_timeout_and_its_connection_is_not_reused() -> None:
    async with Trickle(events=1, gap=0, stall=True) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k", timeout=0.3)
        seen: list[Any] = []
        with pytest.raises(ModelError) as raised:
            async for piece in model.stream(REQ):
                seen.append(piece)
        assert isinstance(raised.value.__cause__, openai.APITimeoutError)
        assert raised.value.retryable
        assert seen == ["e0 "]
        # the next request is answered whole, on a connection of its own (not the timed-out
        # one with the rest of its body still to come)
        fake.release.set()
        answer = [p async for p in model.stream(REQ) if isinstance(p, str)]
        await model.close()
    assert "".join(answer) == "<response><output>ok</output></response>"


async def test_reading_a_body_schedules_a_timer_per_request_not_per_read(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    read_timers: list[str] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kw: Any) -> asyncio.TimerHandle:
        name = getattr(callback, "__name__", "")
        if name in ("_on_read_timeout", "_due"):  # aiohttp's sock_read timer, and the hub's
            read_timers.append(name)
        return call_at(when, callback, *args, **kw)

    async with Trickle(events=40, gap=0.005) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k", timeout=30)
        monkeypatch.setattr(loop, "call_at", counting)
        pieces = [p async for p in model.stream(REQ) if isinstance(p, str)]
        monkeypatch.undo()
        await model.close()
    assert "".join(pieces).split() == [f"e{i}" for i in range(40)]
    # the wait for the headers (aiohttp's own timer) and the body's one; before, each of the
    # forty reads moved aiohttp's
    assert len(read_timers) <= 4, read_timers
