"""The hub's chat commands as Slack slash commands: acknowledged within Slack's 3 seconds,
the answer on the ack (or on the response_url when it comes later), a redelivered envelope
answered once; the real slack-bolt against the loopback fake (``hub.testing.slack``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from test_slack import running

from hub import CommandContext, Extension, command
from hub_slack._commands import ACK_WITHIN


@command("slow", description="Takes its time")
async def slow(cmd: CommandContext) -> str:
    await asyncio.sleep(ACK_WITHIN + 0.5)
    return "Done **slowly**."


TOOLS = Extension("tools", commands=[slow])


async def test_help_is_acknowledged_within_three_seconds_with_its_answer(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl = r.sl
        started = time.monotonic()
        trigger = sl.push_command("/help")
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        assert time.monotonic() - started < 3.0
        (env,) = sl.acked("slash_commands")
        ack = env["ack"]
        assert ack["response_type"] == "in_channel"
        assert "/new" in ack["text"] and "/stop" in ack["text"]
        assert ack["blocks"][0]["text"]["type"] == "mrkdwn"
        assert not r.model.requests, "answered without the model"
        assert await r.hub.received(f"slack:command:{trigger}")
        assert sl.sent == []  # nothing posted beside the ack


async def test_new_starts_the_conversation_over(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        sl.push_message(st.dm, "remember the word kumquat")
        await sl.wait_sent(1)
        sl.push_command("/new", channel=st.dm)
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        assert sl.acked("slash_commands")[0]["ack"]["text"]
        sl.push_message(st.dm, "what was the word?")
        await sl.wait_sent(2)
        last = r.model.requests[-1]
        assert "kumquat" not in str(last.messages), "history started over"


async def test_a_slow_answer_is_acked_empty_in_time_then_posted_to_the_response_url(tmp_path: Path) -> None:
    async with running(tmp_path, extensions=[TOOLS]) as r:
        sl = r.sl
        started = time.monotonic()
        trigger = sl.push_command("/slow")
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        assert time.monotonic() - started < 3.0
        assert not sl.acked("slash_commands")[0]["ack"]  # an empty ack: Slack shows the command
        await sl.wait_for(lambda: bool(sl.state.responses), timeout=10)
        (response,) = sl.state.responses
        assert response["trigger"] == trigger and response["response_type"] == "in_channel"
        assert response["text"] == "Done slowly." and response["blocks"][0]["text"]["text"] == "Done *slowly*."


async def test_a_redelivered_command_is_answered_once(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl = r.sl
        trigger = sl.push_command("/help")
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        (env,) = sl.acked("slash_commands")
        sl.push_envelope("slash_commands", dict(env["payload"]), accepts_response_payload=True)
        await sl.wait_for(lambda: len(sl.acked("slash_commands")) == 2)
        assert not sl.acked("slash_commands")[1]["ack"]  # acknowledged, nothing answered again
        assert sl.state.responses == [] and sl.sent == []
        assert await r.hub.received(f"slack:command:{trigger}")


async def test_a_user_the_access_rules_leave_out_is_told_so_privately(tmp_path: Path) -> None:
    async with running(tmp_path, dm_policy="allowlist", allowed_users=["UFRIEND1"]) as r:
        sl, st = r.sl, r.sl.state
        trigger = sl.push_command("/help", channel=st.dm)
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        ack = sl.acked("slash_commands")[0]["ack"]
        assert ack["response_type"] == "ephemeral" and "may not" in ack["text"].lower()
        assert not await r.hub.received(f"slack:command:{trigger}")


async def test_stop_during_a_slow_answer_kills_the_run_and_sends_nothing_more(tmp_path: Path) -> None:
    from hub import ScriptedModel

    slow = '<response><output type="slack:message">On it.</output><output type="slack:message">' + (
        "and then " * 400 + "</output></response>"
    )
    model = ScriptedModel([slow], chunk=4, chunk_delay=0.01)
    async with running(tmp_path, model=model) as r:
        sl, st = r.sl, r.sl.state
        sl.push_message(st.dm, "tell me a long story")
        await sl.wait_sent(1)  # the first output is out; the second is being written
        sl.push_command("/stop", channel=st.dm)
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        assert sl.acked("slash_commands")[0]["ack"]["text"] == "Stopped."
        sl.push_command("/help", channel=st.dm)  # a sentinel: once it is answered, nothing else is coming
        await sl.wait_for(lambda: len(sl.acked("slash_commands")) == 2)
        (story,) = [run for run in await r.hub.runs.list(limit=10) if run.state == "killed"]
        assert story.reason == "stopped by user"
        assert [s["text"] for s in sl.sent] == ["On it."]
        assert len(model.requests) == 1


async def test_a_command_the_store_could_not_record_is_acked_telling_the_user_to_try_again(tmp_path: Path) -> None:
    from test_slack import FailingInbox

    async with running(tmp_path, inbox=FailingInbox(1)) as r:
        sl = r.sl
        sl.push_command("/help")
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        ack = sl.acked("slash_commands")[0]["ack"]
        assert ack["response_type"] == "ephemeral" and "try again" in ack["text"]
        sl.push_command("/help")  # the store is back
        await sl.wait_for(lambda: len(sl.acked("slash_commands")) == 2)
        assert "/new" in sl.acked("slash_commands")[1]["ack"]["text"]


@command("essay", description="A long answer")
async def essay(cmd: CommandContext) -> str:
    return "\n\n".join(f"Paragraph {i}: " + "words " * 60 for i in range(20))


async def test_an_answer_longer_than_a_block_is_acked_then_posted_in_parts(tmp_path: Path) -> None:
    async with running(tmp_path, extensions=[Extension("essays", commands=[essay])]) as r:
        sl = r.sl
        sl.push_command("/essay")
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        assert not sl.acked("slash_commands")[0]["ack"]
        await sl.wait_for(lambda: len(sl.state.responses) >= 3, timeout=10)
        parts = sl.state.responses
        assert all(len(p["blocks"][0]["text"]["text"]) <= 3000 for p in parts)
        assert parts[0]["text"].startswith("Paragraph 0:") and "Paragraph 19:" in parts[-1]["text"]


async def test_stop_in_a_channel_stops_the_users_running_thread(tmp_path: Path) -> None:
    # a channel's conversations are its threads, and Slack does not say which thread a
    # command was typed in: the user's own answer in progress in that channel is the one
    from hub import ScriptedModel

    slow = '<response><output type="slack:message">On it.</output><output type="slack:message">' + (
        "and then " * 400 + "</output></response>"
    )
    model = ScriptedModel([slow], chunk=4, chunk_delay=0.01)
    async with running(tmp_path, model=model) as r:
        sl, st = r.sl, r.sl.state
        asked = sl.push_message(st.channel, f"<@{st.bot_user}> tell me a long story")
        await sl.wait_sent(1)
        sl.push_command("/stop", channel=st.channel)
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        assert sl.acked("slash_commands")[0]["ack"]["text"] == "Stopped."
        (story,) = [run for run in await r.hub.runs.list(limit=10) if run.state == "killed"]
        assert story.context == f"slack:thread:{st.channel}/{asked}" and story.reason == "stopped by user"
        assert [s["text"] for s in sl.sent] == ["On it."]


async def test_new_in_a_channel_with_nothing_running_says_where_it_works(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        sl.push_command("/new", channel=st.channel)
        await sl.wait_for(lambda: bool(sl.acked("slash_commands")))
        ack = sl.acked("slash_commands")[0]["ack"]
        assert ack["response_type"] == "ephemeral" and "thread" in ack["text"]
        assert not r.model.requests and sl.sent == []
