"""Memory that several runs share is updated without lost writes, whichever worker runs
them: a context many conversations use (a user's profile), the bot's own context, and an
action's ``scope="global"`` memory. Each run loads, changes and saves; a save that finds the
stored value changed merges its change onto it (``hub.store.merge3``), on SQLite, on
PostgreSQL across workers, and in memory."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hub import Context, Extension, Hub, HubConfig, NoArgs, RunState, action, output
from hub.store import merge3
from hub.testing.postgres import temporary_schema

from .faults import FunctionModel, send_bounded

VISITORS = 5
ARRIVED: list[str] = []  # the runs waiting at the gate, every shared memory loaded


class UserArgs(BaseModel):
    user: str


def call_tool(request: Any) -> str:
    said = "".join(m["content"] for m in request.messages)
    if "<action_result" in said:
        return '<response><output type="t:say">done</output></response>'
    return '<response><action_call name="tally">{}</action_call></response>'


def extension(gate: asyncio.Event | None = None) -> Extension:
    """``t:chat`` (keyed by chat id) uses ``t:profile`` (keyed by user): every run adds a visit
    to the profile, and to the bot's own ``t:bot`` context; ``tally`` adds one to a global
    action memory. ``gate``: each run waits for it at its first step, every shared memory loaded."""

    async def on_run(ctx: Any) -> None:
        ctx.memory["visits"] = ctx.memory.get("visits", 0) + 1
        ctx.memory.setdefault("chats", []).append(ctx.run.context)

    async def bot_on_step(ctx: Any) -> None:
        if gate is not None and ctx.run.steps == 1:
            ARRIVED.append(ctx.run.context)  # its shared memories are loaded
            await gate.wait()
        if ctx.agent is not None:
            ctx.agent.memory["steps"] = ctx.agent.memory.get("steps", 0) + 1

    @action(name="tally", memory="tally", scope="global", counters=["$"])
    async def tally(args: NoArgs, ctx: Any) -> int:
        ctx.action_memory = (ctx.action_memory or 0) + 1
        return ctx.action_memory

    @output(type="t:say")
    async def say(content: str, ctx: Any) -> None:
        pass

    profile = Context(type="t:profile", schema=UserArgs, on_run=on_run, counters=["visits"])
    bot = Context(type="t:bot", counters=["steps"])
    chat = Context(
        type="t:chat",
        actions=[tally],
        outputs=[say],
        reply_output="t:say",
        on_step=bot_on_step,
        use=lambda args, ctx: [(profile, {"user": "ann"})],
    )
    return Extension("t", contexts=[chat, profile], agent_context=bot)


@asynccontextmanager
async def hubs(
    config: HubConfig, tmp_path: Path, n: int, backend: str, gate: asyncio.Event
) -> AsyncIterator[list[Hub]]:
    """``n`` hubs on one store: workers sharing PostgreSQL, or one hub on SQLite."""
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(temporary_schema()) if backend == "postgres" else ""
        started = []
        for i in range(n):
            cfg = copy.deepcopy(config)
            cfg.store.url = url
            cfg.hub.data_dir = str(tmp_path / f"worker{i}")
            cfg.hub.shutdown_grace = 0.0
            hub = Hub(cfg, model=FunctionModel(call_tool), load_extensions=False, extensions=[extension(gate)])
            started.append(await stack.enter_async_context(hub))
        yield started


@pytest.mark.parametrize(("backend", "workers"), [("sqlite", 1), ("postgres", 1), ("postgres", 2)])
async def test_runs_that_overlap_lose_no_update_of_shared_memory(
    config: HubConfig, tmp_path: Path, backend: str, workers: int
) -> None:
    gate = asyncio.Event()
    ARRIVED.clear()
    async with hubs(config, tmp_path, workers, backend, gate) as group:
        sends = [
            asyncio.create_task(send_bounded(group[i % workers], f"t:chat:{i}", None, "hello")) for i in range(VISITORS)
        ]
        async with asyncio.timeout(10):  # every run has loaded the shared memories: none saved yet
            while len(ARRIVED) < VISITORS:
                await asyncio.sleep(0.01)
        gate.set()
        results = await asyncio.gather(*sends)
        assert all(r.state == RunState.COMPLETED for r in results), [r.reason for r in results]
        memory = group[0].memory
        profile = await memory.get("memory:t:profile:ann")
        assert profile["visits"] == VISITORS, profile
        assert sorted(profile["chats"]) == sorted(f"t:chat:{i}" for i in range(VISITORS))  # each once
        assert await memory.get("action:tally") == VISITORS
        assert (await memory.get("memory:t:bot:bot"))["steps"] == 2 * VISITORS  # two steps a run


async def test_the_bot_context_is_re_read_by_each_run(config: HubConfig, tmp_path: Path) -> None:
    """Another worker's change to the bot's own context is seen by this worker's next run."""
    gate = asyncio.Event()
    gate.set()
    async with hubs(config, tmp_path, 2, "postgres", gate) as (a, b):
        assert (await send_bounded(a, "t:chat:1", None, "hello")).ok
        assert (await send_bounded(b, "t:chat:2", None, "hello")).ok
        assert (await send_bounded(a, "t:chat:3", None, "hello")).ok
        assert a.agent is not None and a.agent.memory["steps"] == 6  # b's two steps included
        assert (await a.memory.get("memory:t:bot:bot"))["steps"] == 6


