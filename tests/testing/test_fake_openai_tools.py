"""FakeOpenAI streams tool calls as the OpenAI API does: the shape of the streams that
openai-python's own tests recorded from the API (tests/lib/chat/test_completions_streaming.py,
``test_parse_pydantic_tool`` for one call, ``test_parse_multiple_pydantic_tools`` for two in
parallel), assembled by the SDK's ``ChatCompletionStreamState`` to the same message."""

from __future__ import annotations

import json

from openai import AsyncOpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

from hub.models import ModelRequest, ToolCallDelta, Usage
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, tool_turn

TOOLS = [{"type": "function", "function": {"name": "GetWeatherArgs", "parameters": {"type": "object"}}}]


async def _stream(fake: FakeOpenAI) -> tuple[list, object]:
    client = AsyncOpenAI(base_url=fake.url, api_key="x", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4o-2024-08-06",
        messages=[{"role": "user", "content": "What's the weather like in Edinburgh?"}],
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    state, chunks = ChatCompletionStreamState(), []
    async for chunk in stream:
        chunks.append(chunk)
        state.handle_chunk(chunk)
    await client.close()
    return chunks, state.get_final_completion()


async def test_two_parallel_calls_stream_and_assemble_as_the_api_does() -> None:
    turn = tool_turn(
        None,
        ("GetWeatherArgs", '{"city": "Edinburgh", "country": "UK", "units": "c"}'),
        ("get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    )
    async with FakeOpenAI([turn], chunk=6) as fake:
        chunks, final = await _stream(fake)
    # the recorded shape: a role chunk with content null; per call a head (index, id, type,
    # name, empty arguments) then argument fragments; a finish chunk; a usage chunk
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content is None and not first.tool_calls
    heads = [c.choices[0].delta.tool_calls[0] for c in chunks[1:-2] if c.choices[0].delta.tool_calls[0].id]
    assert [(h.index, h.type, h.function.name, h.function.arguments) for h in heads] == [
        (0, "function", "GetWeatherArgs", ""),
        (1, "function", "get_stock_price", ""),
    ]
    fragments = [c.choices[0].delta.tool_calls[0] for c in chunks[1:-2] if not c.choices[0].delta.tool_calls[0].id]
    assert all(f.id is None and f.function.name is None and f.type is None for f in fragments)
    assert chunks[-2].choices[0].finish_reason == "tool_calls" and chunks[-2].choices[0].delta.tool_calls is None
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    (choice,) = final.choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert [(c.index, c.function.name) for c in calls] == [(0, "GetWeatherArgs"), (1, "get_stock_price")]
    assert json.loads(calls[0].function.arguments) == {"city": "Edinburgh", "country": "UK", "units": "c"}
    assert json.loads(calls[1].function.arguments) == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert calls[0].id != calls[1].id


async def test_one_call_and_the_hubs_reader_agree_with_the_sdk() -> None:
    turn = tool_turn(None, ("get_weather", {"city": "New York City"}))
    async with FakeOpenAI([turn, turn], chunk=4) as fake:
        _, final = await _stream(fake)
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        request = ModelRequest(system="s", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
        pieces = [p async for p in model.stream(request)]
        await model.close()
    (sdk_call,) = final.choices[0].message.tool_calls
    deltas = [p for p in pieces if isinstance(p, ToolCallDelta)]
    assert {d.index for d in deltas} == {0}
    assert deltas[0].id.startswith("call_") and deltas[0].name == sdk_call.function.name
    assert "".join(d.arguments for d in deltas) == sdk_call.function.arguments
    assert isinstance(pieces[-1], Usage) and pieces[-1].finish_reason == "tool_calls"
    assert fake.bodies[1]["tools"] == TOOLS, "the request carried the tools"
