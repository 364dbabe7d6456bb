"""The engine end to end with the scripted model: steps, actions, outputs, limits."""

import asyncio
import io
import logging

import pytest
from pydantic import BaseModel

from hub import (
    ActionCallLog,
    ActionResultLog,
    Context,
    ErrorLog,
    Extension,
    ModelError,
    OutputLog,
    RunState,
    ScriptedModel,
    ThoughtLog,
    action,
    output,
)
from hub.engine import Plugin

CLI = ("cli:session", {"user": "ann"})


class Weather(BaseModel):
    location: str


class Add(BaseModel):
    a: int
    b: int


@action(name="getWeather", description="Current weather for a location.")
async def get_weather(args: Weather, ctx) -> dict:
    return {"temperature": 72, "location": args.location, "forecast": {"days": [{"high": 75}]}}


@action(name="add", description="Add two numbers.")
async def add(args: Add, ctx) -> int:
    return args.a + args.b


TOOLS = Extension(name="tools", actions=[get_weather, add])


def resp(*parts: str) -> str:
    return "<response>" + "".join(parts) + "</response>"


def call(name: str, args: str) -> str:
    return f'<action_call name="{name}">{args}</action_call>'


async def test_action_result_then_output_over_two_steps(make_hub, out: io.StringIO) -> None:
    model = ScriptedModel(
        [
            resp("<reasoning>Need the weather.</reasoning>", call("getWeather", '{"location": "NYC"}')),
            resp("<output>It is 72°F in NYC.</output>"),
        ]
    )
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "weather in NYC?", user="ann")
    assert result.state == RunState.COMPLETED and result.steps == 2
    kinds = [type(e).__name__ for e in result.logs]
    assert kinds[:5] == ["InputLog", "ThoughtLog", "ActionCallLog", "ActionResultLog", "StepLog"]
    res = next(e for e in result.logs if isinstance(e, ActionResultLog))
    assert res.ok and res.data["temperature"] == 72
    # the second prompt shows the result as new, the first one did not have it
    assert "temperature" not in model.requests[0].messages[0]["content"]
    assert '<action_result name="getWeather" status="ok" new="true">' in model.requests[1].messages[0]["content"]
    assert out.getvalue() == "It is 72°F in NYC.\n"
    assert result.text == "It is 72°F in NYC."


async def test_template_reference_waits_for_the_earlier_call(make_hub) -> None:
    model = ScriptedModel(
        [
            resp(
                call("getWeather", '{"location": "Paris"}'),
                call("add", '{"a": "{{calls[0].forecast.days[0].high}}", "b": 5}'),
            ),
            resp("<output>80</output>"),
        ]
    )
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "go")
    results = [e for e in result.logs if isinstance(e, ActionResultLog)]
    assert [r.name for r in results] == ["getWeather", "add"]
    assert results[1].ok and results[1].data == 80


async def test_template_to_a_failed_call_is_an_error_result(make_hub) -> None:
    model = ScriptedModel(
        [
            resp(call("nope", "{}"), call("add", '{"a": "{{calls[0].x}}", "b": 1}')),
            resp("<output>sorry</output>"),
        ]
    )
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "go")
    results = [e for e in result.logs if isinstance(e, ActionResultLog)]
    assert not results[1].ok and "that call failed" in results[1].error


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"location": 5}', "location: Input should be a valid string"),
        ("{}", "location: Field required"),
        ('{"location": "x"', "not valid JSON"),
    ],
)
async def test_invalid_arguments_are_an_error_the_model_sees(make_hub, args: str, expected: str) -> None:
    model = ScriptedModel([resp(call("getWeather", args)), resp("<output>I could not check.</output>")])
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "weather?")
    res = next(e for e in result.logs if isinstance(e, ActionResultLog))
    assert not res.ok and expected in res.error
    assert expected.split(":")[0] in model.requests[1].messages[0]["content"]
    assert result.state == RunState.COMPLETED and result.outputs[0].sent


async def test_unknown_action_lists_the_available_ones(make_hub) -> None:
    model = ScriptedModel([resp(call("getWether", "{}")), resp("<output>oops</output>")])
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "x")
    res = next(e for e in result.logs if isinstance(e, ActionResultLog))
    assert "unknown action 'getWether'" in res.error and "getWeather" in res.error


async def test_a_failing_handler_becomes_an_error_result(make_hub) -> None:
    @action(name="boom")
    async def boom(args: Add, ctx) -> None:
        raise RuntimeError("disk on fire")

    model = ScriptedModel([resp(call("boom", '{"a": 1, "b": 2}')), resp("<output>it failed</output>")])
    async with make_hub(model, Extension("b", actions=[boom])) as hub:
        result = await hub.send(*CLI, "x")
    res = next(e for e in result.logs if isinstance(e, ActionResultLog))
    assert not res.ok and "RuntimeError: disk on fire" in res.error
    assert result.state == RunState.COMPLETED


