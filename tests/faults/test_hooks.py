"""Handlers and hooks that raise, at every point of a run: the run still ends, in its true
state, recorded as it was returned; nothing waits forever."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from pydantic import BaseModel

from hub import Context, Extension, action, output
from hub.engine import Engine, Plugin
from hub.errors import ModelError
from hub.logs import ErrorLog
from hub.store import RunState

from .faults import FunctionModel, check, send_bounded, snapshot


class Boom(Exception):
    pass


class NoArgs(BaseModel):
    pass


CALL = '<response><action_call name="tool">{}</action_call></response>'
SAY = '<response><output type="t:say">done</output></response>'


def script(request) -> Any:  # type: ignore[no-untyped-def]
    """A call to `tool` when the user says CALL-TOOL, then an answer; MODEL-ERROR: the model fails."""
    said = "".join(m["content"] for m in request.messages)
    if "<action_result" in said:
        return SAY
    if "MODEL-ERROR" in said:
        return "", ModelError("injected: the model refused", retryable=False)
    return CALL if "CALL-TOOL" in said else SAY


# where it raises → the state the run ends in, and what its log must say
CASES: dict[str, tuple[RunState, str]] = {
    "action handler": (RunState.COMPLETED, "action 'tool' failed: Boom: injected"),
    "action on_success": (RunState.COMPLETED, "Boom: injected"),
    "action on_error": (RunState.COMPLETED, "action 'tool' failed"),
    "output handler": (RunState.COMPLETED, "Boom: injected"),
    "guard": (RunState.COMPLETED, "Boom: injected"),
    "on_step": (RunState.COMPLETED, "on_step hook failed: Boom: injected"),  # on_error: continue
    "on_run": (RunState.COMPLETED, "on_run hook failed: Boom: injected"),
    "on_error": (RunState.FAILED, "internal error: Boom: injected"),
    "create": (RunState.FAILED, "internal error: Boom: injected"),
    "render": (RunState.FAILED, "internal error: Boom: injected"),
    "load": (RunState.FAILED, "internal error: Boom: injected"),
    "save": (RunState.COMPLETED, "saving memory failed: Boom: injected"),
    "memory not JSON": (RunState.COMPLETED, "saving memory failed: TypeError"),
    "use": (RunState.FAILED, "internal error: Boom: injected"),
    "before_run hook": (RunState.FAILED, "internal error: Boom: injected"),
    "after_run hook": (RunState.COMPLETED, ""),
}

VICTIM = "ann"


class Armed:
    """The hooks of a `t:chat` context; the one that ``where`` names raises, in Ann's
    conversation only."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fires(self, point: str, key: str) -> bool:
        return self.where == point and key == VICTIM

    async def on_success(self, result, ctx) -> None:  # type: ignore[no-untyped-def]
        if self.fires("action on_success", ctx.context.key):
            raise Boom("injected")

    async def on_error(self, e, ctx) -> None:  # type: ignore[no-untyped-def]
        if self.fires("action on_error", ctx.context.key):
            raise Boom("injected")

    def on_step(self, ctx) -> None:  # type: ignore[no-untyped-def]
        if self.fires("on_step", ctx.context.key):
            raise Boom("injected")

    def on_run(self, ctx) -> None:  # type: ignore[no-untyped-def]
        if self.fires("on_run", ctx.context.key):
            raise Boom("injected")
        if self.fires("memory not JSON", ctx.context.key):
            ctx.memory["when"] = datetime.datetime.now()
        else:
            ctx.memory["runs"] = ctx.memory.get("runs", 0) + 1

    def decide(self, e, ctx) -> str:  # type: ignore[no-untyped-def]
        if self.fires("on_error", ctx.context.key):
            raise Boom("injected")
        return "abort" if isinstance(e, ModelError) else "continue"  # the model's errors end the run

    def create(self, args, ctx) -> dict:  # type: ignore[no-untyped-def]
        if self.fires("create", args.id):
            raise Boom("injected")
        return {}

    def render(self, memory, ctx) -> str:  # type: ignore[no-untyped-def]
        if self.fires("render", ctx.context.key):
            raise Boom("injected")
        return ""

    async def load(self, cid, ctx) -> Any:  # type: ignore[no-untyped-def]
        if self.fires("load", ctx.context.key):
            raise Boom("injected")
        return await ctx.hub.memory.get(f"memory:{cid}")

    async def save(self, cid, memory, ctx) -> None:  # type: ignore[no-untyped-def]
        if self.fires("save", ctx.context.key):
            raise Boom("injected")
        await ctx.hub.memory.set(f"memory:{cid}", memory)

    def profile_create(self, args, ctx) -> dict:  # type: ignore[no-untyped-def]
        if self.fires("use", args.id):
            raise Boom("injected")
        return {}


