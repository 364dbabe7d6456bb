"""Role guardrails: a denied call is a structured denial the model sees; a critical one rejects."""

from __future__ import annotations

import asyncio

import pytest

from hub import Extension, NoArgs, RunState, action
from hub.config import config_from_dict

CALL_BAN = '<response><action_call name="ban">{}</action_call></response>'
CALL_SHUTDOWN = '<response><action_call name="shutdown">{}</action_call></response>'
DONE = "<response><output>done</output></response>"

calls: list[str] = []


@action(name="ban", description="Ban someone.", roles=["admin", "mod"])
async def ban(args: NoArgs, ctx) -> dict:
    calls.append("ban")
    return {"banned": True}


@action(name="shutdown", description="Stop the machine.", roles=["admin"], critical=True)
async def shutdown(args: NoArgs, ctx) -> dict:
    calls.append("shutdown")
    return {"stopped": True}


TOOLS = Extension("tools", actions=[ban, shutdown])


@pytest.fixture(autouse=True)
def _roles(config):
    calls.clear()
    config.roles = {"admin": {"cli": ["alice"]}, "mod": {"cli": ["mia"]}}


async def test_a_denied_call_is_a_denial_the_model_sees(make_rig):
    rig = make_rig([CALL_BAN, DONE], extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("ban bob", user="eve")
    assert result.state == RunState.COMPLETED  # not critical: the model reacts and goes on
    assert calls == []
    denied = [e for e in result.logs if e.kind == "action_result"][0]
    assert denied.denied and not denied.ok
    assert "requires the role admin or mod" in denied.error and "eve on cli" in denied.error
    prompt = rig.model.requests[1].messages[0]["content"]
    assert '<action_result name="ban" status="denied" new="true">permission denied' in prompt


@pytest.mark.parametrize("user", ["alice", "mia"])
async def test_a_holder_of_any_listed_role_may_call(make_rig, user):
    rig = make_rig([CALL_BAN, DONE], extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("ban bob", user=user)
    assert result.ok and calls == ["ban"]
    assert [e.ok for e in result.logs if e.kind == "action_result"] == [True]


async def test_a_critical_denial_ends_the_run_rejected(make_rig):
    rig = make_rig([CALL_SHUTDOWN, DONE], extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("shut it down", user="mia")  # a mod, not an admin
        run = await rig.hub.runs.get(result.run_id)
    assert result.state == RunState.REJECTED and run.state == RunState.REJECTED
    assert result.reason.startswith("denied: permission denied: action 'shutdown' requires the role admin")
    assert calls == [] and len(rig.model.requests) == 1


async def test_roles_are_per_platform(make_rig, config):
    config.roles = {"admin": {"telegram": ["alice"]}}
    rig = make_rig([CALL_BAN, DONE], extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("ban bob", user="alice")  # alice is an admin on telegram only
    assert calls == [] and [e.denied for e in result.logs if e.kind == "action_result"] == [True]


async def test_everyone_on_a_platform(make_rig, config):
    config.roles = {"mod": {"cli": ["*"]}}
    rig = make_rig([CALL_BAN, DONE], extensions=[TOOLS])
    async with rig.hub:
        assert (await rig.say("ban bob", user="anyone")).ok
    assert calls == ["ban"]


def test_user_ids_may_be_toml_integers():
    cfg = config_from_dict({"roles": {"admin": {"telegram": [42, "43"]}}})
    assert cfg.roles == {"admin": {"telegram": ["42", "43"]}}


async def test_in_a_group_an_admin_message_lends_no_rights_to_another(make_rig, config):
    from hub.definitions import Context, TextArgs, output

    @output(type="room:say", context="room")
    async def say(content: str, ctx) -> None:
        pass

    # the run may start on alice's message alone; it then waits (an action) until eve's is in,
    # so that the ban is always asked for with both messages in the run
    eve_in = asyncio.Event()

    @action(name="wait", description="Wait.")
    async def wait(args: NoArgs, ctx) -> dict:
        await eve_in.wait()
        return {}

    def first(request) -> str:
        return (
            CALL_BAN
            if "ban bob please" in str(request)
            else '<response><action_call name="wait">{}</action_call></response>'
        )

    room = Context(type="room", schema=TextArgs, reply_output="room:say")
    config.roles = {"admin": {"rooms": ["alice"]}}
    rooms = Extension("rooms", contexts=[room], outputs=[say], actions=[wait])
    rig = make_rig([first, first, DONE], extensions=[TOOLS, rooms])
    async with rig.hub:
        first_in = await rig.hub.submit("room:1", None, "hi all", user="alice")
        second = await rig.hub.submit("room:1", None, "ban bob please", user="eve")
        eve_in.set()
        result = await second.wait()
        assert (await first_in.wait()).run_id == result.run_id  # one run took both messages
    denials = [e for e in result.logs if e.kind == "action_result" and e.denied]
    assert calls == [] and denials and "eve on rooms" in denials[0].error


async def test_roles_are_per_person_so_a_linked_account_holds_them(make_rig):
    """Issue 38: eve linked to alice holds alice's role; unlinked, she does not."""
    from hub.store import People

    rig = make_rig([CALL_BAN, DONE, CALL_BAN, DONE], extensions=[TOOLS])
    async with rig.hub:
        people = People(rig.hub.memory)
        await people.redeem(await people.new_code("cli", "alice"), "cli", "eve")
        assert (await rig.say("ban bob", user="eve")).ok and calls == ["ban"]
        await people.unlink("cli", "eve")
        result = await rig.say("ban bob", user="eve")
    assert calls == ["ban"]
    assert [e.denied for e in result.logs if e.kind == "action_result"] == [True]