async def test_malformed_xml_is_logged_and_the_run_goes_on(make_hub, out) -> None:
    # an unclosed output at the end of the stream is reported, and delivered marked as cut off
    model = ScriptedModel(["<response><think>hmm</think><output>partial answer"])
    async with make_hub(model) as hub:
        result = await hub.send(*CLI, "x")
    assert result.state == RunState.COMPLETED
    errors = [e for e in result.logs if isinstance(e, ErrorLog)]
    assert any("<output> was not closed" in e.message for e in errors)
    assert out.getvalue() == "partial answer […]\n"


async def test_plain_text_reply_is_an_output_to_the_conversation(make_hub, out) -> None:
    async with make_hub(["Hello there! 1 < 2, and <b>bold</b> stays text."]) as hub:
        result = await hub.send(*CLI, "hi")
    assert result.outputs[0].type == "cli:message" and result.outputs[0].sent
    assert out.getvalue() == "Hello there! 1 < 2, and <b>bold</b> stays text.\n"


async def test_step_limit_kills_the_run(make_hub, config) -> None:
    config.agent.max_steps = 2
    model = ScriptedModel(default=resp(call("add", '{"a": 1, "b": 1}')))
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "loop forever")
    assert result.state == RunState.KILLED and result.reason == "max_steps (2)"
    assert len(model.requests) == 2


async def test_step_limit_of_one_is_honoured(make_hub, config) -> None:
    config.agent.max_steps = 1
    async with make_hub(["<response><output>done</output></response>"]) as hub:
        result = await hub.send(*CLI, "x")
    assert result.state == RunState.COMPLETED and result.steps == 1


async def test_output_reaches_the_platform_before_the_response_ends(make_hub) -> None:
    seen: list[tuple[str, int]] = []
    model = ScriptedModel(
        [resp('<output type="test:out">first</output>', "<reasoning>" + "x" * 200 + "</reasoning>")],
        chunk=5,
        chunk_delay=0.002,
    )

    @output(type="test:out")
    async def record(content: str, ctx) -> None:
        seen.append((content, len(model.requests)))
        # the stream is still going: the reasoning after the output has not arrived yet
        assert not any(isinstance(e, ThoughtLog) for e in ctx.logs)

    async with make_hub(model, Extension("t", outputs=[record])) as hub:
        result = await hub.send(*CLI, "x")
    assert seen == [("first", 1)]
    assert any(isinstance(e, ThoughtLog) for e in result.logs)


async def test_outputs_keep_their_order(make_hub) -> None:
    got: list[str] = []

    @output(type="test:slow")
    async def slow(content: str, ctx) -> None:
        await asyncio.sleep(0.01 if content == "1" else 0)
        got.append(content)

    parts = "".join(f'<output type="test:slow">{i}</output>' for i in range(1, 6))
    async with make_hub([resp(parts)], Extension("t", outputs=[slow])) as hub:
        await hub.send(*CLI, "x")
    assert got == ["1", "2", "3", "4", "5"]


async def test_actions_run_concurrently_unless_they_share_a_queue(make_hub) -> None:
    active = {"free": 0, "queued": 0}
    peak = {"free": 0, "queued": 0}

    class N(BaseModel):
        n: int

    def track(kind: str):
        async def handler(args: N, ctx) -> int:
            active[kind] += 1
            peak[kind] = max(peak[kind], active[kind])
            await asyncio.sleep(0.02)
            active[kind] -= 1
            return args.n

        return handler

    free = action(track("free"), name="free")
    queued = action(track("queued"), name="queued", queue="db")
    calls = "".join(call("free", f'{{"n": {i}}}') + call("queued", f'{{"n": {i}}}') for i in range(3))
    async with make_hub([resp(calls), resp("<output>ok</output>")], Extension("t", actions=[free, queued])) as hub:
        result = await hub.send(*CLI, "x")
    assert peak == {"free": 3, "queued": 1}
    assert sum(isinstance(e, ActionResultLog) and e.ok for e in result.logs) == 6


async def test_unknown_output_type_is_fed_back_to_the_model(make_hub, out) -> None:
    model = ScriptedModel(
        [resp('<output type="telegram:send">hi</output>'), resp('<output type="cli:message">hi</output>')]
    )
    async with make_hub(model) as hub:
        result = await hub.send(*CLI, "x")
    assert result.steps == 2 and out.getvalue() == "hi\n"
    assert "unknown output type 'telegram:send'" in model.requests[1].messages[0]["content"]


