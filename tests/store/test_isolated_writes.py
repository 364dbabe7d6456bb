"""One bad write fails alone: the writes queued with it (other conversations' event logs,
inbox marks, usage) are committed; a write lock held by another process is waited out.
The tests that hold for both backends run on SQLite and PostgreSQL (tests/_support/backends.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hub.errors import StoreError
from hub.logs import InputLog, ThoughtLog
from hub.store import RunRecord
from hub.store.sql import (
    Database,
    PostgresInbox,
    PostgresRunStore,
    SqlDatabase,
    SqlInbox,
    SqlMemoryStore,
    SqlRunStore,
    SqlUsageStore,
)
from tests._support.backends import SQL_BACKENDS, sql_database


async def _until(cond, timeout: float = 10.0) -> None:
    """Wait for something that must happen (never used to show that something did not)."""
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)


async def _stores(db: SqlDatabase):
    if db.dialect == "postgres":
        runs, inbox, usage, memory = (
            PostgresRunStore(db),
            PostgresInbox(db, worker="w"),
            SqlUsageStore(db),
            SqlMemoryStore(db),
        )
    else:
        runs, inbox, usage, memory = SqlRunStore(db), SqlInbox(db), SqlUsageStore(db), SqlMemoryStore(db)
    for s in (runs, inbox, usage, memory):
        await s.open()
    return runs, inbox, usage, memory


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_a_constraint_violation_fails_alone(backend: str, tmp_path: Path) -> None:
    async with sql_database(backend, tmp_path) as db:
        runs, inbox, usage, memory = await _stores(db)
        a, b = RunRecord("chat:a"), RunRecord("chat:b")
        await runs.create(a)
        await runs.create(b)
        entry = InputLog(type="text", content="hi")
        assert await inbox.record("chat:b", entry)
        await db.flush()
        batches = db.batches

        async def others() -> None:
            runs.append(b, ThoughtLog(content="one"))
            inbox.take([entry.id], b.id)
            usage.add("conversation:chat:b", "2026-01-01", 42)
            runs.append(b, ThoughtLog(content="two"))
            await memory.set("memory:chat:b", {"n": 1})

        culprit = asyncio.ensure_future(runs.create(RunRecord("chat:a", id=a.id)))  # the same id: PRIMARY KEY
        await asyncio.gather(others(), asyncio.gather(culprit, return_exceptions=True))

        assert db.batches == batches + 1, "the culprit was not queued in the same transaction as the others"
        with pytest.raises(StoreError) as ei:
            await culprit
        assert ei.value.store == "runs" and "unique" in str(ei.value).lower()
        assert [e.content for e in await runs.events(b.id)] == ["one", "two"]
        assert await usage.get("conversation:chat:b", "2026-01-01") == 42
        assert await memory.get("memory:chat:b") == {"n": 1}
        assert [p.run_id for p in await inbox.pending()] == [b.id]
        assert db.failed_writes == 1 and db.lost_writes == 0
        assert db.health() is not None  # degraded while failures occur


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_a_lost_fire_and_forget_write_is_counted(backend: str, tmp_path: Path) -> None:
    async with sql_database(backend, tmp_path, degraded_for=0.0) as db:
        runs, *_ = await _stores(db)
        run = RunRecord("chat:a")
        await runs.create(run)
        runs.append(run, ThoughtLog(content="kept"))
        db.write_soon("INSERT INTO runs (id, context, state, started) VALUES (?, ?, ?, ?)", (run.id, "x", "running", 0))
        runs.append(run, ThoughtLog(content="kept too"))
        await db.flush()
        assert db.lost_writes == 1
        assert [e.content for e in await runs.events(run.id)] == ["kept", "kept too"]
        assert "1 writes lost" in (db.health() or "")
        runs.append(run, ThoughtLog(content="later"))
        await db.flush()
        assert db.health() is None  # a batch committed since, and the window is 0 s


async def test_a_write_lock_held_by_another_process_is_waited_out(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    async with Database(path, busy_timeout=0.02, retry_delay=0.01, busy_retries=30) as db:
        runs, inbox, *_ = await _stores(db)
        run = RunRecord("chat:a")
        await runs.create(run)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # what `hub persona rollback` does while it writes
        other.execute("INSERT INTO kv (key, value, updated) VALUES ('persona', '1', 0)")
        runs.append(run, ThoughtLog(content="during the lock"))
        done = asyncio.ensure_future(inbox.done(["nothing"]))
        await _until(lambda: db.busy_waits >= 2)
        assert not done.done()
        other.execute("COMMIT")
        other.close()
        await done
        assert [e.content for e in await runs.events(run.id)] == ["during the lock"]
        assert db.lost_writes == 0 and db.failed_writes == 0 and db.health() is None
        assert await db.fetchone("SELECT value FROM kv WHERE key = 'persona'") == ("1",)


async def test_a_lock_that_outlasts_the_retries_fails_visibly_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    async with Database(path, busy_timeout=0.01, retry_delay=0.001, busy_retries=2, degraded_for=0.0) as db:
        runs, *_ = await _stores(db)
        run = RunRecord("chat:a")
        await runs.create(run)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        runs.append(run, ThoughtLog(content="lost"))
        with pytest.raises(StoreError, match="write lock"):
            await runs.finish(run)
        assert db.lost_writes == 1
        assert "locked" in (db.health() or "")
        other.execute("ROLLBACK")
        other.close()
        runs.append(run, ThoughtLog(content="after"))
        await runs.finish(run)
        assert db.health() is None
        assert [e.content for e in await runs.events(run.id)] == ["after"]


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_lone_surrogates_and_non_finite_numbers_never_fail_a_write(backend: str, tmp_path: Path) -> None:
    async with sql_database(backend, tmp_path) as db:
        runs, inbox, _, memory = await _stores(db)
        run = RunRecord("chat:\ud800", user="a\x00b")  # PostgreSQL text cannot hold NUL
        await runs.create(run)
        entry = InputLog(
            type="text", content={"s": "a\ud800b", "n": [float("nan"), float("inf"), 1.5]}, platform_id="p\udfff"
        )
        assert await inbox.record("chat:a", entry)
        runs.append(run, entry)
        await memory.set("memory:chat:a", {"s": "\udc00", "x": float("-inf")})
        await runs.finish(run)
        [event] = await runs.events(run.id)
        assert event.content == {"s": "a\ufffdb", "n": [None, None, 1.5]}
        [pending] = await inbox.pending()
        assert pending.entry.content == {"s": "a\ufffdb", "n": [None, None, 1.5]}
        assert await memory.get("memory:chat:a") == {"s": "\ufffd", "x": None}
        got = await runs.get(run.id)
        assert got.context == "chat:\ufffd" and got.user == ("a\x00b" if backend == "sqlite" else "a\ufffdb")
        assert db.errors == 0


async def test_writes_nobody_waits_on_share_one_commit_and_a_waited_write_ends_the_wait(tmp_path: Path) -> None:
    # a linger far longer than the test: only a waited-on write can end it, so the write()
    # below returning at all shows the wait is cut short, and one batch shows they shared it
    async with Database(tmp_path / "hub.db", linger=600.0) as db:
        runs = SqlRunStore(db)
        await runs.open()
        run = RunRecord("chat:a")
        await runs.create(run)
        batches = db.batches
        for i in range(3):
            runs.append(run, ThoughtLog(content=f"thought {i}"))
            await asyncio.sleep(0)  # the writer wakes between them, as between a stream's chunks
        async with asyncio.timeout(30):
            await runs.finish(run)
        assert db.batches == batches + 1
        assert [e.content for e in await runs.events(run.id)] == ["thought 0", "thought 1", "thought 2"]


async def test_writes_nobody_waits_on_are_committed_after_the_linger(tmp_path: Path) -> None:
    async with Database(tmp_path / "hub.db", linger=0.01) as db:
        runs = SqlRunStore(db)
        await runs.open()
        run = RunRecord("chat:a")
        await runs.create(run)
        runs.append(run, ThoughtLog(content="alone"))
        reader = sqlite3.connect(tmp_path / "hub.db")
        try:
            await _until(lambda: reader.execute("SELECT COUNT(*) FROM run_events").fetchone()[0] == 1)
        finally:
            reader.close()
