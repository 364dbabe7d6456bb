"""Live personas: edits reach the next prompt, broken edits keep the old one, revisions, rollback."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hub import Extension
from hub.definitions import Context, TextArgs, output
from hub.personas import render_history, rollback
from hub.store import InMemoryRevisionStore
from hub.store.sql import Database, SqlRevisionStore


def write(path: Path, text: str) -> None:
    """Write and move the mtime on, as an editor saving a second later would."""
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def test_an_edit_reaches_the_next_prompt_without_a_restart(make_rig):
    rig = make_rig()
    async with rig.hub:
        await rig.say("hi")
        assert "You are terse." in rig.model.requests[-1].system
        write(rig.contexts / "default.toml", 'name = "Hub"\ninstructions = "Speak like a pirate."\n')
        await rig.say("hi again")
        assert "Speak like a pirate." in rig.model.requests[-1].system
        assert "You are terse." not in rig.model.requests[-1].system


async def test_a_broken_edit_keeps_the_previous_version_and_says_why(make_rig, caplog):
    rig = make_rig()
    async with rig.hub:
        await rig.say("hi")
        write(rig.contexts / "default.toml", 'name = "Hub"\ninstructions = ""\n')  # blank: invalid
        with caplog.at_level(logging.ERROR, logger="hub.personas"):
            result = await rig.say("still there?")
        assert result.ok
        assert "You are terse." in rig.model.requests[-1].system
        assert any("edit rejected" in r.getMessage() and "instructions" in r.getMessage() for r in caplog.records)
        write(rig.contexts / "default.toml", 'name = "Hub"\ninstructions = "not toml')  # a TOML syntax error
        await rig.say("and now?")
        assert "You are terse." in rig.model.requests[-1].system
        history = await rig.hub.revisions.history("default")
        assert [r.rev for r in history] == [1]  # rejected edits are not revisions


async def test_revisions_are_kept_and_rollback_restores_one(make_rig, config):
    rig = make_rig()
    path = rig.contexts / "default.toml"
    first = path.read_text()
    async with rig.hub:
        await rig.say("one")
        write(path, 'name = "Hub"\ninstructions = "Version two."\n')
        await rig.say("two")
        history = await rig.hub.revisions.history("default")
        assert [(r.rev, r.text) for r in history] == [(1, first), (2, path.read_text())]

        await rollback(rig.hub.revisions, rig.contexts, "default", 1)
        assert path.read_text() == first
        await rig.say("three")
        assert "You are terse." in rig.model.requests[-1].system
        history = await rig.hub.revisions.history("default")
        assert [(r.rev, r.note) for r in history] == [(1, ""), (2, ""), (3, "rollback to rev 1")]
        shown = render_history(history, current=path.read_text())
        assert '+instructions = "Version two."' in shown and "rev 3" in shown and "(in force)" in shown

    # a restart records nothing new: the file equals the latest revision
    rig2 = make_rig()
    async with rig2.hub:
        await rig2.say("four")
        assert len(await rig2.hub.revisions.history("default")) == 3


async def test_rollback_of_an_unknown_revision_names_the_known_ones(tmp_path):
    store = InMemoryRevisionStore()
    store.record("default", 'name = "a"\ninstructions = "x"\n')
    with pytest.raises(Exception, match=r"no revision 7 \(revisions 1\.\.1"):
        await rollback(store, tmp_path, "default", 7)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_revision_store_contract(kind, tmp_path):
    if kind == "memory":
        store = InMemoryRevisionStore()
        db = None
    else:
        db = Database(tmp_path / "hub.db")
        store = SqlRevisionStore(db)
    await store.open()
    try:
        store.record("a", "one")
        store.record("a", "one")  # same as the latest: not a new revision
        store.record("a", "two")
        store.record("a", "one", note="back")  # equal to an older one: a new revision
        store.record("b", "x")
        await store.flush()
        assert [(r.rev, r.text, r.note) for r in await store.history("a")] == [
            (1, "one", ""),
            (2, "two", ""),
            (3, "one", "back"),
        ]
        assert (await store.get("a", 2)).text == "two"
        assert await store.get("a", 9) is None
        assert await store.names() == ["a", "b"]
    finally:
        await store.close()
        if db is not None:
            await db.close()


async def test_personas_are_chosen_per_extension_and_per_chat_in_config(make_rig, config):
    (config.contexts_dir / "pirate.toml").write_text('name = "Pirate"\ninstructions = "Arr."\n')
    (config.contexts_dir / "formal.toml").write_text('name = "Butler"\ninstructions = "Indeed."\n')
    sent: list[str] = []

    @output(type="room:say", context="room")
    async def say(content: str, ctx) -> None:
        sent.append(content)

    room = Context(type="room", schema=TextArgs, reply_output="room:say")
    config.personas = {"rooms": "pirate", "room:vip": "formal"}
    rig = make_rig(extensions=[Extension("rooms", contexts=[room], outputs=[say])])
    async with rig.hub:
        await rig.hub.send("room:lobby", None, "hello")
        assert rig.model.requests[-1].system.startswith("You are Pirate.")  # by extension
        await rig.hub.send("room:vip", None, "hello")
        assert rig.model.requests[-1].system.startswith("You are Butler.")  # by chat
        await rig.say("hello")
        assert rig.model.requests[-1].system.startswith("You are Hub.")  # the default