async def test_output_cannot_pick_a_destination_its_definition_does_not_allow(make_hub, out, caplog) -> None:
    # an attribute the output does not declare is dropped (logged): the reply still goes,
    # to the conversation, never to the destination the model named
    model = ScriptedModel([resp('<output type="cli:message" user="mallory" lang="en">hi</output>')])
    with caplog.at_level(logging.DEBUG, logger="hub.engine"):
        async with make_hub(model) as hub:
            result = await hub.send(*CLI, "x")
    sent = result.outputs[0]
    assert sent.sent and sent.attrs == {} and result.steps == 1
    assert out.getvalue() == "hi\n"
    assert "dropped attribute(s) it does not declare: lang, user" in caplog.text


async def test_declared_attributes_are_still_validated(make_hub) -> None:
    class Where(BaseModel):
        silent: bool = False

    got = []

    @output(type="test:note", attributes=Where)
    async def note(content: str, ctx) -> None:
        got.append((content, ctx.attributes.silent))

    model = ScriptedModel(
        [
            resp('<output type="test:note" silent="maybe" extra="1">a</output>'),
            resp('<output type="test:note" silent="true" extra="1">b</output>'),
        ]
    )
    async with make_hub(model, Extension("t", outputs=[note])) as hub:
        result = await hub.send(*CLI, "x")
    assert got == [("b", True)]
    assert "silent" in result.outputs[0].error and not result.outputs[0].sent


async def test_structured_output_content_is_validated(make_hub) -> None:
    class Card(BaseModel):
        title: str

    got = []

    @output(type="test:card")
    async def card(content: Card, ctx) -> dict:
        got.append(content.title)
        return {"message_id": 7}

    model = ScriptedModel(
        [
            resp('<output type="test:card">{"titl": "x"}</output>'),
            resp('<output type="test:card">{"title": "Hello"}</output>'),
        ]
    )
    async with make_hub(model, Extension("t", outputs=[card])) as hub:
        result = await hub.send(*CLI, "x")
    assert got == ["Hello"]
    assert result.outputs[0].error and not result.outputs[0].sent
    assert result.outputs[1].sent and result.outputs[1].data == {"message_id": 7}


async def test_a_failing_output_handler_is_recorded_as_not_sent(make_hub) -> None:
    @output(type="test:down")
    async def down(content: str, ctx) -> None:
        raise ConnectionError("platform down")

    async with make_hub([resp('<output type="test:down">hi</output>')], Extension("t", outputs=[down])) as hub:
        result = await hub.send(*CLI, "x")
        events = await hub.runs.events(result.run_id)
    out = result.outputs[0]
    assert not out.sent and "platform down" in out.error
    logged = [e for e in events if isinstance(e, OutputLog)]
    assert logged and not any(e.sent for e in logged)


async def test_model_failure_fails_the_run_with_one_reason(make_hub, config) -> None:
    config.model.max_retries = 2
    config.model.retry_base_delay = 0.001
    err = ModelError("HTTP 503: overloaded", status=503, retryable=True)
    model = ScriptedModel([err, err, err])
    async with make_hub(model) as hub:
        result = await hub.send(*CLI, "x")
    assert result.state == RunState.FAILED
    assert result.reason == "model unavailable after 3 attempts: HTTP 503: overloaded"
    assert len(model.requests) == 3


async def test_model_error_then_success_is_retried(make_hub, config, out) -> None:
    config.model.retry_base_delay = 0.001
    model = ScriptedModel([ModelError("HTTP 429", status=429, retryable=True), "fine"])
    async with make_hub(model) as hub:
        result = await hub.send(*CLI, "x")
    assert result.ok and out.getvalue() == "fine\n"
    assert any(isinstance(e, ErrorLog) and "retry 1" in e.message for e in result.logs)


async def test_a_stalled_run_is_killed_by_the_heartbeat(make_hub, config) -> None:
    config.agent.heartbeat_timeout = 0.2

    @action(name="hang")
    async def hang(args: Add, ctx) -> None:
        await asyncio.sleep(30)

    model = ScriptedModel([resp(call("hang", '{"a": 1, "b": 1}'))])
    async with make_hub(model, Extension("t", actions=[hang])) as hub:
        result = await hub.send(*CLI, "x")
    assert result.state == RunState.KILLED and result.reason == "stalled"


async def test_run_timeout_kills(make_hub, config) -> None:
    config.agent.run_timeout = 0.3
    config.agent.heartbeat_timeout = 10

    class S(BaseModel):
        pass

    @action(name="tick")
    async def tick(args: S, ctx) -> int:
        await asyncio.sleep(0.05)
        return 1

    model = ScriptedModel(default=resp(call("tick", "{}")))
    config.agent.max_steps = 100
    async with make_hub(model, Extension("t", actions=[tick])) as hub:
        result = await hub.send(*CLI, "x")
    assert result.state == RunState.KILLED and result.reason == "timeout"


