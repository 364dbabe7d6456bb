"""The OpenAI provider's request path: one JSON body, reused connections sized to the
concurrency, and the stream's faults (a broken body, bad JSON, an older server)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from hub import ModelError, ModelRequest, Usage
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI

REQ = ModelRequest(system="sys", messages=[{"role": "user", "content": "hello"}])


class PeerFake(FakeOpenAI):
    """Records the client's port of every request: one port per connection."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.ports: list[int] = []
        self.content_types: list[str] = []

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.ports.append(request.transport.get_extra_info("peername")[1])
        self.content_types.append(request.headers.get("Content-Type", ""))
        return await super()._chat(request)


class BrokenFake(FakeOpenAI):
    """Sends ``prefix`` as the body of an SSE stream, then drops the connection."""

    def __init__(self, prefix: bytes) -> None:
        super().__init__()
        self.prefix = prefix

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(self.prefix)
        request.transport.close()
        return resp


async def collect(model: OpenAIModel, request: ModelRequest = REQ) -> tuple[str, Usage | None]:
    text, usage = [], None
    async for c in model.stream(request):
        if isinstance(c, Usage):
            usage = c
        else:
            text.append(c)
    return "".join(text), usage


async def test_the_body_is_one_json_object_with_every_option() -> None:
    async with PeerFake(["ok"]) as fake:
        model = OpenAIModel(
            "m",
            base_url=fake.url,
            api_key="k",
            temperature=0.3,
            max_tokens=50,
            extra_body={"top_k": 4, "seed": 1},
        )
        request = ModelRequest(system="s", messages=[{"role": "user", "content": "é <b>"}], max_tokens=9)
        assert await collect(model, request) == ("ok", Usage(1, 1, finish_reason="stop"))
        await model.close()
    body = fake.bodies[0]
    assert body == {
        "model": "m",
        "stream": True,
        "temperature": 0.3,
        "max_tokens": 9,
        "top_k": 4,
        "seed": 1,
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "é <b>"}],
        "stream_options": {"include_usage": True},
    }
    assert fake.content_types == ["application/json"]
    assert fake.requests[0].headers["Authorization"] == "Bearer k"


async def test_a_body_that_is_not_json_is_a_clear_error() -> None:
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="k", extra_body={"x": object()})
    with pytest.raises(ModelError, match="cannot be sent as JSON") as e:
        await collect(model)
    assert not e.value.retryable
    await model.close()


async def test_sequential_streams_reuse_one_connection() -> None:
    async with PeerFake(["a" * 40, "b" * 40, "c" * 40]) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        for expected in ("a", "b", "c"):
            assert (await collect(model))[0] == expected * 40
        await model.close()
    assert len(fake.ports) == 3 and len(set(fake.ports)) == 1


async def test_connections_are_bounded_by_the_concurrency() -> None:
    async with PeerFake(default="x" * 20, latency=0.05) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k", concurrency=2)
        results = await asyncio.gather(*(collect(model) for _ in range(6)))
        await model.close()
    assert [r[0] for r in results] == ["x" * 20] * 6
    assert len(fake.ports) == 6 and len(set(fake.ports)) == 2


async def test_a_stream_that_breaks_is_a_retryable_error_after_its_chunks() -> None:
    prefix = b'data: {"choices": [{"delta": {"content": "<response>par"}}]}\n\ndata: {"choi'
    async with BrokenFake(prefix) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        seen: list[str] = []
        with pytest.raises(ModelError) as e:
            async for c in model.stream(REQ):
                seen.append(c)  # type: ignore[arg-type]
        await model.close()
    assert seen == ["<response>par"]
    assert e.value.retryable


async def test_invalid_json_in_the_stream_is_not_retried() -> None:
    async with BrokenFake(b"data: {not json}\n\n") as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        with pytest.raises(ModelError, match="invalid JSON in the stream") as e:
            await collect(model)
        await model.close()
    assert not e.value.retryable


async def test_an_error_event_in_the_stream_names_its_message() -> None:
    async with BrokenFake(b'data: {"error": {"message": "overloaded"}}\n\n') as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        with pytest.raises(ModelError, match="m: overloaded"):
            await collect(model)
        await model.close()


async def test_the_events_of_one_read_are_one_piece_and_text_before_an_error_event_is_kept() -> None:
    events = b"".join(
        b'data: {"choices": [{"delta": {"content": "%s"}}]}\n\n' % part for part in (b"<resp", b"onse>", b"par")
    )
    async with BrokenFake(events + b'data: {"error": {"message": "overloaded"}}\n\n') as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        seen: list[str] = []
        with pytest.raises(ModelError, match="m: overloaded"):
            async for c in model.stream(REQ):
                seen.append(c)  # type: ignore[arg-type]
        await model.close()
    assert seen == ["<response>par"]


async def test_a_server_without_stream_options_is_asked_again_without_them() -> None:
    async with PeerFake(["fine"]) as fake:
        fake.fail_next("chat", status=400, retry_after=None, description="unknown field stream_options")
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        with pytest.raises(ModelError) as e:
            await collect(model)
        assert e.value.retryable and e.value.status == 400
        assert (await collect(model))[0] == "fine"
        await model.close()
    assert "stream_options" in fake.bodies[0] and "stream_options" not in fake.bodies[1]
