"""What the engine is given (hub/engine/_deps.py): it never reads the hub it hands to
handlers as ``ctx.hub``, and it builds one RunContext per run, from which each call and
output derives its own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from hub import Context, Extension, RunContext, RunState, action, output
from hub.engine import Plugin


class NoArgs(BaseModel):
    pass


class _Untouchable:
    """A hub that fails on any use: the engine may pass it on, never read it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the engine read ctx.hub.{name}")


def _extension(seen: dict[str, list[RunContext]]) -> Extension:
    def create(args: Any, ctx: RunContext) -> dict:
        seen["create"].append(ctx)
        return {}

    def use(args: Any, ctx: RunContext) -> list:
        seen["use"].append(ctx)
        return []

    @action(name="tool")
    async def tool(args: NoArgs, ctx: RunContext) -> str:
        seen["action"].append(ctx)
        return "ok"

    @output(type="t:say")
    async def say(content: str, ctx: RunContext) -> None:
        seen["output"].append(ctx)

    chat = Context(type="t:chat", actions=[tool], outputs=[say], reply_output="t:say", create=create, use=use)
    return Extension("t", contexts=[chat])


SCRIPT = [
    '<response><action_call name="tool">{}</action_call></response>',
    '<response><output type="t:say">done</output></response>',
]


async def test_the_engine_never_reads_the_hub_and_builds_one_context_per_run(make_hub) -> None:
    seen: dict[str, list[RunContext]] = {"create": [], "use": [], "before_run": [], "action": [], "output": []}

    class Watch(Plugin):
        name = "watch"

        async def before_run(self, ctx: RunContext) -> None:
            seen["before_run"].append(ctx)

    hub = make_hub(SCRIPT, _extension(seen))
    hub.plugins.add(Watch())
    async with hub:
        hub.engine.deps.hub = _Untouchable()  # type: ignore[assignment]
        result = await hub.send("t:chat:ann", None, "go")
    assert result.state == RunState.COMPLETED, result.reason
    (run_ctx,) = seen["before_run"]
    # the conversation's callbacks while it is prepared get the run's own context
    assert seen["create"] == [run_ctx] and seen["use"] == [run_ctx]
    (call_ctx,), (output_ctx,) = seen["action"], seen["output"]
    for derived in (call_ctx, output_ctx):
        assert derived is not run_ctx and derived.hub is run_ctx.hub and derived.run is run_ctx.run
    assert call_ctx.call is not None and call_ctx.output is None
    assert output_ctx.output is not None and output_ctx.call is None


def test_a_derived_context_shares_the_run_and_starts_its_call_empty() -> None:
    run_ctx: RunContext = RunContext(object(), object(), object(), [])  # type: ignore[arg-type]
    own = {"call", "attributes", "action_memory", "output"}
    for name in RunContext.__slots__:
        setattr(run_ctx, name, object())
    derived = run_ctx.derive(attributes="given")
    for name in RunContext.__slots__:  # a field added later must be shared or the call's own
        if name == "attributes":
            assert derived.attributes == "given"
        elif name in own:
            assert getattr(derived, name) is None, name
        else:
            assert getattr(derived, name) is getattr(run_ctx, name), name
