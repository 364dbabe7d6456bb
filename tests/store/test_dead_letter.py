"""A poison input (its run fails, or kills the hub, every time) is parked after
``[hub] dead_letter_after`` failed runs instead of wedging its conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hub.logs import InputLog
from hub.store import InboxStore, InMemoryInbox
from hub.store.sql import PostgresInbox, SqlInbox
from hub.testing import FakeOpenAI
from tests._support.backends import BACKENDS, sql_database
from tests._support.processes import hub_cmd


@pytest.fixture(params=BACKENDS)
async def inbox(request, tmp_path: Path):
    if request.param == "memory":
        yield InMemoryInbox()
        return
    async with sql_database(request.param, tmp_path) as db:
        store = SqlInbox(db) if request.param == "sqlite" else PostgresInbox(db, worker="w1")
        await store.open()
        yield store


async def test_failures_are_counted_once_per_run_and_park_at_the_limit(inbox: InboxStore) -> None:
    poison, other = InputLog(type="text", content="poison"), InputLog(type="text", content="fine")
    await inbox.record("chat:a", poison)
    await inbox.record("chat:a", other)
    inbox.take([poison.id, other.id], "run-1")
    assert await inbox.failed([poison.id], "run-1", "run run-1 failed: boom", park_after=2) == []
    assert await inbox.failed([poison.id], "run-1", "run run-1 failed: boom", park_after=2) == []  # same run: once
    inbox.take([poison.id], "run-2")
    assert await inbox.failed([poison.id], "run-2", "run run-2 killed: abnormal_exit", park_after=2) == [poison.id]
    assert [p.entry.id for p in await inbox.pending()] == [other.id]
    [parked] = await inbox.parked()
    assert (parked.entry.id, parked.failures, parked.error) == (poison.id, 2, "run run-2 killed: abnormal_exit")
    assert parked.context == "chat:a" and parked.entry.content == "poison"
    assert not await inbox.retry(other.id) and not await inbox.drop(other.id)  # only parked ones
    assert await inbox.retry(poison.id)
    assert {p.entry.id for p in await inbox.pending()} == {poison.id, other.id}
    assert await inbox.parked() == []
    inbox.take([poison.id], "run-3")
    assert await inbox.failed([poison.id], "run-3", "again", park_after=2) == []  # its count started over
    assert await inbox.failed([poison.id], "run-4", "again", park_after=2) == [poison.id]
    assert await inbox.drop(poison.id)
    assert await inbox.parked() == [] and [p.entry.id for p in await inbox.pending()] == [other.id]
    assert await inbox.failed([other.id], "run-5", "x", park_after=0) == []  # 0: never parked


async def test_an_update_that_could_not_be_taken_is_parked_at_once(inbox: InboxStore) -> None:
    update = InputLog(type="telegram:chat", content="poison", platform_id="telegram:42:7")
    assert await inbox.park("telegram:chat:42", update, "not taken: KeyError: 'x'", failures=3)
    assert await inbox.seen("telegram:42:7")  # a redelivery is refused like a recorded message's
    again = InputLog(type="telegram:chat", content="poison", platform_id="telegram:42:7")
    assert not await inbox.park("telegram:chat:42", again, "again", failures=3)
    assert not await inbox.record("telegram:chat:42", again)
    assert await inbox.pending() == []
    [parked] = await inbox.parked()
    assert (parked.context, parked.entry.content, parked.failures) == ("telegram:chat:42", "poison", 3)
    assert parked.error == "not taken: KeyError: 'x'" and parked.run_id is None
    assert await inbox.retry(update.id)  # `hub inbox retry`: answered as an input
    assert [p.entry.id for p in await inbox.pending()] == [update.id]


BOMB = """
import os
from pydantic import BaseModel
from hub import Extension, action

class Nothing(BaseModel):
    pass

@action(name="detonate", description="Only for the test.")
async def detonate(args: Nothing, ctx) -> dict:
    os._exit(3)  # the process dies in the middle of the run, as a crash would

