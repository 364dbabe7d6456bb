"""After a restart the conversation goes on where it was; crashed runs are recorded."""

import asyncio
import time

from hub import RunState, ScriptedModel
from hub.store import RunRecord
from hub.store.sql import Database, SqlRunStore


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
    config.agent.compaction = False  # the oldest are dropped
    async with make_hub(ScriptedModel(default="ok")) as hub:
        for i in range(10):
            await hub.send("cli:session", {"user": "ann"}, f"message {i}")
        history = await hub.memory.get("working-memory:cli:session:ann")
    assert len(history) == 6
    assert history[-2]["content"] == "message 9"


async def test_history_with_compaction_is_bounded_and_headed_by_its_summary(make_hub, config) -> None:
    from hub.engine import COMPACTION_SLACK

    config.agent.max_history = 6
    async with make_hub(ScriptedModel(default="ok")) as hub:  # the summary calls answer "ok" too
        for i in range(30):
            await hub.send("cli:session", {"user": "ann"}, f"message {i}")
            history = await hub.memory.get("working-memory:cli:session:ann")
            entries = [e for e in history if e["kind"] != "summary"]
            assert len(entries) <= 6 * (COMPACTION_SLACK + 1)
    assert history[0]["kind"] == "summary" and history[0]["entries"] > 0
    assert history[-2]["content"] == "message 29"


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
    store = SqlRunStore(db)
    await store.open()
    crashed = RunRecord(context="cli:session:ann", started=time.time() - 5)
    await store.create(crashed)
    await db.close()
    async with make_hub() as hub:
        run = await hub.runs.get(crashed.id)
    assert run.state == RunState.KILLED and run.reason == "abnormal_exit" and run.ended


async def test_an_input_taken_after_the_answer_of_a_run_cut_off_is_answered_after_the_restart(config, make_hub) -> None:
    """A run answers Ann's first message, takes her second one between two steps, and the
    process dies while the model writes the second answer. After the restart the first is
    done (answered once) and the second is answered: the run's answer came before it."""
    from hub.logs import InputLog, OutputLog
    from hub.store.sql import SqlInbox

    db = Database(config.data_dir / "hub.db")
    runs, inbox = SqlRunStore(db), SqlInbox(db)
    await runs.open()
    await inbox.open()
    context = "cli:session:ann"
    run = RunRecord(context=context, started=time.time() - 5)
    await runs.create(run)
    first = InputLog(type="text", content="first message", user="ann")
    second = InputLog(type="text", content="second message", user="ann")
    for entry in (first, second):
        assert await inbox.record(context, entry)
    inbox.take([first.id], run.id)
    runs.append(run, first)
    runs.append(run, OutputLog(type="cli:message", content="answer to the first", sent=True))
    inbox.take([second.id], run.id)  # taken after the answer, at the next step
    runs.append(run, second)
    await runs.sync()
    await db.close()

    model = ScriptedModel(["answer to the second"])
    async with make_hub(model) as hub:
        async with asyncio.timeout(10):
            while await hub.inbox.pending():
                await asyncio.sleep(0.01)
        killed = await hub.runs.get(run.id)
    assert killed.state == RunState.KILLED and killed.reason == "abnormal_exit"
    assert len(model.requests) == 1
    prompt = model.requests[0].messages[0]["content"]
    assert "second message" in prompt
    assert "first message" not in prompt.split("<current_run>")[1]  # answered before: not again
