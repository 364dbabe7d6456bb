"""``prompt_style = "tools"``: the model's native tool calls, streamed by the fake OpenAI server
as the API streams them and read by the real ``openai`` client: the action loop, live
replies, calls cut off by the token limit or a broken stream, outputs offered as tools."""

from __future__ import annotations

import re

from pydantic import BaseModel

from hub import ActionCallLog, ActionResultLog, Context, ErrorLog, Extension, LiveText, RunState, action, output
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, ToolTurn, tool_turn

CLI = ("cli:session", {"user": "ann"})


class City(BaseModel):
    city: str


def weather_ext(calls: list[str]) -> Extension:
    @action(name="get_weather", description="Current weather for a city.")
    async def get_weather(args: City, ctx) -> dict:
        calls.append(args.city)
        return {"city": args.city, "temperature": 21}

    return Extension(name="weather", actions=[get_weather])


def tools_model(fake: FakeOpenAI) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=fake.url, api_key="k")


def results_in_call_order(result) -> list[ActionResultLog]:
    order = {e.id: i for i, e in enumerate(e for e in result.logs if isinstance(e, ActionCallLog))}
    return sorted((e for e in result.logs if isinstance(e, ActionResultLog)), key=lambda r: order[r.call_id])


def tools_style(config) -> None:
    config.model.prompt_style = "tools"
    config.model.max_retries = 0


async def test_the_run_loops_while_the_model_calls_tools_and_ends_on_a_plain_answer(make_hub, config, out) -> None:
    tools_style(config)
    calls: list[str] = []
    fake = FakeOpenAI(
        [
            tool_turn(None, ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})),
            tool_turn(None, ("get_weather", {"city": "Oslo"})),
            "Paris 21, Tokyo 21, Oslo 21.",
        ],
        chunk=4,
    )
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather in Paris, Tokyo and Oslo?")
    assert result.state == RunState.COMPLETED and result.steps == 3
    assert calls == ["Paris", "Tokyo", "Oslo"]
    assert out.getvalue() == "Paris 21, Tokyo 21, Oslo 21.\n"
    first, second, third = fake.bodies
    (tool,) = first["tools"]
    assert tool["function"]["name"] == "get_weather"
    assert tool["function"]["parameters"]["properties"]["city"]["type"] == "string"
    # the second request carries the first turn's calls and their results, as OpenAI wants them
    turn = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["get_weather", "get_weather"]
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == [c["id"] for c in turn["tool_calls"]]
    assert '"temperature": 21' in answers[0]["content"]
    assert len([m for m in third["messages"] if m["role"] == "tool"]) == 3
    results = [e for e in result.logs if isinstance(e, ActionResultLog)]
    assert [r.ok for r in results] == [True, True, True]


async def test_each_call_runs_as_soon_as_it_is_whole(make_hub, config) -> None:
    """The first call runs (and its result is in) while the model still writes the second one."""
    tools_style(config)

    @action(name="slow_first")
    async def slow_first(args: City, ctx) -> str:
        return "ok"

    # the second call's 400 characters take 50 events, 5 ms apart
    fake = FakeOpenAI(
        [tool_turn(None, ("slow_first", {"city": "A"}), ("slow_first", {"city": "B" * 400})), "done"],
        chunk=8,
        chunk_delay=0.005,
    )
    async with fake, make_hub(tools_model(fake), Extension("x", actions=[slow_first])) as hub:
        result = await hub.send(*CLI, "go")
    assert result.state == RunState.COMPLETED
    calls = [e for e in result.logs if isinstance(e, ActionCallLog)]
    results = [e for e in result.logs if isinstance(e, ActionResultLog)]
    assert len(calls) == 2 and [r.ok for r in results] == [True, True]
    # the first result was recorded before the second call was whole
    assert result.logs.index(results[0]) < result.logs.index(calls[1])


