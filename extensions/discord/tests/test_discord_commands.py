"""The hub's chat commands as Discord application commands: synced at start, each interaction
answered through its callback (deferred past the 3-second window when the answer is slow),
with the real discord.py client against the loopback fake."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_discord import running

from hub import CommandContext, Extension, ScriptedModel, command
from hub.testing import temp_config
from hub.testing.discord import FakeDiscord

BUILT_IN = ["start", "help", "new", "stop", "link", "unlink"]


@command("weather", description="The weather where you are", arguments="a city")
async def weather(cmd: CommandContext) -> str:
    return f"Sunny in {cmd.args or 'your town'}."


@command("slow", description="Takes its time")
async def slow(cmd: CommandContext) -> str:
    await asyncio.sleep(4)  # past Discord's 3-second window: the interaction must be deferred
    return "Finally done."


@command("quiet", description="Answers nothing")
async def quiet(cmd: CommandContext) -> None:
    return None


@command("ask", description="Hands the question to the model", arguments="a question")
async def ask(cmd: CommandContext) -> None:
    await cmd.run()


TOOLS = Extension("tools", commands=[weather, slow, quiet, ask])


async def test_commands_are_synced_globally_and_help_is_answered_through_the_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch, extensions=[TOOLS], default=None) as r:
        dc = r.dc
        await dc.wait_for(lambda: bool(dc.command_names()))
        assert dc.command_names() == [*BUILT_IN, "weather", "slow", "quiet", "ask"]
        (registered,) = [c for c in dc.state.commands[None] if c["name"] == "weather"]
        assert registered["options"][0]["name"] == "text" and registered["options"][0]["required"] is False
        iid = dc.push_interaction("help")
        await dc.wait_for(lambda: bool(dc.answers(iid)))
        it = dc.state.interactions[iid]
        assert [c["type"] for c in it.callbacks] == [4]  # answered at once, in the callback
        assert dc.answers(iid)[0].startswith("Commands:\n/start — Say hello and what I am")
        assert "/weather [a city] — The weather where you are" in dc.answers(iid)[0]
        iid = dc.push_interaction("weather", text="Paris")
        await dc.wait_for(lambda: bool(dc.answers(iid)))
        assert dc.answers(iid) == ["Sunny in Paris."]
    assert r.model.requests == []
    assert [c.name for c in dc.calls("PUT /applications/{application_id}/commands")] != []


async def test_commands_are_synced_per_guild_when_guild_ids_is_set(tmp_path: Path, monkeypatch) -> None:
    dc = FakeDiscord()
    async with dc, running(tmp_path, monkeypatch, dc=dc, guild_ids=[dc.guild_id]) as r:
        await dc.wait_for(lambda: bool(dc.command_names(dc.guild_id)))
        assert dc.command_names(dc.guild_id) == BUILT_IN and dc.command_names() == []
        iid = dc.push_interaction("start")
        await dc.wait_for(lambda: bool(dc.answers(iid)))
    assert dc.answers(iid) == ["Hi! Send me a message, or /help to see what I can do."]
    assert r.model.requests == []


async def test_a_slow_answer_is_deferred_then_edited_in(tmp_path: Path, monkeypatch) -> None:
    async with running(tmp_path, monkeypatch, extensions=[TOOLS]) as r:
        dc = r.dc
        await dc.wait_for(lambda: bool(dc.command_names()))
        iid = dc.push_interaction("slow")
        await dc.wait_for(lambda: bool(dc.answers(iid)) and dc.answers(iid) != [""], timeout=10)
        it = dc.state.interactions[iid]
    assert [c["type"] for c in it.callbacks] == [5]  # deferred within the window ("thinking...")
    assert dc.answers(iid) == ["Finally done."]  # and the response edited to the answer


async def test_an_interaction_nothing_answered_is_told_done(tmp_path: Path, monkeypatch) -> None:
    async with running(tmp_path, monkeypatch, extensions=[TOOLS]) as r:
        dc = r.dc
        await dc.wait_for(lambda: bool(dc.command_names()))
        iid = dc.push_interaction("quiet")
        await dc.wait_for(lambda: bool(dc.state.interactions[iid].callbacks))
        (callback,) = dc.state.interactions[iid].callbacks
    assert callback["type"] == 4 and callback["data"]["content"] == "Done." and callback["data"]["flags"] == 64


async def test_a_run_a_command_starts_answers_through_the_interaction(tmp_path: Path, monkeypatch) -> None:
    model = ScriptedModel([], default="It is 42.", delay=2.0)  # the model answers past the 3-second window
    async with running(tmp_path, monkeypatch, extensions=[TOOLS], model=model) as r:
        dc = r.dc
        await dc.wait_for(lambda: bool(dc.command_names()))
        iid = dc.push_interaction("ask", text="what is the answer?")
        await dc.wait_for(lambda: "It is 42." in dc.answers(iid), timeout=10)
        it = dc.state.interactions[iid]
    assert "what is the answer?" in r.model.requests[0].messages[-1]["content"]
    assert it.callbacks[0]["type"] in (4, 5) and dc.answers(iid)[-1] == "It is 42."


async def test_a_dm_from_someone_the_policy_keeps_out_is_refused_privately(tmp_path: Path, monkeypatch) -> None:
    config = temp_config(tmp_path)
    async with running(tmp_path, monkeypatch, config=config, dm_policy="allowlist") as r:
        dc = r.dc
        await dc.wait_for(lambda: bool(dc.command_names()))
        iid = dc.push_interaction("help", channel_id=dc.dm_channel_id)
        await dc.wait_for(lambda: bool(dc.state.interactions[iid].callbacks))
        (callback,) = dc.state.interactions[iid].callbacks
        assert not await r.hub.inbox.seen(f"discord:interaction:{iid}")  # nothing recorded
    assert callback["data"]["flags"] == 64 and "may not" in callback["data"]["content"]


async def test_a_command_sync_that_fails_at_start_is_retried_until_discord_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put = "PUT /applications/{application_id}/guilds/{guild_id}/commands"
    dc = FakeDiscord()
    async with dc:
        # 503: discord.py does not retry it itself; an outage of the commands API at start
        dc.fail_next(put, status=503, count=2)
        async with running(tmp_path, monkeypatch, dc=dc, guild_ids=[dc.guild_id]):
            await dc.wait_for(lambda: bool(dc.command_names(dc.guild_id)), timeout=10)
        assert dc.command_names(dc.guild_id) == BUILT_IN
        assert [c.status for c in dc.calls(put)] == [503, 503, 200]
