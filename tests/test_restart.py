"""After a restart the conversation goes on where it was; crashed runs are recorded."""

import time

from hub import RunState, ScriptedModel
from hub.db import Database
from hub.runs import RunRecord, SQLiteRunStore


async def test_conversation_survives_a_restart(make_hub) -> None:
    async with make_hub(["Nice to meet you, Ann."]) as hub:
        await hub.send("cli:session", {"user": "ann"}, "My name is Ann.")
    model = ScriptedModel(["Your name is Ann."])
    async with make_hub(model) as hub:
        result = await hub.send("cli:session", {"user": "ann"}, "What is my name?")
        other = await hub.memory.get("working-memory:cli:session:bob")
    prompt = model.requests[0].messages[0]["content"]
    assert "My name is Ann." in prompt and "Nice to meet you, Ann." in prompt
    assert result.ok and other is None


async def test_history_is_bounded(make_hub, config) -> None:
    config.agent.max_history = 6
    async with make_hub(ScriptedModel(default="ok")) as hub:
        for i in range(10):
            await hub.send("cli:session", {"user": "ann"}, f"message {i}")
        history = await hub.memory.get("working-memory:cli:session:ann")
    assert len(history) == 6
    assert history[-2]["content"] == "message 9"


async def test_prompt_stays_under_budget_as_history_grows(make_hub, config) -> None:
    config.agent.prompt_budget = 1500
    config.agent.max_history = 1000
    model = ScriptedModel(default="a reply " * 20)
    async with make_hub(model) as hub:
        for i in range(40):
            await hub.send("cli:session", {"user": "ann"}, f"message number {i} " + "words " * 30)
    sizes = [len(r.system) + len(r.messages[0]["content"]) for r in model.requests]
    assert max(sizes) // 4 <= 1500
    assert "message number 39" in model.requests[-1].messages[0]["content"]


async def test_runs_left_running_by_a_crash_become_killed(config, make_hub) -> None:
    db = Database(config.data_dir / "hub.db")
    store = SQLiteRunStore(db)
    await store.open()
    crashed = RunRecord(context="cli:session:ann", started=time.time() - 5)
    await store.create(crashed)
    await db.close()
    async with make_hub() as hub:
        run = await hub.runs.get(crashed.id)
    assert run.state == RunState.KILLED and run.reason == "abnormal_exit" and run.ended