async def test_a_call_cut_by_the_token_limit_never_runs(make_hub, config, out) -> None:
    tools_style(config)
    calls: list[str] = []
    fake = FakeOpenAI(
        [
            tool_turn(
                None,
                ("get_weather", {"city": "Paris"}),
                ("get_weather", '{"city": "Tok'),
                finish_reason="length",
            ),
            "Paris is 21; ask me again for Tokyo.",
        ]
    )
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather?")
    assert calls == ["Paris"], "the whole call ran, the cut one did not"
    results = results_in_call_order(result)
    assert [r.ok for r in results] == [True, False]
    assert "cut off and did not run" in (results[1].error or "")
    told = [m for m in fake.bodies[1]["messages"] if m["role"] == "tool"]
    assert "did not run" in told[1]["content"]
    assert result.state == RunState.COMPLETED and out.getvalue() == "Paris is 21; ask me again for Tokyo.\n"


async def test_a_call_the_stream_broke_inside_never_runs(make_hub, config, out) -> None:
    tools_style(config)
    calls: list[str] = []
    fake = FakeOpenAI(
        [
            tool_turn(None, ("get_weather", {"city": "Paris"}), ("get_weather", '{"city": "Ro'), drop=True),
            "Paris is 21.",
        ]
    )
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather?")
    assert calls == ["Paris"]
    assert any("model stream broke" in e.message for e in result.logs if isinstance(e, ErrorLog))
    results = results_in_call_order(result)
    assert [r.ok for r in results] == [True, False]
    assert out.getvalue() == "Paris is 21.\n"


async def test_a_stream_that_broke_before_anything_acted_is_asked_again(make_hub, config, out) -> None:
    tools_style(config)
    config.model.max_retries = 2
    config.model.retry_base_delay = 0.0
    calls: list[str] = []
    fake = FakeOpenAI(
        [
            tool_turn(None, ("get_weather", '{"city": "Pa'), drop=True),
            tool_turn(None, ("get_weather", {"city": "Paris"})),
            "21 in Paris.",
        ]
    )
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather?")
    assert calls == ["Paris"] and result.state == RunState.COMPLETED
    assert any("asking again" in e.message for e in result.logs if isinstance(e, ErrorLog))
    assert out.getvalue() == "21 in Paris.\n"


async def test_an_unknown_tool_and_bad_arguments_go_back_to_the_model(make_hub, config) -> None:
    tools_style(config)
    calls: list[str] = []
    fake = FakeOpenAI(
        [
            tool_turn(None, ("nope", {}), ("get_weather", {"town": "x"}), ("get_weather", "{not json")),
            "sorry",
        ]
    )
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather?")
    errors = [e.error or "" for e in results_in_call_order(result)]
    assert calls == [] and len(errors) == 3
    assert "unknown action 'nope'" in errors[0]
    assert "invalid arguments" in errors[1] and "city" in errors[1]
    assert "not valid JSON" in errors[2]
    assert result.state == RunState.COMPLETED


async def test_text_with_calls_is_the_reply_and_other_outputs_are_tools(make_hub, config, out) -> None:
    tools_style(config)
    posted: list[tuple[str, str]] = []

    class Channel(BaseModel):
        channel: str = "general"

    @output(type="team:post", attributes=Channel, description="Post to a team channel.")
    async def post(content: str, ctx) -> None:
        posted.append((ctx.attributes.channel, content))

    fake = FakeOpenAI(
        [
            tool_turn("Posting it now.", ("output_team_post", {"content": "Deploy at 5", "channel": "ops"})),
            "Done.",
        ]
    )
    async with fake, make_hub(tools_model(fake), Extension("team", outputs=[post])) as hub:
        result = await hub.send(*CLI, "tell ops we deploy at 5")
    names = [t["function"]["name"] for t in fake.bodies[0]["tools"]]
    assert "output_team_post" in names and "output_cli_message" not in names, "the reply output is the text"
    assert posted == [("ops", "Deploy at 5")]
    assert out.getvalue() == "Posting it now.\nDone.\n"
    assert result.state == RunState.COMPLETED and result.steps == 2


