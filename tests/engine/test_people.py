"""/link and /unlink in chat, and a person's own memory: written by an action with
``ctx.remember``, shown in the prompt of that person's runs (on any linked identity) and of
nobody else's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hub import CommandCall, Extension, NoArgs, RunContext, action
from hub.logs import OutputLog
from hub.store import People
from tests._support.processes import hub_cmd


class Fact(BaseModel):
    key: str
    value: str


@action(name="remember_fact", description="Keep a fact about the person speaking")
async def remember_fact(args: Fact, ctx: RunContext) -> str:
    await ctx.remember(args.key, args.value)
    return "kept"


TOOLS = Extension("facts", actions=[remember_fact])
REMEMBER = (
    '<response><action_call name="remember_fact">{"key": "name", "value": "Ann Example"}</action_call></response>'
)


async def cmd(rig: Any, text: str, *, user: str) -> str:
    name, _, args = text[1:].partition(" ")
    result = await rig.hub.send("cli:session", {"user": user}, text, user=user, command=CommandCall(name, args))
    outs = [e for e in result.logs if isinstance(e, OutputLog) and e.sent]
    return str(outs[-1].content)


def prompt_text(request: Any) -> str:
    return request.system + "\n".join(str(m["content"]) for m in request.messages)


async def test_linked_identities_share_one_memory_and_others_never_see_it(make_rig) -> None:
    rig = make_rig([REMEMBER, "<response><output>noted</output></response>"], extensions=[TOOLS])
    async with rig.hub:
        given = await cmd(rig, "/link", user="ann")
        code = re.search(r"code: (\w+)", given)
        assert code is not None, given
        assert (await cmd(rig, f"/link {code.group(1)}", user="bob")).startswith("Linked: cli:ann, cli:bob")
        assert (await cmd(rig, f"/link {code.group(1)}", user="carl")).startswith("Not linked: the link code")
        await rig.say("remember my name", user="ann")
        people = People(rig.hub.memory)
        assert await people.memory_of(await people.person_of("cli", "ann")) == {"name": "Ann Example"}
        seen = len(rig.model.requests)
        await rig.say("who am I?", user="bob")
        assert '<memory of="person">{"name": "Ann Example"}</memory>' in prompt_text(rig.model.requests[seen])
        seen = len(rig.model.requests)
        await rig.say("who am I?", user="carl")
        assert "Ann Example" not in prompt_text(rig.model.requests[seen])
        assert await cmd(rig, "/unlink", user="bob") == "Unlinked: this account is on its own now."
        seen = len(rig.model.requests)
        await rig.say("who am I?", user="bob")
        assert "Ann Example" not in prompt_text(rig.model.requests[seen])
        assert await cmd(rig, "/unlink", user="bob") == "This account is not linked to another."


async def test_a_wrong_code_links_nothing(make_rig) -> None:
    rig = make_rig()
    async with rig.hub:
        assert (await cmd(rig, "/link ABCDEFGH", user="bob")).startswith("Not linked: no link code")
        people = People(rig.hub.memory)
        assert await people.identities(await people.person_of("cli", "bob")) == ["cli:bob"]


async def test_the_operator_links_with_hub_people_link(make_rig, config, tmp_path: Path) -> None:
    """``hub people link CODE IDENTITY``: the operator joins someone else's identity."""
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{config.data_dir}"\n', encoding="utf-8")
    rig = make_rig()
    async with rig.hub:
        code = re.search(r"code: (\w+)", await cmd(rig, "/link", user="ann"))
        assert code is not None
        rc, out, err = await hub_cmd("people", "link", cwd=tmp_path)
        assert rc == 2 and "needs the code the user got with /link" in err
        rc, out, err = await hub_cmd("people", "link", code.group(1), "discord", cwd=tmp_path)
        assert rc == 2 and "'discord' is not an identity: write platform:user" in err
        rc, out, err = await hub_cmd("people", "link", code.group(1), "discord:77", cwd=tmp_path)
        assert rc == 0 and "linked: cli:ann, discord:77 are person cli:ann" in out, err
        rc, out, err = await hub_cmd("people", "link", code.group(1), "slack:U1", cwd=tmp_path)
        assert rc == 2 and "was used already" in err
        rc, out, err = await hub_cmd("people", "list", cwd=tmp_path)
        assert rc == 0 and out.strip() == "cli:ann  cli:ann, discord:77", err
        rc, out, err = await hub_cmd("people", "unlink", "discord:77", cwd=tmp_path)
        assert rc == 0 and "unlinked: discord:77" in out, err


