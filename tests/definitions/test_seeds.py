"""What the seeds describe, through the public API (issue 11): the bot's own context,
``format``/``schema``/``returns``/``description`` at work, output handlers' results, and
``use()`` composition."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from hub import Context, Extension, Hub, OutputResult, RunContext, ScriptedModel, action, output
from hub.backoff import Backoff
from hub.definitions import Input, NoArgs, TextArgs
from hub.errors import ConfigError, ExtensionError
from hub.logs import ActionResultLog, InputLog, OutputLog
from hub.store import RunState

CALL = '<response><action_call name="{}">{}</action_call></response>'
DONE = "<response></response>"


def step_by_step(first: str) -> Any:
    """A model for concurrent runs: each run calls ``first``, then ends once it sees the result."""

    def answer(request: Any) -> str:
        return DONE if "<action_result" in request.messages[0]["content"] else first

    return ScriptedModel(answer)


# --- 1. the bot's own context -------------------------------------------------------------


class Tally(BaseModel):
    count: int = 0
    facts: list[str] = []


@action(name="tally")
async def tally(args: TextArgs, ctx: RunContext) -> int:
    async def bump(memory: Tally) -> None:
        seen = memory.count
        await asyncio.sleep(0)  # another run's update would slip in here without the lock
        memory.count = seen + 1
        memory.facts.append(args.id)

    memory = await ctx.agent.update(bump)
    return memory.count


bot = Context(
    type="t:bot",
    memory_schema=Tally,
    description="What the bot knows across all its conversations.",
    render=lambda m, ctx: f"<bot_tally>{m.count}</bot_tally>",
    actions=[tally],
)


async def test_the_bots_own_context_is_shared_serialised_rendered_and_saved(make_hub, config) -> None:
    config.agent.context = "t:bot"
    model = step_by_step(CALL.format("tally", '{"id": "x"}'))
    async with make_hub(model, Extension("t", contexts=[bot])) as hub:
        results = await asyncio.gather(*(hub.send(f"cli:session:u{i}", None, "count me") for i in range(10)))
        assert all(r.state == RunState.COMPLETED for r in results), [r.reason for r in results]
        assert await hub.memory.get("memory:t:bot:bot") == {"count": 10, "facts": ["x"] * 10}
        # rendered in every run's prompt, with its description
        prompt = model.requests[-1]
        assert "<bot_tally>" in prompt.messages[0]["content"]
        assert "What the bot knows across all its conversations." in prompt.system
    # a new hub on the same data continues from the saved tally
    model = step_by_step(CALL.format("tally", '{"id": "y"}'))
    async with make_hub(model, Extension("t", contexts=[bot])) as hub:
        result = await hub.send("cli:session:z", None, "count me")
        assert [e.data for e in result.logs if isinstance(e, ActionResultLog)] == [11]


async def test_an_extension_declares_the_bots_context_and_an_unknown_one_is_named(make_hub, config) -> None:
    model = step_by_step(CALL.format("tally", '{"id": "e"}'))
    async with make_hub(model, Extension("t", agent_context=bot)) as hub:
        assert (await hub.send("cli:session:a", None, "hi")).ok
        assert (await hub.memory.get("memory:t:bot:bot"))["count"] == 1
    config.agent.context = "t:nope"
    with pytest.raises(ConfigError, match=r"\[agent\] context: no context type 't:nope'"):
        async with make_hub([], Extension("t", contexts=[bot])):
            pass

    class Pair(BaseModel):
        a: int
        b: int

    config.agent.context = "t:pair"
    with pytest.raises(ConfigError, match=r"'t:pair' cannot be keyed 'bot'"):
        async with make_hub([], Extension("t", contexts=[Context(type="t:pair", schema=Pair, key=lambda p: f"{p.a}")])):
            pass


# --- 3. declared fields at work -------------------------------------------------------------


class Weather(BaseModel):
    temperature: int
    sky: str


@action(name="weather")
async def weather(args: TextArgs, ctx: RunContext) -> Weather:
    if args.id == "bad":
        return {"temperature": "hot", "sky": "sunny"}  # type: ignore[return-value]
    return Weather(temperature=72, sky="sunny")


async def test_an_action_result_is_validated_against_returns(make_hub) -> None:
    model = ScriptedModel([CALL.format("weather", '{"id": "bad"}'), DONE, CALL.format("weather", '{"id": "ok"}'), DONE])
    async with make_hub(model, Extension("t", actions=[weather])) as hub:
        bad = await hub.send("cli:session:a", None, "weather?")
        (res,) = [e for e in bad.logs if isinstance(e, ActionResultLog)]
        assert not res.ok and "does not match its returns schema" in res.error and "temperature" in res.error
        assert "does not match its returns schema" in model.requests[1].messages[0]["content"]
        good = await hub.send("cli:session:a", None, "weather?")
        (res,) = [e for e in good.logs if isinstance(e, ActionResultLog)]
        assert res.ok and res.data == {"temperature": 72, "sky": "sunny"}


class Card(BaseModel):
    title: str
    body: str


async def test_output_format_is_how_the_log_shows_it(make_hub, out) -> None:
    @output(type="t:card", format=lambda card: f"[card] {card.title}")
    async def card(content: Card, ctx: RunContext) -> None:
        out.write(content.body)

    reply = '<response><output type="t:card">{"title": "Hello", "body": "long text"}</output></response>'
    model = ScriptedModel([reply, "<response><output>ok</output></response>"])
    async with make_hub(model, Extension("t", outputs=[card])) as hub:
        first = await hub.send("cli:session:a", None, "card please")
        (entry,) = [e for e in first.outputs if e.type == "t:card"]
        assert entry.sent and entry.formatted == "[card] Hello"
        await hub.send("cli:session:a", None, "again")
        history = model.requests[1].messages[0]["content"]
        assert '<output type="t:card">[card] Hello</output>' in history and "long text" not in history
        events = await hub.runs.events(first.run_id)
        assert any(isinstance(e, OutputLog) and e.formatted == "[card] Hello" for e in events)


class Ping(BaseModel):
    text: str
    priority: int = 0


async def test_input_schema_is_checked_and_format_shows_it(make_hub) -> None:
    sends: list[Any] = []

    async def subscribe(send: Any, hub: Hub) -> Any:
        sends.append(send)

        async def stop() -> None:
            pass

        return stop

    ping = Input(type="t:ping", subscribe=subscribe, schema=Ping, format=lambda p: f"ping: {p.text} (p{p.priority})")
    model = ScriptedModel(["<response><output>pong</output></response>"])
    async with make_hub(model, Extension("pinger", inputs=[ping])):
        (send,) = sends
        with pytest.raises(ExtensionError, match=r"pinger.*input 't:ping'.*priority"):
            await send("cli:session:a", None, {"text": "hi", "priority": "urgent"})
        sub = await send("cli:session:a", None, {"text": "hi", "priority": 2})
        result = await sub.wait()
        (inp,) = [e for e in result.logs if isinstance(e, InputLog)]
        assert inp.type == "t:ping" and inp.formatted == "ping: hi (p2)"
        assert "ping: hi (p2)" in model.requests[0].messages[0]["content"]
        ping.format = lambda p: p.missing  # a format that raises is the extension's bug, named
        with pytest.raises(ExtensionError, match=r"pinger.*input 't:ping': its format failed: AttributeError"):
            await send("cli:session:a", None, {"text": "hi"})


# --- 4. what output handlers return ------------------------------------------------------


async def test_an_output_handler_returns_several_entries_and_reads_its_own(make_hub) -> None:
    seen: list[str] = []

    @output(type="t:split")
    async def split(content: str, ctx: RunContext) -> list[OutputResult]:
        seen.append(ctx.output.id)  # its own log entry
        return [OutputResult(data={"message_id": i}, processed=i > 0) for i in range(2)]

    reply = '<response><output type="t:split">a long message</output></response>'
    model = ScriptedModel([reply, DONE])
    async with make_hub(model, Extension("t", outputs=[split])) as hub:
        result = await hub.send("cli:session:a", None, "go")
        assert result.state == RunState.COMPLETED
        entries = [e for e in result.outputs if e.type == "t:split"]
        assert [e.data for e in entries] == [{"message_id": 0}, {"message_id": 1}]
        assert entries[0].id == seen[0] and all(e.sent for e in entries)
    # the one not processed is shown as new, and the run took a second step for it
    assert result.steps == 2
    second = model.requests[1].messages[0]["content"]
    assert second.count('<output type="t:split" new="true">') == 1


async def test_plain_data_from_an_output_handler_still_updates_its_entry(make_hub) -> None:
    @output(type="t:plain")
    async def plain(content: str, ctx: RunContext) -> dict[str, int]:
        return {"id": 7}

    model = ScriptedModel(['<response><output type="t:plain">hi</output></response>'])
    async with make_hub(model, Extension("t", outputs=[plain])) as hub:
        result = await hub.send("cli:session:a", None, "go")
        assert result.steps == 1 and [e.data for e in result.outputs] == [{"id": 7}]


# --- 5. use() -------------------------------------------------------------------------------


class Profile(BaseModel):
    name: str = ""
    visits: int = 0


async def test_used_contexts_are_prepared_concurrently_with_their_overrides(make_hub) -> None:
    saved: dict[str, Any] = {}
    loading: set[str] = set()
    all_loading = asyncio.Event()

    async def profile_load(cid: str, ctx: RunContext) -> Any:
        loading.add(cid)
        if len(loading) == 2:
            all_loading.set()
        await asyncio.wait_for(all_loading.wait(), 5)  # only when both loads run at once
        return saved.get(cid)

    async def profile_create(args: TextArgs, ctx: RunContext) -> Profile:
        await asyncio.sleep(0)
        return Profile(name=args.id.title())

    async def profile_save(cid: str, memory: Profile, ctx: RunContext) -> None:
        saved[cid] = memory.model_dump()

    profile = Context(
        type="t:profile", memory_schema=Profile, load=profile_load, create=profile_create, save=profile_save
    )
    topics = Context(
        type="t:topics", load=profile_load, save=lambda cid, m, ctx: asyncio.sleep(0, saved.update({cid: m}))
    )

    @action(name="visit")
    async def visit(args: NoArgs, ctx: RunContext) -> str:
        prof = next(u for u in ctx.context.used if u.type == "t:profile")
        prof.memory.visits += 1
        return prof.memory.name

    chat = Context(
        type="t:chat",
        schema=TextArgs,
        use=lambda args, ctx: [(profile, {"id": ctx.user}), (topics, {"id": ctx.user})],
        actions=[visit],
        reply_output="cli:message",
    )
    model = step_by_step(CALL.format("visit", "{}"))
    async with make_hub(model, Extension("t", contexts=[chat, profile, topics])) as hub:
        for room in ("room1", "room2"):  # two conversations, one user profile
            result = await hub.send(f"t:chat:{room}", None, "hello", user="ann")
            assert result.state == RunState.COMPLETED, result.reason
            all_loading.clear()
            loading.clear()
        assert saved["t:profile:ann"] == {"name": "Ann", "visits": 2}
        assert saved["t:topics:ann"] == {}
        assert json.dumps(saved["t:profile:ann"]) and await hub.memory.get("memory:t:profile:ann") is None


# --- 6. a store outage is explicit, and its inputs are answered once it is over --------------


async def test_a_store_outage_fails_runs_visibly_and_their_input_is_answered_after(config, make_hub, out) -> None:
    import sqlite3

    import aiohttp
    from prometheus_client.parser import text_string_to_metric_families

    from hub.config import HttpSection

    config.http = HttpSection(port=0)
    holder: list[sqlite3.Connection] = []

    def answer(request: Any) -> str:
        if not holder:  # the outage starts while the first run is thinking: another process
            other = sqlite3.connect(hub._db.path, isolation_level=None, check_same_thread=False)
            other.execute("BEGIN IMMEDIATE")  # holds the write lock, so no write lands
            holder.append(other)
            return "<response><reasoning>let me think</reasoning></response>"  # nothing answered yet
        return "<response><output>answered</output></response>"

    hub = make_hub(ScriptedModel(answer))
    db = hub._db
    db.busy_timeout, db.busy_retries, db.retry_delay, db.degraded_for = 0.01, 1, 0.001, 0.0
    hub.intake.store_retry, hub.intake.store_retry_attempts = Backoff(first=0.2, most=0.2, jitter=0), 5
    async with hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        result = await hub.send("cli:session:ann", None, "are you there?")
        assert result.state == RunState.FAILED and result.reason.startswith("store_error: "), result.reason
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 503 and (await resp.json())["status"] == "degraded"
        async with session.get(f"{base}/metrics") as resp:
            samples = {s.name: s.value for f in text_string_to_metric_families(await resp.text()) for s in f.samples}
        assert samples["hub_store_degraded"] == 1 and samples["hub_store_errors_total"] >= 1
        # nothing was answered, so the input waits in the inbox (not in a memory fallback)
        (pending,) = await hub.inbox.pending()
        assert pending.entry.content == "are you there?"
        holder[0].execute("ROLLBACK")  # the store is back
        holder[0].close()
        async with asyncio.timeout(10):  # the intake's retry answers it, once
            while await hub.inbox.pending():
                await asyncio.sleep(0.02)
        runs = [r for r in await hub.runs.list(limit=10) if r.context == "cli:session:ann"]
        assert [str(r.state) for r in runs].count("completed") == 1, [(r.state, r.reason) for r in runs]
        assert out.getvalue().count("answered") == 1
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 200


def test_hub_check_names_an_unknown_bot_context(tmp_path) -> None:
    from hub import load_config
    from hub.cli import check_config

    path = tmp_path / "config.toml"
    for name, error in (("cli:nope", True), ("cli:session", False)):
        path.write_text(f'[hub]\ndata_dir = "{tmp_path}"\n[agent]\ncontext = "{name}"\n[extensions.cli]\n')
        errors = check_config(load_config(path)).errors
        named = [e for e in errors if f"agent.context: '{name}' names no context type" in e]
        assert bool(named) == error, errors
        assert not named or "cli:session" in named[0]