async def test_the_reply_is_live_where_the_output_is_live(make_hub, config) -> None:
    tools_style(config)
    versions: list[str] = []

    @output(type="live:say", live=True)
    async def say(content: LiveText, ctx) -> None:
        async for text in content:
            versions.append(text)

    chat = Context(type="live:chat", reply_output="live:say")
    words = " ".join(f"word{i}" for i in range(80))
    fake = FakeOpenAI([words], chunk=5, chunk_delay=0.002)
    async with fake, make_hub(tools_model(fake), Extension("live", contexts=[chat], outputs=[say])) as hub:
        result = await hub.send("live:chat", {"id": "1"}, "talk")
    assert result.state == RunState.COMPLETED
    assert versions[-1] == words and len(versions) > 2, "the reply grew in place"
    (entry,) = result.outputs
    assert entry.live and entry.sent and entry.content == words


async def test_a_live_reply_cut_by_the_token_limit_is_marked(make_hub, config) -> None:
    tools_style(config)
    final: list[tuple[str, bool]] = []

    @output(type="live:say", live=True)
    async def say(content: LiveText, ctx) -> None:
        text = await content.final()
        final.append((text, content.cut_off))

    chat = Context(type="live:chat", reply_output="live:say")
    fake = FakeOpenAI([tool_turn("The answer is that the forty", finish_reason="length")])
    async with fake, make_hub(tools_model(fake), Extension("live", contexts=[chat], outputs=[say])) as hub:
        await hub.send("live:chat", {"id": "1"}, "talk")
    assert final == [("The answer is that the forty […]", True)]


async def test_tool_call_ids_go_back_as_the_model_gave_them(make_hub, config) -> None:
    """A server that checks ids against its own format (Mistral's: 9 letters and digits)
    gets back the ids it gave, on the calls and on their results, step after step."""
    tools_style(config)
    calls: list[str] = []
    turn1 = ToolTurn(None, [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "Ab3dE6gH9"}])
    turn2 = ToolTurn(None, [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "Zz9yX8wV7"}])
    fake = FakeOpenAI([turn1, turn2, "Both 21."])
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather in Paris and Oslo?")
    assert result.state == RunState.COMPLETED, result.reason
    third = fake.bodies[2]["messages"]
    sent_ids = [c["id"] for m in third if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert sent_ids == ["Ab3dE6gH9", "Zz9yX8wV7"]
    assert [m["tool_call_id"] for m in third if m["role"] == "tool"] == ["Ab3dE6gH9", "Zz9yX8wV7"]
    assert [e.tool_call_id for e in result.logs if isinstance(e, ActionCallLog)] == ["Ab3dE6gH9", "Zz9yX8wV7"]


async def test_a_call_without_an_id_gets_nine_letters_and_digits(make_hub, config) -> None:
    tools_style(config)
    calls: list[str] = []
    nameless = [{"name": "get_weather", "arguments": {"city": c}, "id": None} for c in ("Paris", "Oslo")]
    fake = FakeOpenAI([ToolTurn(None, nameless), "Both 21."])
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather in Paris and Oslo?")
    assert result.state == RunState.COMPLETED, result.reason
    second = fake.bodies[1]["messages"]
    ids = [c["id"] for m in second if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids), ids
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ids


async def test_ids_a_server_repeats_across_turns_keep_each_result_with_its_call(make_hub, config) -> None:
    """Some servers number calls per response ("call_0" every turn): each result still
    follows its own call."""
    tools_style(config)
    calls: list[str] = []
    fake = FakeOpenAI(
        [
            ToolTurn(None, [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_0"}]),
            ToolTurn(None, [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_0"}]),
            "Both 21.",
        ]
    )
    async with fake, make_hub(tools_model(fake), weather_ext(calls)) as hub:
        result = await hub.send(*CLI, "weather in Paris and Oslo?")
    assert result.state == RunState.COMPLETED, result.reason
    answers = [m["content"] for m in fake.bodies[2]["messages"] if m["role"] == "tool"]
    assert ['"Paris"' in answers[0], '"Oslo"' in answers[1]] == [True, True], answers
