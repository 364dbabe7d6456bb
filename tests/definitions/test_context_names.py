"""A conversation's name ``TYPE:KEY`` splits by the registered context types, so that a key
may hold colons (a Matrix room id ``!abc:example.org``), before and after a restart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hub import Context, Extension, ScriptedModel, output
from hub.definitions import Registry, split_context_name
from hub.errors import RunError
from hub.logs import InputLog
from hub.store.sql import Database, SqlInbox

ROOM = "!abc:example.org"
NAME = f"test:room:{ROOM}"


def _room_extension(said: list[tuple[str, str]]) -> Extension:
    room = Context(type="test:room", reply_output="test:post", description="A room keyed by its id.")

    @output(type="test:post", description="Post in the room.")
    async def post(content: str, ctx: Any) -> None:
        said.append((ctx.context.id, content))

    return Extension(name="rooms", contexts=[room], outputs=[post])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("telegram:chat:42", ("telegram:chat", "42")),
        ("telegram:chat:-100:7", ("telegram:chat", "-100:7")),  # a key with a colon
        ("matrix:room:!abc:example.org", ("matrix:room", "!abc:example.org")),
        ("matrix:room:!abc:example.org:8448", ("matrix:room", "!abc:example.org:8448")),
        ("telegram:x", ("telegram", "x")),  # the longest type that prefixes it wins
        ("telegram:chatty:1", ("telegram", "chatty:1")),  # a type ends at a colon, not inside a word
        ("matrix:room:", None),  # no key
        ("matrix:room", None),  # a type, not an instance
        ("slack:channel:C1", None),  # no such type
        ("", None),
    ],
)
def test_a_name_splits_after_the_longest_registered_type(name: str, expected: tuple[str, str] | None) -> None:
    types = {"telegram", "telegram:chat", "matrix:room"}
    assert split_context_name(name, types) == expected


def test_the_registry_resolves_a_key_with_colons() -> None:
    registry = Registry()
    registry.register(_room_extension([]))
    definition, args, key = registry.resolve(NAME)
    assert (definition.type, args.id, key) == ("test:room", ROOM, ROOM)
    assert registry.context_type_of(NAME) == "test:room"
    assert registry.context_type_of("test:room") == "test:room"
    assert registry.context_type_of("nope:1") == ""
    with pytest.raises(RunError, match="unknown context 'other:room:!a:b'"):
        registry.resolve("other:room:!a:b")


async def test_a_room_with_colons_keeps_its_conversation_across_a_restart(make_hub, config) -> None:
    said: list[tuple[str, str]] = []
    async with make_hub(["Hello Ann."], _room_extension(said)) as hub:
        first = await hub.send(NAME, None, "My name is Ann.")
        memory = await hub.memory.get(f"working-memory:{NAME}")
    assert first is not None and first.ok and memory

    # an input left in the inbox by a process that died is taken again at the next start
    db = Database(config.data_dir / "hub.db")
    inbox = SqlInbox(db)
    await inbox.open()
    assert await inbox.record(NAME, InputLog(type="text", content="What is my name?", user="ann"))
    await db.close()

    model = ScriptedModel(["Your name is Ann."])
    async with make_hub(model, _room_extension(said)) as hub:
        async with asyncio.timeout(10):
            while await hub.inbox.pending():
                await asyncio.sleep(0.01)
        runs = await hub.runs.list(limit=10, context=NAME)
    assert len(model.requests) == 1
    prompt = model.requests[0].messages[0]["content"]
    assert "My name is Ann." in prompt and "What is my name?" in prompt  # the same conversation
    assert said == [(NAME, "Hello Ann."), (NAME, "Your name is Ann.")]
    assert len(runs) == 2


def test_hub_check_takes_a_schedule_whose_key_holds_colons(tmp_path) -> None:
    from hub import load_config
    from hub.cli import check_config

    path = tmp_path / "config.toml"
    for name, error in (("cli:session:!abc:example.org", False), ("cli:sessions:!abc:example.org", True)):
        path.write_text(
            f'[hub]\ndata_dir = "{tmp_path}"\n[extensions.cli]\n'
            f'[schedules.daily]\ncontext = "{name}"\ninput = "hello"\nevery = "1d"\n'
        )
        errors = check_config(load_config(path)).errors
        named = [e for e in errors if "schedules.daily.context" in e]
        assert bool(named) == error, errors