@pytest.mark.parametrize(
    ("base", "ours", "theirs", "merged"),
    [
        ({"visits": 3}, {"visits": 4}, {"visits": 4}, {"visits": 5}),  # a counter's increments add
        ({"n": 1, "a": "x"}, {"n": 1, "a": "y"}, {"n": 2, "a": "x"}, {"n": 2, "a": "y"}),
        ({"log": [1]}, {"log": [1, 2]}, {"log": [1, 3]}, {"log": [1, 3, 2]}),
        ({"k": 1}, {}, {"k": 1, "j": 2}, {"j": 2}),  # ours removed k, theirs added j
        (None, 1, 1, 2),  # two first visits, when the value itself is the counter
        (None, {"visits": 1}, {"visits": 1}, {"visits": 2}),
        ({"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "b"}),  # both set it: the later save wins
        ({"log": [1, 2]}, {"log": [2]}, {"log": [1, 2, 3]}, {"log": [2, 3]}),  # a trim keeps their append
        ({"last_seen": 10}, {"last_seen": 20}, {"last_seen": 15}, {"last_seen": 20}),  # not a counter: ours
        (None, {"score": 5}, {"score": 3}, {"score": 5}),  # two first writes: never 8
    ],
)
def test_merge3(base: Any, ours: Any, theirs: Any, merged: Any) -> None:
    assert merge3(base, ours, theirs, counters=["$", "visits"]) == merged


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_a_save_that_lost_the_race_merges(backend: str, tmp_path: Path) -> None:
    from hub.store import InMemoryStore
    from hub.store.sql import SqlMemoryStore
    from tests._support.backends import sql_database

    async with AsyncExitStack() as stack:
        if backend == "memory":
            store: Any = InMemoryStore()
        else:
            store = SqlMemoryStore(await stack.enter_async_context(sql_database(backend, tmp_path)))
            await store.open()
        await store.set("memory:p", {"visits": 1})
        a, va = await store.get_versioned("memory:p")
        b, vb = await store.get_versioned("memory:p")
        assert await store.set_if_unchanged("memory:p", {"visits": 2}, va) is not None
        assert await store.set_if_unchanged("memory:p", {"visits": 2}, vb) is None  # stale: refused
        stored, _ = await store.save_merged("memory:p", {"visits": 2}, base=b, version=vb, counters=["visits"])
        assert stored == {"visits": 3} == await store.get("memory:p")
        # an update that another writer beats is applied again to the new value
        calls: list[Any] = []

        async def add_one(v: Any) -> Any:
            calls.append(v)
            if len(calls) == 1:
                await store.set("memory:p", {"visits": 10})  # another writer lands first
            return {"visits": v["visits"] + 1}

        assert await store.update("memory:p", add_one) == {"visits": 11}
        assert calls == [{"visits": 3}, {"visits": 10}]
