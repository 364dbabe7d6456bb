"""The engine's failure paths that need a scenario of their own: a retry that starts clean,
action memory that neither races nor leaks, parts of an output sent before a shutdown."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from hub import Extension, ScriptedModel, action, output
from hub.errors import ModelError
from hub.logs import OutputLog
from hub.models import ModelRequest, Usage
from hub.models.openai import OpenAIModel
from hub.store import RunState
from hub.testing import FakeOpenAI
from tests._support.processes import kill_when_ready

CLI = ("cli:session", {"user": "ann"})


class NoArgs(BaseModel):
    pass


async def test_an_on_error_retry_starts_from_a_fresh_parser(make_hub, out) -> None:
    from hub import Context

    model = ScriptedModel(["never used"])

    async def stream(request: ModelRequest):  # type: ignore[no-untyped-def]
        model.requests.append(request)
        if len(model.requests) == 1:
            yield "Sorry, the answ"
            raise ModelError("the server hung up", retryable=False)
        yield "The answer is 42."
        yield Usage(1, 1, finish_reason="stop")

    said: list[str] = []

    @output(type="t:say")
    async def say(content: str, ctx) -> None:
        said.append(content)

    model.stream = stream  # type: ignore[method-assign]
    chat = Context(type="t:chat", outputs=[say], reply_output="t:say", on_error=lambda e, ctx: "retry")
    async with make_hub(model, Extension("t", contexts=[chat])) as hub:
        result = await hub.send("t:chat:ann", None, "what is it?")
    assert result.state == RunState.COMPLETED, result.reason
    assert said == ["The answer is 42."]


def counter(**kw: Any) -> Any:
    @action(name="inc", memory="count", **kw)
    async def inc(args: NoArgs, ctx) -> int:
        value = ctx.action_memory or 0
        await asyncio.sleep(0.001)  # a handler that awaits between read and write
        ctx.action_memory = value + 1
        return ctx.action_memory

    return inc


async def test_ten_concurrent_increments_end_at_ten(make_hub) -> None:
    calls = "".join('<action_call name="inc">{}</action_call>' for _ in range(10))
    model = ScriptedModel([f"<response>{calls}</response>", "<response><output>done</output></response>"])
    async with make_hub(model, Extension("t", actions=[counter()])) as hub:
        result = await hub.send(*CLI, "count")
        assert result.state == RunState.COMPLETED
        assert await hub.memory.get("action:count:cli:session:ann") == 10


async def test_action_memory_is_per_conversation_unless_global(make_hub) -> None:
    once = '<response><action_call name="inc">{}</action_call></response>'
    done = "<response><output>ok</output></response>"
    for scope, keys in (("context", {"ann": 1, "bob": 1}), ("global", {"": 2})):
        model = ScriptedModel([once, done, once, done])
        async with make_hub(model, Extension("t", actions=[counter(scope=scope)])) as hub:
            await hub.send("cli:session", {"user": "ann"}, "x")
            await hub.send("cli:session", {"user": "bob"}, "x")
            for user, n in keys.items():
                key = f"action:count:cli:session:{user}" if user else "action:count"
                assert await hub.memory.get(key) == n, (scope, key)
            await hub.memory.clear()


async def test_a_shutdown_mid_send_keeps_the_parts_already_sent(make_hub, config) -> None:
    sent: list[str] = []
    second = asyncio.Event()

    @output(type="t:long")
    async def long(content: str, ctx) -> None:
        for i, part in enumerate(content.split("|")):
            if i == 1:
                second.set()
                await asyncio.Event().wait()  # the platform hangs on part 2: a shutdown comes
            sent.append(part)
            await ctx.part_sent(i, {"message_id": 100 + i})

    config.hub.shutdown_grace = 0
    model = ScriptedModel(
        ['<response><output type="t:long">one|two|three</output></response>'], default="<response></response>"
    )
    hub = make_hub(model, Extension("t", outputs=[long]))
    await hub.start()
    sub = await hub.submit(*CLI, "tell me")
    await second.wait()
    run_id = await sub.run_id
    await hub.stop()
    assert sent == ["one"]
    # a second hub on the same data: the input counts as answered, nothing is sent again
    hub2 = make_hub(
        ScriptedModel([], default='<response><output type="t:long">again</output></response>'),
        Extension("t", outputs=[long]),
    )
    async with hub2:
        row = await hub2.runs.get(run_id)
        events = await hub2.runs.events(run_id)
        assert await hub2.inbox.pending() == []
        # a sentinel after the restart: it is answered, and nothing before it was resent
        result = await hub2.send("cli:session", {"user": "bob"}, "sentinel")
    assert row is not None and row.state == RunState.KILLED and row.reason == "shutdown"
    final = [e for e in events if isinstance(e, OutputLog)][-1]
    assert not final.sent and final.parts == [{"index": 0, "data": {"message_id": 100}}]
    assert "after 1 part(s) were sent" in (final.error or "")
    assert result.state == RunState.COMPLETED and sent == ["one", "again"]


async def test_the_openai_model_reports_why_it_stopped() -> None:
    async with FakeOpenAI(["<response><output>hi</output></response>"]) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        request = ModelRequest(system="sys", messages=[{"role": "user", "content": "x"}])
        last = [c async for c in model.stream(request)][-1]
        await model.close()
    assert isinstance(last, Usage) and last.finish_reason == "stop"


_CRASHING_HUB = """
import asyncio, sys
from pathlib import Path
from hub_cli import CliSettings, extension as cli
from hub import Extension, Hub, HubConfig, ScriptedModel, output