def extension(where: str, said: list[str]) -> Extension:
    """A `t:chat` context whose hook or handler at ``where`` raises, in Ann's conversation only."""
    armed = Armed(where)

    @action(name="tool", on_success=armed.on_success, on_error=armed.on_error)
    async def tool(args: NoArgs, ctx) -> str:
        if armed.fires("action handler", ctx.context.key) or armed.fires("action on_error", ctx.context.key):
            raise Boom("injected")
        return "ok"

    @output(type="t:say")
    async def say(content: str, ctx) -> None:
        if armed.fires("output handler", ctx.context.key):
            raise Boom("injected")
        said.append(content)

    profile = Context(type="t:profile", create=armed.profile_create)
    chat = Context(
        type="t:chat",
        actions=[tool],
        outputs=[say],
        reply_output="t:say",
        on_step=armed.on_step,
        on_run=armed.on_run,
        on_error=armed.decide,
        create=armed.create,
        render=armed.render,
        load=armed.load,
        save=armed.save,
        use=lambda args, ctx: [(profile, {"id": args.id})],
    )
    return Extension("t", contexts=[chat, profile])


@pytest.mark.parametrize("where", list(CASES))
async def test_a_hook_or_handler_that_raises(make_hub, where: str) -> None:
    state, says = CASES[where]
    said: list[str] = []
    hub = make_hub(FunctionModel(script), extension(where, said))

    class Faulty(Plugin):
        """A feature whose hooks raise for the victim's conversation."""

        name = "faulty"

        async def before_run(self, run) -> None:  # type: ignore[no-untyped-def]
            if where == "before_run hook" and run.context.key == VICTIM:
                raise Boom("injected")

        async def after_run(self, result, run) -> None:  # type: ignore[no-untyped-def]
            if where == "after_run hook" and result.context.endswith(VICTIM):
                raise Boom("injected")

        async def authorize(self, action, run) -> None:  # type: ignore[no-untyped-def]
            if where == "guard" and run.context.key == VICTIM:
                raise Boom("injected")

    hub.plugins.add(Faulty())
    async with hub:
        other = await send_bounded(hub, "t:chat:bob", None, "CALL-TOOL")
        assert other.state == RunState.COMPLETED, other.reason
        others = {("t:chat:bob", other.run_id): await snapshot(hub, "t:chat:bob", other.run_id)}
        data = "MODEL-ERROR" if where == "on_error" else "CALL-TOOL"
        result = await send_bounded(hub, f"t:chat:{VICTIM}", None, data)
        assert result.state == state, result.reason
        where_said = " | ".join(
            [result.reason or ""]
            + [e.message for e in result.logs if isinstance(e, ErrorLog)]
            + [getattr(e, "error", None) or "" for e in result.logs]
        )
        assert says in where_said, where_said
        await check(hub, result, others=others)
        if where == "on_run":
            # on_run raised, and memory was still saved
            assert (await hub.memory.get(f"memory:t:chat:{VICTIM}")) == {}
        # the hub goes on answering
        again = await send_bounded(hub, "t:chat:cy", None, "CALL-TOOL")
        assert again.state == RunState.COMPLETED, again.reason


async def test_on_run_changes_memory_before_it_is_saved(make_hub) -> None:
    said: list[str] = []
    async with make_hub(FunctionModel(script), extension("", said)) as hub:
        await send_bounded(hub, "t:chat:ann", None, "CALL-TOOL")
        await send_bounded(hub, "t:chat:ann", None, "hi")
        assert await hub.memory.get("memory:t:chat:ann") == {"runs": 2}


async def test_use_awaits_an_async_create(make_hub) -> None:
    async def create(args, ctx) -> dict:  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        return {"made": args.id}

    seen: list[Any] = []
    profile = Context(type="t:profile", create=create)

    def on_run(ctx) -> None:  # type: ignore[no-untyped-def]
        seen.append(ctx.context.used[0].memory)

    chat = Context(
        type="t:chat",
        reply_output="t:say",
        use=lambda args, ctx: [(profile, {"id": args.id})],
        on_run=on_run,
        outputs=extension("", []).contexts[0].outputs,
    )
    async with make_hub(FunctionModel(script), Extension("t", contexts=[chat, profile])) as hub:
        result = await send_bounded(hub, "t:chat:ann", None, "hello")
    assert result.state == RunState.COMPLETED, result.reason
    assert seen == [{"made": "ann"}]


async def test_a_bug_in_the_engine_still_answers_every_waiter(make_hub) -> None:
    class BrokenEngine(Engine):
        async def run(self, slot):  # type: ignore[no-untyped-def]
            slot.take("r1")
            raise Boom("a bug")

    said: list[str] = []
    hub = make_hub(FunctionModel(script), extension("", said))
    async with hub:
        hub.intake.engine = BrokenEngine(hub.engine.deps)
        results = await asyncio.gather(*(send_bounded(hub, "t:chat:ann", None, f"m{i}") for i in range(3)))
        assert all(r.state == RunState.FAILED and "Boom: a bug" in (r.reason or "") for r in results)
        # answered with that failure: not handled again after a restart
        assert await hub.inbox.pending() == []