async def test_context_memory_render_and_hooks(make_hub) -> None:
    class Chat(BaseModel):
        id: str

    class Note(BaseModel):
        text: str

    @action(name="remember")
    async def remember(args: Note, ctx) -> str:
        ctx.memory["notes"].append(args.text)
        return "saved"

    said: list[str] = []

    @output(type="test:say")
    async def say(content: str, ctx) -> None:
        said.append(content)

    steps: list[int] = []
    chat = Context(
        type="test:chat",
        schema=Chat,
        create=lambda args, ctx: {"notes": []},
        render=lambda mem, ctx: f"<notes>{'; '.join(mem['notes'])}</notes>",
        on_step=lambda ctx: steps.append(ctx.run.steps),
        reply_output="test:say",
        actions=[remember],
        outputs=[say],
    )
    model = ScriptedModel([resp(call("remember", '{"text": "likes tea"}')), resp("<output>noted</output>"), "ok"])

    async with make_hub(model, Extension("t", contexts=[chat])) as hub:
        await hub.send("test:chat:1", data="remember I like tea")
        assert await hub.memory.get("memory:test:chat:1") == {"notes": ["likes tea"]}
        await hub.send("test:chat", {"id": "1"}, "what do I like?")
    assert "<notes>likes tea</notes>" in model.requests[2].messages[0]["content"]
    assert steps == [1, 2, 1]
    assert said == ["noted", "ok"]


async def test_error_hook_can_continue(make_hub) -> None:
    decisions = []

    def on_error(err, ctx):
        decisions.append(type(err).__name__)
        return "continue"

    chat = Context(type="test:chat", on_error=on_error)
    model = ScriptedModel([ModelError("HTTP 400: bad request", status=400)])
    async with make_hub(model, Extension("t", contexts=[chat])) as hub:
        result = await hub.send("test:chat:1", data="x")
    assert decisions == ["ModelError"] and result.state == RunState.COMPLETED


async def test_critical_denial_rejects_the_run(make_hub) -> None:
    class S(BaseModel):
        pass

    @action(name="wipe", critical=True)
    async def wipe(args: S, ctx) -> None:
        raise AssertionError("must not run")

    @action(name="peek")
    async def peek(args: S, ctx) -> str:
        return "ok"

    class Deny(Plugin):
        async def authorize(self, act, ctx):
            return f"{act.name} needs the admin role" if act.name in ("wipe", "peek2") else None

    model = ScriptedModel([resp(call("wipe", "{}"))])
    hub = make_hub(model, Extension("t", actions=[wipe, peek]))
    hub.plugins.add(Deny())
    async with hub:
        result = await hub.send(*CLI, "wipe it")
    assert result.state == RunState.REJECTED and "needs the admin role" in result.reason
    res = next(e for e in result.logs if isinstance(e, ActionResultLog))
    assert res.denied and not res.ok


async def test_run_is_recorded_with_its_event_log(make_hub) -> None:
    model = ScriptedModel([resp(call("add", '{"a": 2, "b": 3}')), resp("<output>5</output>")])
    async with make_hub(model, TOOLS) as hub:
        result = await hub.send(*CLI, "2+3")
        run = await hub.runs.get(result.run_id)
        events = await hub.runs.events(result.run_id)
    assert run.state == RunState.COMPLETED and run.steps == 2 and run.ended is not None
    assert run.prompt_tokens > 0 and run.user is None
    # the same entries; an output is persisted when its send is over
    assert sorted(type(e).__name__ for e in events) == sorted(type(e).__name__ for e in result.logs)
    assert [e.sent for e in events if isinstance(e, OutputLog)] == [True]
    assert isinstance(events[1], ActionCallLog) and events[1].args == {"a": 2, "b": 3}


async def test_platform_user_names_reach_the_prompt_escaped(make_hub) -> None:
    model = ScriptedModel(["hi"])
    async with make_hub(model) as hub:
        await hub.send(*CLI, "hello", user="42", meta={"user_name": 'Ann "<b>"'})
    assert (
        '<input type="text" user="42" name="Ann &quot;&lt;b&gt;&quot;" new="true">hello</input>'
        in model.requests[0].messages[0]["content"]
    )


def test_string_annotations_resolve_even_when_ctx_cannot() -> None:
    import textwrap
    import types

    src = textwrap.dedent("""
        from __future__ import annotations
        from typing import TYPE_CHECKING
        from hub import output
        if TYPE_CHECKING:
            from hub import RunContext

        @output(type="t:x")
        async def send(content: str, ctx: RunContext) -> None:
            pass
    """)
    mod = types.ModuleType("ann_mod")
    exec(compile(src, "ann_mod", "exec"), mod.__dict__)
    assert mod.send.is_text