data, sent_file = Path(sys.argv[1]), Path(sys.argv[2])

@output(type="t:long")
async def long(content: str, ctx) -> None:
    for i, part in enumerate(content.split("|")):
        if i == 1:
            (data / "ready").write_text("part 2 is next")
            await asyncio.Event().wait()  # hangs here until the SIGKILL
        with sent_file.open("a") as f:
            f.write(part + "\\n")
        await ctx.part_sent(i)

async def main() -> None:
    cfg = HubConfig()
    cfg.hub.data_dir = str(data)
    cfg.hub.contexts_dir = str(data.parent / "contexts")
    cfg.memory.episodes = False
    model = ScriptedModel(['<response><output type="t:long">one|two|three</output></response>'])
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[cli(CliSettings(stdin=False)), Extension("t", outputs=[long])])
    async with hub:
        await hub.send("cli:session", {"user": "ann"}, "tell me")

asyncio.run(main())
"""


async def test_a_crash_mid_send_does_not_send_the_parts_again(make_hub, config, tmp_path) -> None:
    sent_file = tmp_path / "sent.txt"
    config.data_dir.mkdir(parents=True, exist_ok=True)
    await kill_when_ready(_CRASHING_HUB, str(config.data_dir), str(sent_file), ready=config.data_dir / "ready")
    assert sent_file.read_text() == "one\n"

    @output(type="t:long")
    async def long(content: str, ctx) -> None:
        with sent_file.open("a") as f:
            f.write(content + "\n")

    model = ScriptedModel([], default='<response><output type="t:long">sentinel answer</output></response>')
    async with make_hub(model, Extension("t", outputs=[long])) as hub:
        killed = await hub.runs.list(state=str(RunState.KILLED))
        result = await hub.send("cli:session", {"user": "bob"}, "sentinel")
        assert await hub.inbox.pending() == []
    assert [r.reason for r in killed] == ["abnormal_exit"]
    assert result.state == RunState.COMPLETED
    # Ann's input was not answered again: only the sentinel's answer came after her part
    assert sent_file.read_text() == "one\nsentinel answer\n"
    assert len(model.requests) == 1


async def test_a_plain_reply_cut_at_the_token_limit_is_marked(make_hub, out) -> None:
    from tests.faults.faults import FunctionModel

    model = FunctionModel(lambda request: ("The answer is that the forty", "length"))
    async with make_hub(model) as hub:
        result = await hub.send(*CLI, "x")
    assert result.state == RunState.COMPLETED
    assert out.getvalue() == "The answer is that the forty […]\n"
