"""A stop that arrives while a run is finishing never cancels the finish, and a stop for a
run that ended never ends the next one: the memory is saved, the row is final, the inputs are
done and every waiter is answered. A hub stopping under a run that is finishing lets it finish."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hub import Context, Extension, Hub, HubConfig, NoArgs, RunState, ScriptedModel, action, output
from hub.features import ORPHANED
from hub.models import ModelRequest

from .faults import FunctionModel


def brain(request: ModelRequest) -> str:
    """``spawn-nowait`` starts a child in t:chat:worker; ``keep``/``block`` call those
    actions; anything else (or after an action's result): ``done``."""
    text = request.messages[-1]["content"]
    run = text[text.rindex("<current_run>") :]
    if "<action_result" in run:
        return "<response><output>done</output></response>"
    if "spawn-nowait" in run:
        args = {"context": "t:chat:worker", "input": "work", "wait": False}
        return f'<response><action_call name="startRun">{json.dumps(args)}</action_call></response>'
    for name in ("keep", "block"):
        if f">{name}<" in run:
            return f'<response><action_call name="{name}">{{}}</action_call></response>'
    return "<response><output>done</output></response>"


class Rig:
    """A `t:chat` context: ``keep`` keeps its run's ctx, ``block`` waits for ``release``;
    ``on_run`` counts runs in memory and, in a run whose input says so, waits for ``go``
    (with ``finishing`` set) inside the run's finish."""

    def __init__(self) -> None:
        self.kept: list[Any] = []
        self.blocked, self.release = asyncio.Event(), asyncio.Event()
        self.finishing, self.go = asyncio.Event(), asyncio.Event()
        self.hold_finish: set[str] = set()
        self.said: list[tuple[str, str]] = []

    def extension(self) -> Extension:
        @action(name="keep")
        async def keep(args: NoArgs, ctx: Any) -> str:
            self.kept.append(ctx)
            return "kept"

        @action(name="block")
        async def block(args: NoArgs, ctx: Any) -> str:
            self.kept.append(ctx)
            self.blocked.set()
            await self.release.wait()
            return "released"

        @output(type="t:say")
        async def say(content: str, ctx: Any) -> None:
            self.said.append((ctx.context.id, content))

        async def on_run(ctx: Any) -> None:
            ctx.memory["runs"] = ctx.memory.get("runs", 0) + 1
            if ctx.context.key in self.hold_finish:
                self.finishing.set()
                await self.go.wait()

        chat = Context(type="t:chat", actions=[keep, block], outputs=[say], reply_output="t:say", on_run=on_run)
        return Extension("t", contexts=[chat])


async def until_ended(hub: Hub, run_id: str) -> Any:
    for _ in range(1000):
        run = await hub.runs.get(run_id)
        if run is not None and run.state != RunState.RUNNING:
            return run
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} did not end")


async def test_a_stop_that_arrives_while_a_run_finishes_does_not_cut_its_end(make_hub: Any) -> None:
    """A run inside its finish (its on_run hook) is stopped as a parent's end stops its
    children (``ctx.stop(killed, orphaned)``): the finish goes on, the run ends as it decided."""
    rig = Rig()
    rig.hold_finish.add("worker")
    hub = make_hub(FunctionModel(brain), rig.extension())
    async with hub:
        sub = await hub.submit("t:chat:worker", data="keep")
        await asyncio.wait_for(rig.finishing.wait(), 10)
        rig.kept[0].stop(RunState.KILLED, ORPHANED)
        rig.go.set()
        result = await asyncio.wait_for(sub.wait(), 10)
        assert (result.state, result.reason) == (RunState.COMPLETED, None)
        child = await until_ended(hub, result.run_id)
        assert (child.state, child.reason) == (RunState.COMPLETED, None)
        assert (await hub.memory.get("memory:t:chat:worker"))["runs"] == 1
        assert await hub.inbox.pending() == []
        assert ("t:chat:worker", "done") in rig.said