extension = Extension(name="bomb", actions=[detonate])
"""


def _answer(body: dict) -> str:
    prompt = json.dumps(body["messages"])
    if "POISON" in prompt:
        return '<response><action_call name="detonate">{}</action_call></response>'
    return "<response><output>answered</output></response>"


async def test_a_poison_input_that_kills_every_start_is_parked_and_the_chat_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bomb.py").write_text(BOMB)
    (tmp_path / "contexts").mkdir()
    async with FakeOpenAI(default=_answer) as fake:
        (tmp_path / "config.toml").write_text(f"""
[hub]
data_dir = "data"
dead_letter_after = 3
[model]
provider = "openai"
base_url = "{fake.url}"
api_key = "x"
[memory]
episodes = false
[extensions.bomb]
module = "bomb"
""")
        code, out, err = await hub_cmd("chat", cwd=tmp_path, stdin="POISON\n")
        assert code == 3, err  # the first run dies with the process
        for _ in range(2):  # each start resumes it; the next message joins it and dies with it
            code, out, err = await hub_cmd("chat", cwd=tmp_path, stdin="hello\n")
            assert code == 3, err
        code, out, err = await hub_cmd("chat", cwd=tmp_path, stdin="hello again\n")
        assert code == 0, err
        assert "answered" in out
        assert all("POISON" not in json.dumps(b["messages"]) for b in fake.bodies[-1:])

    code, out, err = await hub_cmd("inbox", "--json", cwd=tmp_path)
    assert code == 0, err
    [parked] = [json.loads(line) for line in out.splitlines()]
    assert parked["content"] == "POISON" and parked["failures"] == 3
    assert "killed: abnormal_exit" in parked["error"] and parked["context"].startswith("cli:session:")
    code, out, _ = await hub_cmd("inbox", cwd=tmp_path)
    assert code == 0 and parked["id"][:10] in out and "3 failed runs" in out
    code, out, err = await hub_cmd("inbox", "drop", parked["id"][:10], cwd=tmp_path)
    assert code == 0 and "dropped" in out, err
    code, out, _ = await hub_cmd("inbox", cwd=tmp_path)
    assert out.strip() == "no parked inputs"
    code, _, err = await hub_cmd("inbox", "retry", parked["id"], cwd=tmp_path)
    assert code == 2 and "is not parked" in err
    code, _, err = await hub_cmd("inbox", "retry", cwd=tmp_path)
    assert code == 2 and "needs the id" in err


async def test_only_failures_that_can_be_the_inputs_fault_count() -> None:
    from hub.store import InMemoryRunStore, Pending, RunRecord, RunState, park_poison

    inbox, runs = InMemoryInbox(), InMemoryRunStore()
    entry = InputLog(type="text", content="x")
    await inbox.record("chat:a", entry)
    outage = "store_error: StoreError (runs.write): SQLite table 'runs': write failed: disk I/O error"
    cases = [  # (state, reason, the store failed it, counted against the input)
        (RunState.KILLED, "shutdown", False, False),  # the operator stopped the hub
        (RunState.FAILED, outage, True, False),  # an outage: told by the run's flag, not its words
        (RunState.RUNNING, None, False, False),  # another worker still runs it
        (RunState.KILLED, "abnormal_exit", False, True),  # the process died during its run
        (RunState.FAILED, "internal error: ValueError: boom", False, True),
    ]
    for state, reason, store_failed, counts in cases:
        run = RunRecord("chat:a", state=state, reason=reason, store_failed=store_failed)
        await runs.create(run)
        inbox.take([entry.id], run.id)
        assert not await park_poison(inbox, runs, Pending("chat:a", entry, run.id), park_after=5)
        [item] = inbox._items.values()
        assert (item.failed_run == run.id) is counts, (state, reason)
    run = RunRecord("chat:a", state=RunState.FAILED, reason="internal error: again")
    await runs.create(run)
    assert await park_poison(inbox, runs, Pending("chat:a", entry, run.id), park_after=3)
    assert [p.failures for p in await inbox.parked()] == [3]