async def test_hub_people_link_code_joins_the_operators_terminal_identity(make_rig, config, tmp_path: Path) -> None:
    """``hub people link CODE``, as DESIGN.md has it: the terminal identity ``hub chat`` talks
    as (``cli:<OS user>``) joins the code's issuer, as ``/link CODE`` typed there would; a
    wrong code counts against that identity as in chat."""
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{config.data_dir}"\n', encoding="utf-8")
    operator = {"LOGNAME": "olga", "USER": "olga", "LNAME": "olga", "USERNAME": "olga"}  # getpass.getuser()
    rig = make_rig(["<response><output>hello</output></response>"])
    async with rig.hub:
        people = People(rig.hub.memory)
        await people.remember(await people.person_of("discord", "77"), "name", "Olga on Discord")
        code = await people.new_code("discord", "77")  # what /link on Discord gave her
        rc, out, err = await hub_cmd("people", "link", "WRONG123", cwd=tmp_path, env=operator)
        assert rc == 2 and "no link code" in err, err
        tries = await rig.hub.memory.get("link-tries:cli:olga")
        assert tries is not None and tries["count"] == 1  # counted against her, as /link CODE in chat
        rc, out, err = await hub_cmd("people", "link", code, cwd=tmp_path, env=operator)
        assert rc == 0 and "linked: cli:olga, discord:77 are person discord:77" in out, err
        assert await people.lookup("cli", "olga") == "discord:77"
        # `hub chat` as olga is that person now: her Discord memory is in its prompt
        assert (await rig.say("who am I?", user="olga")).ok
        assert "Olga on Discord" in prompt_text(rig.model.requests[-1])
        rc, out, err = await hub_cmd("people", "link", code, cwd=tmp_path, env=operator)
        assert rc == 2 and "was used already" in err


async def test_forget_person_removes_them_everywhere_and_nobody_else(make_rig, config) -> None:
    from hub.cli._memory import forget_person
    from hub.errors import HubError

    rig = make_rig([REMEMBER, "<response><output>noted</output></response>"], extensions=[TOOLS])
    async with rig.hub:
        code = re.search(r"code: (\w+)", await cmd(rig, "/link", user="ann"))
        assert code is not None
        await cmd(rig, f"/link {code.group(1)}", user="bob")
        await rig.say("remember my name", user="ann")
        await rig.say("secret from bob", user="bob")
        await rig.say("carl was here", user="carl")
        await rig.hub.memory.set("working-memory:cli:shared", [{"kind": "input", "user": "ann", "content": "x"}])
        assert await rig.hub.stores.history.search("bob", "secret")  # indexed for search_history
    deleted, ids, _ = await forget_person(config, "cli:bob")
    assert deleted == 0 and ids == ["cli:ann", "cli:bob"]
    rig = make_rig()
    async with rig.hub:
        history = rig.hub.stores.history
        assert await history.search("bob", "secret") == [] and await history.search("ann", "remember") == []
        assert await history.search("carl", "carl")  # nobody else's messages went
        memory = rig.hub.memory
        people = People(memory)
        assert await people.find("cli:ann") is None and await people.memory_of("cli:ann") == {}
        said = [
            e.get("content")
            for key in await memory.keys("working-memory:")
            for e in await memory.get(key)
            if e.get("kind") == "input"
        ]
        assert said == ["carl was here"]
    with pytest.raises(HubError, match="no person 'cli:bob'"):
        await forget_person(config, "cli:bob")


async def test_a_link_code_is_never_given_in_a_group(make_rig) -> None:
    rig = make_rig()
    async with rig.hub:
        result = await rig.hub.send(
            "cli:session", {"user": "ann"}, "/link", user="ann", command=CommandCall("link", "", group=True)
        )
        said = [str(e.content) for e in result.logs if isinstance(e, OutputLog) and e.sent]
        assert said == ["Send /link to me in a private chat: anyone here could use the code."]
        assert await rig.hub.memory.keys("link-code:") == []


async def test_a_run_that_takes_another_members_message_shows_no_person_memory(make_rig) -> None:
    """A run started on alice's message that then takes eve's too (one run, two people):
    from that step on, alice's memory is out of the prompt that answers eve as well."""
    from hub.definitions import Context, TextArgs, output

    @output(type="room:say", context="room")
    async def say(content: str, ctx: RunContext) -> None:
        pass

    said: list[Any] = []

    @action(name="wait", description="Wait.")
    async def wait(args: NoArgs, ctx: RunContext) -> dict[str, str]:
        # eve writes while alice's run is in its first step: that step's prompt is built
        said.append(await rig.hub.submit("room:1", None, "what do you know?", user="eve"))
        return {}

    room = Context(type="room", schema=TextArgs, reply_output="room:say")
    rooms = Extension("rooms", contexts=[room], outputs=[say], actions=[wait])
    step = '<response><action_call name="wait">{}</action_call></response>'
    rig = make_rig([step, "<response><output>done</output></response>"], extensions=[rooms])
    async with rig.hub:
        people = People(rig.hub.memory)
        await people.remember(await people.person_of("rooms", "alice"), "note", "ALICE-ONLY")
        first = await rig.hub.submit("room:1", None, "hi all", user="alice")
        result = await first.wait()
        assert (await said[0].wait()).run_id == result.run_id
    before, after = (prompt_text(r) for r in rig.model.requests)
    assert "ALICE-ONLY" in before and "what do you know?" not in before
    assert "what do you know?" in after and "ALICE-ONLY" not in after


def test_hub_people_help_says_both_forms_of_link(capsys: pytest.CaptureFixture[str]) -> None:
    from hub.cli import main as cli_main

    with pytest.raises(SystemExit):
        cli_main(["people", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "link CODE joins your terminal identity (cli:<your OS user>, as in hub chat)" in text
    assert "link CODE IDENTITY joins IDENTITY (platform:user) instead" in text
