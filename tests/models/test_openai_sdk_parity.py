"""The lean request path (aiohttp, orjson) against the real openai SDK's own behaviour, both
talking to the same loopback fake: the same exception types and attributes for every error
status, the same usage and tool calls, the SDK's exceptions for refused connections and
timeouts, a broken stream; and clients of one base URL sharing one session."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from aiohttp import web
from openai import AsyncOpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

from hub import ModelError, ModelRequest, Usage
from hub.models import ToolCallDelta
from hub.models._sessions import env_proxy, shared_sessions
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, tool_turn

MESSAGES = [{"role": "user", "content": "hello"}]
REQ = ModelRequest(system="sys", messages=MESSAGES)
TOOLS = [{"type": "function", "function": {"name": "GetWeatherArgs", "parameters": {"type": "object"}}}]


def sdk(fake: FakeOpenAI, **kw: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=fake.url, api_key="k", max_retries=0, **kw)


async def sdk_stream(client: AsyncOpenAI, **kw: Any) -> list[Any]:
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "system", "content": "sys"}, *MESSAGES], stream=True, **kw
    )
    return [chunk async for chunk in stream]


async def collect(model: OpenAIModel, request: ModelRequest = REQ) -> list[Any]:
    return [piece async for piece in model.stream(request)]


class Hanging(FakeOpenAI):
    """Answers nothing (``stall="head"``) or stops after one event (``"body"``) until released."""

    def __init__(self, stall: str) -> None:
        super().__init__()
        self.stall = stall
        self.release = asyncio.Event()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        if self.stall == "head":
            await self.release.wait()
            return web.Response(status=504)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"delta": {"content": "par"}}]}\n\n')
        await self.release.wait()
        return resp


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 429, 500, 503])
async def test_every_error_status_is_the_sdks_own_exception(status: int) -> None:
    async with FakeOpenAI() as fake:
        fake.fail_next("chat", status=status, retry_after=7, description=f"no {status}")
        client = sdk(fake)
        with pytest.raises(openai.APIStatusError) as expected:
            await sdk_stream(client)
        await client.close()
        fake.fail_next("chat", status=status, retry_after=7, description=f"no {status}")
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        with pytest.raises(ModelError) as raised:
            await collect(model)
        await model.close()
    theirs, ours = expected.value, raised.value.__cause__
    assert type(ours) is type(theirs)
    assert isinstance(ours, openai.APIStatusError)
    assert (ours.status_code, ours.message, str(ours), ours.body, ours.code, ours.type, ours.param) == (
        theirs.status_code,
        theirs.message,
        str(theirs),
        theirs.body,
        theirs.code,
        theirs.type,
        theirs.param,
    )
    assert ours.request_id == theirs.request_id
    assert ours.response.headers["retry-after"] == theirs.response.headers["retry-after"] == "7"
    assert ours.request.method == "POST" and str(ours.request.url) == f"{fake.url}/chat/completions"
    # and the ModelError above it is what it was on the SDK's path
    error = raised.value
    assert error.status == status and f"no {status}" in str(error)
    assert error.retryable == (status == 429 or status >= 500)
    assert error.retry_after == 7.0  # type: ignore[attr-defined]


async def test_a_refused_connection_is_the_sdks_connection_error() -> None:
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIConnectionError) as expected:
        await sdk_stream(client)
    await client.close()
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    with pytest.raises(ModelError) as raised:
        await collect(model)
    await model.close()
    assert type(raised.value.__cause__) is type(expected.value) is openai.APIConnectionError
    assert raised.value.retryable and raised.value.status is None


@pytest.mark.parametrize("stall", ["head", "body"])
async def test_a_timeout_is_the_sdks_timeout_error(stall: str) -> None:
    async with Hanging(stall) as fake:
        client = sdk(fake, timeout=0.2)
        with pytest.raises(openai.APITimeoutError if stall == "head" else Exception) as expected:
            await sdk_stream(client)
        await client.close()
        model = OpenAIModel("m", base_url=fake.url, api_key="k", timeout=0.2)
        seen: list[Any] = []
        with pytest.raises(ModelError) as raised:
            async for piece in model.stream(REQ):
                seen.append(piece)
        await model.close()
        fake.release.set()
    assert isinstance(raised.value.__cause__, openai.APITimeoutError)
    assert raised.value.retryable
    # the SDK's own client, reading its stream, raises its transport's read timeout there
    assert stall == "head" or "Timeout" in type(expected.value).__name__
    assert seen == ([] if stall == "head" else ["par"])


async def test_a_connection_dropped_mid_stream_keeps_what_came_and_is_a_connection_error() -> None:
    turn = tool_turn("<response>par", ("get_weather", {"city": "Oslo"}), drop=True)
    async with FakeOpenAI([turn], chunk=4) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        seen: list[Any] = []
        with pytest.raises(ModelError) as raised:
            async for piece in model.stream(ModelRequest(system="s", messages=MESSAGES, tools=TOOLS)):
                seen.append(piece)
        await model.close()
    assert type(raised.value.__cause__) is openai.APIConnectionError
    assert raised.value.retryable and "broke" in str(raised.value)
    assert "".join(p for p in seen if isinstance(p, str)) == "<response>par"
    assert "".join(p.arguments for p in seen if isinstance(p, ToolCallDelta)) == '{"city": "Oslo"}'


async def test_usage_is_the_sdks_with_cached_prompt_tokens() -> None:
    # the fake plays a provider's prefix cache (prompt_tokens_details.cached_tokens): one
    # request first warms it, so that both readings below see the same cached share
    async with FakeOpenAI(["warm", "the answer", "the answer"], chunk=3) as fake:
        warm = OpenAIModel("m", base_url=fake.url, api_key="k")
        await collect(warm)
        await warm.close()
        client = sdk(fake)
        chunks = await sdk_stream(client, stream_options={"include_usage": True})
        await client.close()
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        pieces = await collect(model)
        await model.close()
    theirs = chunks[-1].usage
    usage = pieces[-1]
    assert isinstance(usage, Usage)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (
        theirs.prompt_tokens,
        theirs.completion_tokens,
        theirs.prompt_tokens_details.cached_tokens,
    )
    assert usage.cached_tokens > 0 and usage.finish_reason == "stop"
    assert "".join(pieces[:-1]) == "the answer"


async def test_parallel_tool_calls_assemble_as_the_sdk_assembles_them() -> None:
    # the shape of openai-python's recorded streams (two calls in parallel), as the fake sends it
    turn = tool_turn(
        None,
        ("GetWeatherArgs", '{"city": "Edinburgh", "country": "UK", "units": "c"}'),
        ("get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    )
    async with FakeOpenAI([turn, turn], chunk=5) as fake:
        client = sdk(fake)
        state = ChatCompletionStreamState()
        for chunk in await sdk_stream(client, tools=TOOLS, stream_options={"include_usage": True}):
            state.handle_chunk(chunk)
        await client.close()
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        pieces = await collect(model, ModelRequest(system="s", messages=MESSAGES, tools=TOOLS))
        await model.close()
    final = state.get_final_completion().choices[0]
    calls: dict[int, dict[str, str]] = {}
    for d in (p for p in pieces if isinstance(p, ToolCallDelta)):
        call = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
        call["id"] = d.id or call["id"]
        call["name"] = d.name or call["name"]
        call["arguments"] += d.arguments
    # the fake numbers its responses: the ids differ by that number only
    assert [
        (c.index, c.id.replace("fake1", "fake2"), c.function.name, c.function.arguments)
        for c in final.message.tool_calls or []
    ] == [(i, c["id"], c["name"], c["arguments"]) for i, c in sorted(calls.items())]
    assert isinstance(pieces[-1], Usage) and pieces[-1].finish_reason == final.finish_reason == "tool_calls"


async def test_clients_of_one_base_url_share_one_session_and_send_their_own_key() -> None:
    async with FakeOpenAI(default="ok") as fake, FakeOpenAI(default="other") as other:
        before = shared_sessions()
        a = OpenAIModel("m", base_url=fake.url, api_key="key-a")
        b = OpenAIModel("m", base_url=fake.url + "/", api_key="key-b")
        c = OpenAIModel("m", base_url=other.url, api_key="key-c")
        assert [(await collect(m))[0] for m in (a, b, c)] == ["ok", "ok", "other"]
        assert a._lease.session() is b._lease.session() is not c._lease.session()
        assert shared_sessions() == before + 2
        await a.close()
        assert (await collect(b))[0] == "ok", "the session outlives a client that closed"
        await b.close()
        await c.close()
        assert shared_sessions() == before
    assert [r.headers["Authorization"] for r in fake.requests] == ["Bearer key-a", "Bearer key-b", "Bearer key-b"]


async def test_the_environments_proxy_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # the SDK's httpx client honoured HTTP_PROXY and NO_PROXY: so does the lean path
    async with FakeOpenAI(default="through the proxy") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        monkeypatch.setenv("NO_PROXY", "direct.invalid")
        assert env_proxy("http://direct.invalid/v1") is None
        model = OpenAIModel("m", base_url="http://model.invalid/v1", api_key="k")
        assert (await collect(model))[0] == "through the proxy"
        await model.close()
    assert proxy.requests[0].headers["Host"] == "model.invalid"


def test_a_client_closed_on_one_loop_works_on_the_next() -> None:
    # asyncio.run twice (a CLI command, tests): closing leaves the session, the next stream
    # on a new loop joins that loop's own
    first = FakeOpenAI(default="again")
    model: OpenAIModel | None = None
    before = shared_sessions()

    async def once(fake: FakeOpenAI) -> list[Any]:
        nonlocal model
        async with fake:
            model = model or OpenAIModel("m", base_url=fake.url, api_key="k")
            try:
                return await collect(model)
            finally:
                await model.close()

    assert asyncio.run(once(first))[0] == "again"
    assert asyncio.run(once(FakeOpenAI(default="again", port=first.port)))[0] == "again"
    assert shared_sessions() == before
