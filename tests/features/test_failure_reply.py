"""A run that fails, or is killed for anything but a limit or a shutdown, leaves the user the
failure reply: once, through the conversation's output, without internals, in the trace."""

from __future__ import annotations

import pytest

from hub import ModelError, RunState
from hub.logs import OutputLog
from hub.store import open_stores

DEFAULT = "Sorry, something went wrong on my side. Please try again in a moment."
SECRET_ERROR = ModelError("upstream said: internal table t_users is locked", retryable=False)


def replies(result) -> list[OutputLog]:
    return [e for e in result.logs if isinstance(e, OutputLog) and (e.data or {}).get("failure_reply")]


async def test_a_failed_run_tells_the_user_once_without_internals(make_rig) -> None:
    rig = make_rig([SECRET_ERROR])
    async with rig.hub:
        result = await rig.say("hello")
        events = await rig.hub.runs.events(result.run_id)
    assert result.state == RunState.FAILED and "t_users" in (result.reason or "")
    assert rig.out.getvalue() == DEFAULT + "\n"
    (reply,) = replies(result)
    assert reply.sent and reply.content == DEFAULT and reply.data["failure_reply"] == "failed"
    assert [e.content for e in events if isinstance(e, OutputLog)] == [DEFAULT]  # recorded in the trace


async def test_the_personas_failure_reply_wins_and_empty_means_none(make_rig, config) -> None:
    rig = make_rig([SECRET_ERROR, SECRET_ERROR, SECRET_ERROR])
    persona = rig.contexts / "default.toml"
    async with rig.hub:
        persona.write_text('name = "Hub"\ninstructions = "x"\nfailure_reply = "Oops, try later."\n', encoding="utf-8")
        await rig.say("one")
        persona.write_text('name = "Hub"\ninstructions = "x"\nfailure_reply = ""\n', encoding="utf-8")
        silent = await rig.say("two")
        persona.write_text('name = "Hub"\ninstructions = "x"\n', encoding="utf-8")
        config.agent.failure_reply = ""
        quiet = await rig.say("three")
    assert rig.out.getvalue() == "Oops, try later.\n"
    assert replies(silent) == [] and replies(quiet) == []


async def test_a_limit_gets_the_limit_reply_only(make_rig, config) -> None:
    config.agent.max_steps = 1
    config.limits.reply = "Limit reached."
    rig = make_rig(default='<response><action_call name="nothing">{}</action_call></response>')
    async with rig.hub:
        result = await rig.say("loop")
    assert (result.state, result.reason) == (RunState.KILLED, "max_steps (1)")
    assert rig.out.getvalue() == "Limit reached.\n" and replies(result) == []


async def test_a_shutdown_is_not_a_failure_its_input_is_taken_up_again(make_rig, config) -> None:
    config.hub.shutdown_grace = 0
    rig = make_rig(["<response><output>late</output></response>"], delay=30)
    async with rig.hub:
        sub = await rig.hub.submit("cli:session", {"user": "ann"}, "hello", user="ann")
        run_id = await sub.run_id
    async with open_stores(config) as stores:
        run = await stores.runs.get(run_id)
        events = await stores.runs.events(run_id)
        pending = await stores.inbox.pending()
    assert run is not None and (run.state, run.reason) == (RunState.KILLED, "shutdown")
    assert rig.out.getvalue() == "" and not [e for e in events if isinstance(e, OutputLog)]
    assert [p.entry.content for p in pending] == ["hello"]  # the next start answers it


async def test_nobody_waits_for_a_run_without_a_user(make_rig) -> None:
    rig = make_rig([SECRET_ERROR])
    async with rig.hub:
        result = await rig.hub.send("cli:session:ann", data="scheduled job")  # a schedule's input: no user
    assert result.state == RunState.FAILED and rig.out.getvalue() == "" and replies(result) == []


@pytest.mark.parametrize("broken", [True, False])
async def test_a_reply_that_cannot_be_sent_is_recorded_as_not_sent(make_hub, config, broken) -> None:
    from hub import Context, Extension, ScriptedModel, output

    @output(type="fragile:say", description="Say it.")
    async def say(content: str, ctx) -> None:
        if broken:
            raise RuntimeError("the platform is down")

    chat = Context(type="fragile:chat", reply_output="fragile:say")
    hub = make_hub(ScriptedModel([SECRET_ERROR]), Extension("fragile", contexts=[chat], outputs=[say]))
    async with hub:
        result = await hub.send("fragile:chat:1", data="hi", user="u")
    (reply,) = replies(result)
    assert reply.sent is not broken
    assert (reply.error or "").endswith("the platform is down") if broken else reply.error is None


async def test_a_failure_reply_that_reports_its_parts_late_is_sent(make_hub, config) -> None:
    """The reply's output reports a part after the run's own time limits are over (the
    failure reply is sent from after_run): that is no error (issue 40, item 32)."""
    import asyncio

    from hub import Context, Extension, ScriptedModel, output

    config.agent.heartbeat_timeout = 0.04  # progress reschedules the run's timer every 10 ms
    parts: list[int] = []

    @output(type="late:say", description="say")
    async def say(content: str, ctx) -> None:
        await asyncio.sleep(0.05)  # past the 10 ms: the part's progress would reschedule the timer
        await ctx.part_sent(0, {"id": 1})
        parts.append(0)

    chat = Context(type="late:chat", reply_output="late:say")
    async with make_hub(ScriptedModel([SECRET_ERROR]), Extension("late", contexts=[chat], outputs=[say])) as hub:
        result = await hub.send("late:chat", {"id": "1"}, "hi", user="ann")
    (reply,) = replies(result)
    assert reply.sent and reply.error is None and parts == [0]
