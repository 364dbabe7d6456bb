"""Chat commands are answered by the intake, without a model call: the built-in /start, /help,
/new and /stop, the extensions' @command, [commands] enabled/disabled, roles, and the trace."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from hub import CommandCall, CommandContext, Extension, ExtensionError, Hub, RunState, command
from hub.logs import InputLog, OutputLog
from hub.store import InMemoryInbox, InMemoryRunStore, InMemoryStore

SLOW = "<response><output>first part</output><output>" + "word " * 300 + "</output></response>"


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


async def cmd(rig: Any, text: str, *, user: str = "ann") -> Any:
    name, _, args = text[1:].partition(" ")
    return await rig.hub.send("cli:session", {"user": user}, text, user=user, command=CommandCall(name, args))


def answer(result: Any) -> str:
    outs = [e for e in result.logs if isinstance(e, OutputLog) and e.sent]
    assert len(outs) == 1, result.logs
    return str(outs[0].content)


async def test_start_greets_from_the_persona_without_a_model_call(make_rig) -> None:
    rig = make_rig()
    async with rig.hub:
        result = await cmd(rig, "/start")
        assert result.ok and result.steps == 0
        assert answer(result) == "Hi, I'm Hub! Send me a message, or /help to see what I can do."
        (rig.contexts / "default.toml").write_text(
            'name = "Hub"\ninstructions = "Be terse."\ngreeting = "Ahoy! Ask me anything."\n', encoding="utf-8"
        )
        assert answer(await cmd(rig, "/start")) == "Ahoy! Ask me anything."
    assert rig.model.requests == []
    assert rig.out.getvalue().splitlines()[-1] == "Ahoy! Ask me anything."


async def test_a_command_is_a_run_of_its_own_in_the_trace(make_rig) -> None:
    rig = make_rig()
    async with rig.hub:
        result = await cmd(rig, "/help")
        record = await rig.hub.runs.get(result.run_id)
        events = await rig.hub.runs.events(result.run_id)
        pending = await rig.hub.inbox.pending()
    assert record is not None and record.state == RunState.COMPLETED and record.steps == 0
    assert [e.kind for e in events] == ["input", "output", "state"]
    inp, out = events[0], events[1]
    assert isinstance(inp, InputLog) and inp.content == "/help" and inp.meta["command"] == {"name": "help", "args": ""}
    assert isinstance(out, OutputLog) and out.sent and out.data["command"] == "help"
    assert pending == []  # answered: not handled again after a restart


@command("weather", description="The weather in a city", arguments="a city")
async def weather(cmd: CommandContext) -> str:
    return f"Sunny in {cmd.args or 'your town'} for {cmd.user} in {cmd.conversation}"


@command("ask", description="Hand a question to the model")
async def ask(cmd: CommandContext) -> None:
    await cmd.reply("Thinking...")
    await cmd.run(f"Answer briefly: {cmd.args}")


@command("purge", description="Admins only", roles=["admin"])
async def purge(cmd: CommandContext) -> str:
    return f"purged, {sorted(cmd.roles)}"


TOOLS = Extension("tools", commands=[weather, ask, purge])


async def test_an_extensions_command_gets_the_conversation_the_user_and_the_arguments(make_rig) -> None:
    rig = make_rig(extensions=[TOOLS])
    async with rig.hub:
        assert answer(await cmd(rig, "/weather Paris")) == "Sunny in Paris for ann in cli:session:ann"
    assert rig.model.requests == []


async def test_a_command_may_answer_and_start_a_run(make_rig) -> None:
    rig = make_rig(default="<response><output>42</output></response>", extensions=[TOOLS])
    async with rig.hub:
        result = await cmd(rig, "/ask the answer?")
        assert answer(result) == "Thinking..."
        await until(lambda: rig.out.getvalue().endswith("42\n"))
    assert len(rig.model.requests) == 1
    assert "Answer briefly: the answer?" in rig.model.requests[0].messages[-1]["content"]


async def test_commands_limited_to_roles(make_rig, config) -> None:
    config.roles = {"admin": {"cli": ["boss"]}}
    rig = make_rig(extensions=[TOOLS])
    async with rig.hub:
        assert answer(await cmd(rig, "/purge")) == "You may not use /purge."
        assert answer(await cmd(rig, "/purge", user="boss")) == "purged, ['admin']"
        ann = answer(await cmd(rig, "/help"))
        boss = answer(await cmd(rig, "/help", user="boss"))
        everyone, own = rig.hub.commands.menus("cli")
    assert ann == (
        "Commands:\n/start — Say hello and what I am\n/help — The commands you can use\n"
        "/new — Start a new conversation (I forget this one's history)\n/stop — Stop the answer I am writing\n"
        "/link — Join your accounts on other platforms: /link gives a code, /link CODE uses it\n"
        "/unlink — Detach this account from your other accounts\n"
        "/weather [a city] — The weather in a city\n/ask — Hand a question to the model"
    )
    assert boss == ann + "\n/purge — Admins only"
    assert [i.name for i in everyone] == ["start", "help", "new", "stop", "link", "unlink", "weather", "ask"]
    assert list(own) == ["boss"] and own["boss"][-1].name == "purge"


async def test_new_starts_over_history_and_memory_but_keeps_episodes(make_rig) -> None:
    rig = make_rig(default="<response><output>noted</output></response>")
    async with rig.hub:
        assert (await rig.say("my name is Ann")).ok
        memory = rig.hub.memory
        await memory.set("memory:cli:session:ann", {"likes": "tea"})
        await memory.set("episode:keep", {"an": "episode"})  # what /new must leave alone
        result = await cmd(rig, "/new")
        assert answer(result) == "Started a new conversation: what we said before is forgotten."
        assert await memory.get("working-memory:cli:session:ann") is None
        assert await memory.get("memory:cli:session:ann") is None
        assert await memory.get("episode:keep") == {"an": "episode"}
        assert (await rig.say("who am I?")).ok
    prompt = rig.model.requests[-1].messages[-1]["content"]
    assert "who am I?" in prompt and "my name is Ann" not in prompt and "noted" not in prompt


async def test_new_forgets_even_when_a_message_waits_behind_the_answer_it_stops(make_rig) -> None:
    """A message queued behind the answer /new stops is answered in the new conversation: the
    run that loaded the old history never saves it back (issue 40, item 2)."""
    rig = make_rig(["<response><output>noted</output></response>", SLOW], chunk=4, chunk_delay=0.01)
    rig.model.default = "<response><output>fresh</output></response>"
    async with rig.hub:
        assert (await rig.say("my name is Ann")).ok
        long = await rig.hub.submit("cli:session", {"user": "ann"}, "tell me a long story", user="ann")
        await until(lambda: "first part" in rig.out.getvalue())  # the answer is being written
        queued = await rig.hub.submit("cli:session", {"user": "ann"}, "and another", user="ann")
        assert answer(await cmd(rig, "/new")) == "Started a new conversation: what we said before is forgotten."
        await long.wait()
        assert (await queued.wait()).ok
        history = str(await rig.hub.memory.get("working-memory:cli:session:ann"))
        assert (await rig.say("who am I?")).ok
    assert "my name is Ann" not in history and "long story" not in history, history
    prompt = rig.model.requests[-1].messages[-1]["content"]
    assert "who am I?" in prompt and "my name is Ann" not in prompt and "long story" not in prompt


async def test_stop_ends_the_answer_being_written(make_rig) -> None:
    rig = make_rig([SLOW], chunk=4, chunk_delay=0.01)
    async with rig.hub:
        sub = await rig.hub.submit("cli:session", {"user": "ann"}, "tell me a long story", user="ann")
        await until(lambda: "first part" in rig.out.getvalue())  # the answer is being written
        stop = await cmd(rig, "/stop")
        result = await sub.wait()
        assert answer(await cmd(rig, "/stop")) == "Nothing to stop."  # and it is over: a sentinel
    assert (result.state, result.reason) == (RunState.KILLED, "stopped by user")
    assert answer(stop) == "Stopped."
    assert rig.out.getvalue() == "first part\nStopped.\nNothing to stop.\n"  # no more of the answer, no failure reply
    assert len(rig.model.requests) == 1


async def test_commands_can_be_turned_off(make_rig, config) -> None:
    config.commands.disabled = ["new"]
    rig = make_rig(default="<response><output>from the model</output></response>")
    async with rig.hub:
        assert "/new" not in answer(await cmd(rig, "/help"))
        new = await cmd(rig, "/new")  # not a command any more: text for the model
        assert answer(new) == "from the model" and new.steps == 1
        rig.hub.commands.settings.enabled = False
        off = await cmd(rig, "/help")
        assert answer(off) == "from the model"
        assert rig.hub.commands.names() == set()
    assert len(rig.model.requests) == 2 and "/help" in rig.model.requests[-1].messages[-1]["content"]


async def test_an_extension_may_not_take_a_built_in_name_unless_it_is_disabled(make_hub, config) -> None:
    @command("help", description="My own help")
    async def my_help(cmd: CommandContext) -> str:
        return "mine"

    hub = make_hub((), Extension("mine", commands=[my_help]))
    with pytest.raises(ExtensionError, match=r"mine.*command /help is built in: add 'help' to \[commands\] disabled"):
        await hub.start()
    config.commands.disabled = ["help"]
    hub = make_hub((), Extension("mine", commands=[my_help]))
    async with hub:
        result = await hub.send("cli:session", {"user": "a"}, "/help", user="a", command=CommandCall("help"))
    assert answer(result) == "mine"


def test_a_command_is_declared_with_a_name_platforms_take_and_a_description() -> None:
    async def handler(cmd: CommandContext) -> None:
        return None

    with pytest.raises(ValueError, match="1 to 32 of a-z"):
        command("Weather", description="x")(handler)
    with pytest.raises(ValueError, match="needs a description"):
        command("weather")(handler)
    with pytest.raises(ValueError, match="over 100 characters"):
        command("weather", description="x" * 101)(handler)
    with pytest.raises(TypeError, match="must be an async function"):
        command("weather", description="x")(lambda cmd: None)  # type: ignore[arg-type,return-value]


async def test_a_redelivered_command_is_answered_once(make_rig) -> None:
    rig = make_rig()
    async with rig.hub:
        first = await rig.hub.send(
            "cli:session", {"user": "ann"}, "/start", user="ann", platform_id="x:1", command=CommandCall("start")
        )
        again = await rig.hub.send(
            "cli:session", {"user": "ann"}, "/start", user="ann", platform_id="x:1", command=CommandCall("start")
        )
    assert first is not None and first.ok and again is None
    assert rig.out.getvalue().count("Hi, I'm Hub!") == 1


async def test_a_command_recorded_before_a_crash_is_answered_as_a_command(config, out) -> None:
    from hub import ScriptedModel
    from hub_cli import CliSettings
    from hub_cli import extension as cli_extension

    memory, runs, inbox = InMemoryStore(), InMemoryRunStore(), InMemoryInbox()
    entry = InputLog(type="cli:stdin", content="/help", user="ann", meta={"command": {"name": "help", "args": ""}})
    await inbox.record("cli:session:ann", entry)  # recorded, then the process died
    model = ScriptedModel([])
    hub = Hub(
        config,
        model=model,
        memory=memory,
        runs=runs,
        inbox=inbox,
        load_extensions=False,
        extensions=[cli_extension(CliSettings(stdin=False), out=out)],
    )
    async with hub:
        await until(lambda: "Commands:" in out.getvalue())
        async with asyncio.timeout(5):
            while await inbox.pending():  # done once answered
                await asyncio.sleep(0.01)
    assert model.requests == []


def test_two_extensions_may_not_declare_one_command() -> None:
    from hub.definitions import Registry

    registry = Registry()
    registry.register(Extension("a", commands=[weather]))
    with pytest.raises(ExtensionError, match="command 'weather' is already defined by extension 'a'"):
        registry.register(Extension("b", commands=[weather]))


# --- roles for the built-in commands (issue 40, item 7) --------------------------------------


async def group_cmd(rig: Any, text: str, *, user: str) -> Any:
    """``text`` from ``user`` in a conversation several people share (cli:session:room)."""
    name, _, args = text[1:].partition(" ")
    call = CommandCall(name, args, group=True)
    return await rig.hub.send("cli:session", {"user": "room"}, text, user=user, command=call)


async def test_in_a_group_only_an_admin_may_start_over(make_rig, config) -> None:
    config.roles = {"admin": {"cli": ["boss"]}}
    rig = make_rig()
    async with rig.hub:
        memory = rig.hub.memory
        await memory.set("memory:cli:session:room", {"team": "blue"})
        refused = answer(await group_cmd(rig, "/new", user="ann"))
        assert refused == "You may not use /new here: in a group it needs the role admin."
        assert await memory.get("memory:cli:session:room") == {"team": "blue"}, "a member wiped the group"
        assert answer(await group_cmd(rig, "/new", user="boss")).startswith("Started a new conversation")
        assert await memory.get("memory:cli:session:room") is None
        # in private, /new needs no role
        await memory.set("memory:cli:session:ann", {"likes": "tea"})
        assert answer(await cmd(rig, "/new")).startswith("Started a new conversation")
        assert await memory.get("memory:cli:session:ann") is None
    assert rig.model.requests == []


async def test_in_a_group_stop_from_a_member_stops_only_their_own_answer(make_rig, config) -> None:
    config.roles = {"admin": {"cli": ["boss"]}}
    rig = make_rig([SLOW], chunk=4, chunk_delay=0.01)
    async with rig.hub:
        sub = await rig.hub.submit("cli:session", {"user": "room"}, "tell me a long story", user="ann")
        await until(lambda: "first part" in rig.out.getvalue())
        assert answer(await group_cmd(rig, "/stop", user="bob")) == "Nothing of yours to stop."
        assert not sub.result.done(), "bob stopped ann's answer"
        assert answer(await group_cmd(rig, "/stop", user="ann")) == "Stopped."
        result = await sub.wait()
    assert (result.state, result.reason) == (RunState.KILLED, "stopped by user")


async def test_an_admin_stops_anyones_answer_in_a_group(make_rig, config) -> None:
    config.roles = {"admin": {"cli": ["boss"]}}
    rig = make_rig([SLOW], chunk=4, chunk_delay=0.01)
    async with rig.hub:
        sub = await rig.hub.submit("cli:session", {"user": "room"}, "tell me a long story", user="ann")
        await until(lambda: "first part" in rig.out.getvalue())
        assert answer(await group_cmd(rig, "/stop", user="boss")) == "Stopped."
        result = await sub.wait()
    assert result.state == RunState.KILLED


async def test_commands_roles_limit_a_built_in_command_everywhere(make_rig, config) -> None:
    config.roles = {"admin": {"cli": ["boss"]}}
    config.commands.roles = {"stop": ["admin"]}
    rig = make_rig()
    async with rig.hub:
        assert answer(await cmd(rig, "/stop")) == "You may not use /stop: it needs the role admin."
        assert answer(await cmd(rig, "/stop", user="boss")) == "Nothing to stop."
        ann = answer(await cmd(rig, "/help"))
        boss = answer(await cmd(rig, "/help", user="boss"))
    assert "/stop" not in ann and "/stop" in boss


async def test_commands_roles_replace_an_extensions_own(make_rig, config) -> None:
    config.roles = {"ops": {"cli": ["olga"]}}
    config.commands.roles = {"purge": ["ops"], "weather": ["ops"]}
    rig = make_rig(extensions=[TOOLS])
    async with rig.hub:
        assert answer(await cmd(rig, "/purge", user="olga")) == "purged, ['ops']"
        assert answer(await cmd(rig, "/weather", user="ann")) == "You may not use /weather: it needs the role ops."


def test_command_roles_name_roles_and_commands_that_exist() -> None:
    from hub.config import CommandsSection

    with pytest.raises(ValueError, match="not a command name"):
        CommandsSection.model_validate({"roles": {"/bad name": ["admin"]}})
    assert CommandsSection().group_roles == {"new": ["admin"], "stop": ["admin"]}