async def test_a_stop_for_a_run_that_ended_does_not_end_the_next_run(make_hub: Any) -> None:
    """A handler that kept its run's ctx and calls ``ctx.stop()`` after that run ended stops
    nothing: the conversation's next run goes on to its end."""
    rig = Rig()
    rig.hold_finish.add("ann")
    hub = make_hub(FunctionModel(brain), rig.extension())
    async with hub:
        first = await hub.submit("t:chat:ann", data="keep")
        await asyncio.wait_for(rig.finishing.wait(), 10)
        second = await hub.submit("t:chat:ann", data="block")  # queued: the same slot runs it next
        rig.hold_finish.clear()
        rig.go.set()
        assert (await asyncio.wait_for(first.wait(), 10)).state == RunState.COMPLETED
        await asyncio.wait_for(rig.blocked.wait(), 10)
        rig.kept[0].stop(RunState.KILLED, "a stop for the first run, late")
        rig.release.set()
        result = await asyncio.wait_for(second.wait(), 10)
        assert (result.state, result.reason) == (RunState.COMPLETED, None)
        assert rig.said == [("t:chat:ann", "done"), ("t:chat:ann", "done")]
        assert (await hub.memory.get("memory:t:chat:ann"))["runs"] == 2


async def test_a_stop_during_the_shutdown_of_a_run_does_not_cut_its_end(config: HubConfig, make_hub: Any) -> None:
    """The hub stops under a run (it ends ``killed``, shutdown); its own stop arriving while it
    finishes must not cut that end short: the row is final, the memory saved."""
    rig = Rig()
    rig.hold_finish.add("ann")
    config.hub.shutdown_grace = 0.0
    hub = make_hub(FunctionModel(brain), rig.extension())
    await hub.start()
    send = asyncio.create_task(hub.send("t:chat:ann", data="block"))
    await asyncio.wait_for(rig.blocked.wait(), 10)
    (run,) = await hub.runs.list()
    stopping = asyncio.create_task(hub.stop())
    await asyncio.wait_for(rig.finishing.wait(), 10)
    rig.kept[0].stop(RunState.KILLED, "stopped by user")
    rig.go.set()
    await asyncio.wait_for(stopping, 20)
    await asyncio.gather(send, return_exceptions=True)
    async with make_hub(ScriptedModel([])) as again:
        record = await again.runs.get(run.id)
        assert (record.state, record.reason) == (RunState.KILLED, "shutdown")
        assert (await again.memory.get("memory:t:chat:ann"))["runs"] == 1


async def test_the_hub_stopping_under_a_run_that_is_finishing_lets_it_finish(config: HubConfig, make_hub: Any) -> None:
    """A run that decided its end (completed) is inside its finish when the hub stops: the
    finish is not cancelled, and the caller gets the run's end, not "the hub is stopping"."""
    rig = Rig()
    rig.hold_finish.add("ann")
    config.hub.shutdown_grace = 0.0
    hub = make_hub(FunctionModel(brain), rig.extension())
    await hub.start()
    sub = await hub.submit("t:chat:ann", data="hello")
    await asyncio.wait_for(rig.finishing.wait(), 10)
    task = hub.runner.slots["t:chat:ann"].task
    assert task is not None
    stopping = asyncio.create_task(hub.stop())
    for _ in range(1000):  # until the hub's stop has cancelled the run's task
        if task.cancelling():
            break
        await asyncio.sleep(0.01)
    assert task.cancelling()
    rig.go.set()
    await asyncio.wait_for(stopping, 20)
    result = await asyncio.wait_for(sub.wait(), 5)
    assert (result.state, result.reason) == (RunState.COMPLETED, None)
    async with make_hub(ScriptedModel([])) as again:
        record = await again.runs.get(result.run_id)
        assert (record.state, record.reason) == (RunState.COMPLETED, None)
        assert (await again.memory.get("memory:t:chat:ann"))["runs"] == 1
        assert await again.inbox.pending() == []
