"""Focused tests for what the crash test found, on PostgreSQL shared by two workers' stores:
a finished run is never recorded as killed by another worker's recovery; an input whose
lease lapsed and that another worker claimed is not answered by the first; a conversation's
older inputs on another worker go first; a slot queues and takes inputs in received order."""

from __future__ import annotations

from typing import Any

from hub.engine import Runner
from hub.logs import InputLog
from hub.store import RunRecord, RunState
from hub.store.sql import PgDatabase, PostgresInbox, PostgresRunStore
from hub.testing.postgres import temporary_schema


async def _inboxes(url: str) -> tuple[PgDatabase, PgDatabase, PostgresInbox, PostgresInbox]:
    db_a, db_b = await PgDatabase(url, pool_size=2).open(), await PgDatabase(url, pool_size=2).open()
    return db_a, db_b, PostgresInbox(db_a, worker="a", lease=60), PostgresInbox(db_b, worker="b", lease=60)


class _EndsWhileLooked(PostgresRunStore):
    """A fault injected where the race was: the run ends (completed, its lock let go) after
    recovery listed it as running and before it looks at the lock."""

    async def _orphaned(self, run: RunRecord) -> bool:
        run.state, run.ended = RunState.COMPLETED, 2.0
        await self.finish(run)
        return True  # its lock is free now: it finished


async def test_a_run_that_ends_while_recovery_looks_keeps_its_state() -> None:
    async with temporary_schema() as url:
        db = await PgDatabase(url, pool_size=2).open()
        try:
            store = _EndsWhileLooked(db)
            await store.create(RunRecord(context="chat:1", id="run-1", started=1.0))
            assert await store.recover() == []
            run = await store.get("run-1")
            assert run is not None and run.state == RunState.COMPLETED and run.reason is None
            # a run really cut off (still running, lock free) is still recovered
            dead = PostgresRunStore(db)
            await dead.create(RunRecord(context="chat:2", id="run-2", started=1.0))
            assert [r.id for r in await dead.recover()] == ["run-2"]
            assert (await dead.get("run-2")).state == RunState.KILLED  # type: ignore[union-attr]
        finally:
            await db.close()


async def test_an_input_another_worker_claimed_is_not_held_here() -> None:
    async with temporary_schema() as url:
        db_a, db_b, a, b = await _inboxes(url)
        try:
            entry = InputLog(type="text", content="hello")
            assert await a.record("chat:1", entry)
            assert await a.hold([entry.id]) == [entry.id]
            await db_a.write("UPDATE inbox SET lease_until = 0")  # a stalled past its lease
            assert [p.entry.id for p in await b.claim()] == [entry.id]
            assert await a.hold([entry.id]) == []  # b's to answer now, not a's
            assert await b.hold([entry.id]) == [entry.id]
            await b.done([entry.id])
            assert await b.hold([entry.id]) == []  # answered: nobody answers it again
        finally:
            await db_a.close()
            await db_b.close()


async def test_the_oldest_input_held_elsewhere_is_what_a_run_must_not_pass() -> None:
    async with temporary_schema() as url:
        db_a, db_b, a, b = await _inboxes(url)
        try:
            first, second = InputLog(type="text", content="one", ts=10.0), InputLog(type="text", content="two", ts=20.0)
            assert await a.record("chat:1", first)
            assert await b.record("chat:1", second)
            assert await b.oldest_elsewhere("chat:1", [second.id]) == 10.0  # b must wait for "one"
            assert await a.oldest_elsewhere("chat:1", [first.id]) == 20.0  # a may answer "one" (older than 20)
            assert await a.oldest_elsewhere("chat:2", []) is None
            # claimed by b but not yet queued in b's run (a claim in flight): still ahead of it
            assert await b.oldest_elsewhere("chat:1", []) == 10.0
            await a.done([first.id])
            assert await b.oldest_elsewhere("chat:1", [second.id]) is None
        finally:
            await db_a.close()
            await db_b.close()


async def test_a_slot_queues_in_received_order_and_takes_once_and_only_older_inputs() -> None:
    runner = Runner(concurrency=1)
    definition: Any = type("Def", (), {"type": "chat"})()
    new, old = InputLog(type="text", content="new", ts=20.0), InputLog(type="text", content="old", ts=10.0)
    runner.queue(definition, None, "1", new)
    slot, _ = runner.queue(definition, None, "1", old)  # resumed from the inbox: received first
    assert slot is runner.slots["chat:1"]
    assert [e.content for e in slot.pending] == ["old", "new"]
    slot.before, slot.once = 15.0, True  # an input received at 15 waits on another worker
    assert [e.content for e in slot.take("run-1")] == ["old"]
    assert slot.take("run-1") == []  # taken once: "new" waits for the next run, which looks first
    await runner.stop(0)
