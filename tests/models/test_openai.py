"""The OpenAI-compatible provider, with the real openai client against a loopback fake."""

import pytest

from hub import ModelError, ModelRequest, RunState, Usage
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI

REQ = ModelRequest(system="sys", messages=[{"role": "user", "content": "hello"}])


async def collect(model, request=REQ):
    chunks, usage = [], None
    async for c in model.stream(request):
        if isinstance(c, Usage):
            usage = c
        else:
            chunks.append(c)
    return chunks, usage


async def test_streams_chunks_and_usage() -> None:
    # events paced apart arrive in reads of their own, and each read's text is handed on
    # as it comes (the text of the events one read brings comes as one piece)
    async with FakeOpenAI(["<response><output>Hi é</output></response>"], chunk=3, chunk_delay=0.02) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        chunks, usage = await collect(model)
        await model.close()
    assert "".join(chunks) == "<response><output>Hi é</output></response>"
    assert len(chunks) > 5 and usage.completion_tokens > 0
    body = fake.bodies[0]
    assert body["model"] == "gpt-test" and body["stream"] is True
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    assert fake.requests[0].headers["Authorization"] == "Bearer k"


async def test_errors_are_classified() -> None:
    async with FakeOpenAI(["x"]) as fake:
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        fake.fail_next("chat", status=429, retry_after=2)
        with pytest.raises(ModelError) as e:
            await collect(model)
        assert e.value.retryable and e.value.status == 429 and e.value.retry_after == 2.0
        fake.fail_next("chat", status=401, retry_after=None, description="bad key")
        with pytest.raises(ModelError) as e:
            await collect(model)
        assert not e.value.retryable and "bad key" in str(e.value)
        await model.close()


async def test_unreachable_server_is_retryable() -> None:
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="k", timeout=2)
    with pytest.raises(ModelError) as e:
        await collect(model)
    assert e.value.retryable
    await model.close()


async def test_429_then_success_through_the_hub(make_hub, config, out) -> None:
    config.model.retry_base_delay = 0.01
    async with FakeOpenAI(["<response><output>after a 429</output></response>"]) as fake:
        fake.fail_next("chat", status=429, retry_after=0.01)
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        async with make_hub(model) as hub:
            result = await hub.send("cli:session", {"user": "ann"}, "hi")
    assert result.state == RunState.COMPLETED
    assert [r.status for r in fake.calls("chat")] == [429, 200]
    assert out.getvalue() == "after a 429\n"


async def test_500s_past_the_bound_fail_the_run(make_hub, config) -> None:
    config.model.max_retries = 2
    config.model.retry_base_delay = 0.001
    async with FakeOpenAI(["never"]) as fake:
        fake.fail_next("chat", status=500, retry_after=None, count=10, description="upstream exploded")
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        async with make_hub(model) as hub:
            result = await hub.send("cli:session", {"user": "ann"}, "hi")
    assert result.state == RunState.FAILED
    assert result.reason.startswith("model unavailable after 3 attempts: HTTP 500")
    assert "upstream exploded" in result.reason
    assert len(fake.calls("chat")) == 3
