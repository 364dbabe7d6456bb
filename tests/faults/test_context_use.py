"""The bot's own context is loaded when the hub starts (a broken ``load`` fails the start,
not a user's run), and ``use`` composes contexts fully: an async ``use``, a used context that
uses another, and a used context's own hooks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from hub import Context, Extension, RunState, output
from hub.errors import ExtensionError

from .faults import FunctionModel, send_bounded

SAY = '<response><output type="t:say">done</output></response>'


class Boom(Exception):
    pass


class Key(BaseModel):
    id: str


def chat_extension(**chat: Any) -> tuple[Extension, list[str]]:
    said: list[str] = []

    @output(type="t:say")
    async def say(content: str, ctx: Any) -> None:
        said.append(content)

    return Extension("t", contexts=[Context(type="t:chat", outputs=[say], reply_output="t:say", **chat)]), said


async def test_a_bot_context_whose_load_fails_fails_the_start(make_hub: Any) -> None:
    loads: list[str] = []

    async def load(cid: str, ctx: Any) -> Any:
        loads.append(cid)
        raise Boom("the bot's memory service is down")

    ext, said = chat_extension()
    ext.agent_context = Context(type="t:bot", load=load)
    ext.contexts.append(ext.agent_context)
    hub = make_hub(FunctionModel(lambda r: SAY), ext)
    with pytest.raises(ExtensionError, match=r"t:bot:bot could not be loaded: Boom: the bot's memory service is down"):
        await hub.start()
    assert loads == ["t:bot:bot"] and said == []  # at start, before any user's run
    assert not hub.started


async def test_a_bot_context_is_loaded_at_start(make_hub: Any) -> None:
    ext, _ = chat_extension()
    ext.agent_context = Context(type="t:bot", create=lambda args, ctx: {"facts": ["sky is blue"]})
    ext.contexts.append(ext.agent_context)
    async with make_hub(FunctionModel(lambda r: SAY), ext) as hub:
        assert hub.agent is not None and hub.agent.memory == {"facts": ["sky is blue"]}  # before any run


async def test_use_async_nested_and_the_used_contexts_hooks(make_hub: Any) -> None:
    """``t:chat`` uses ``t:profile`` (through an async ``use``), which uses ``t:org``; the hooks
    of each used context run with its own memory, which is saved."""
    seen: list[str] = []

    def counting(name: str) -> Any:
        def hook(ctx: Any) -> None:
            seen.append(f"{name} {ctx.context.id}")
            ctx.memory[name] = ctx.memory.get(name, 0) + 1

        return hook

    org = Context(type="t:org", schema=Key, on_step=counting("steps"), on_run=counting("runs"))
    profile = Context(
        type="t:profile",
        schema=Key,
        on_run=counting("runs"),
        use=lambda args, ctx: [(org, {"id": "acme"})],
    )

    async def use(args: Any, ctx: Any) -> list[Any]:
        await asyncio.sleep(0)
        return [(profile, {"id": "ann"})]

    ext, said = chat_extension(use=use)
    ext.contexts.extend([profile, org])
    async with make_hub(FunctionModel(lambda r: SAY), ext) as hub:
        result = await send_bounded(hub, "t:chat:1", None, "hello")
        assert result.state == RunState.COMPLETED, result.reason
        assert said == ["done"]
        assert seen == ["steps t:org:acme", "runs t:profile:ann", "runs t:org:acme"]
        assert await hub.memory.get("memory:t:profile:ann") == {"runs": 1}
        assert await hub.memory.get("memory:t:org:acme") == {"steps": 1, "runs": 1}
