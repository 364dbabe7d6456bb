"""Retention keeps the database bounded, in small batches, with incremental vacuum."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from hub.config import RetentionSection
from hub.logs import InputLog, ThoughtLog
from hub.store import RunRecord, RunState, prune
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

DAY = 86_400.0


async def _turns(runs: SqlRunStore, n: int, *, started: float, events: int = 10) -> list[RunRecord]:
    out = []
    for i in range(n):
        run = RunRecord(f"chat:{i % 50}", started=started + i)
        await runs.create(run)
        for _ in range(events):
            runs.append(run, ThoughtLog(content="x" * 300))
        run.state, run.ended = RunState.COMPLETED, started + i + 1
        await runs.finish(run)
        out.append(run)
    return out


async def _count(db: SqlDatabase, table: str) -> int:
    row = await db.fetchone(f"SELECT COUNT(*) FROM {table}")
    return int(row[0]) if row else 0


async def test_the_database_stays_bounded_by_max_runs(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    policy = RetentionSection(days=0, max_runs=50, batch=37)
    sizes = []
    async with Database(path) as db:
        runs = SqlRunStore(db)
        await runs.open()
        t = time.time()
        for cycle in range(5):
            await _turns(runs, 200, started=t + cycle * 1000)
            report = await prune(db, policy)
            assert report.rows["runs"] == (150 if cycle == 0 else 200)
            assert report.rows["run events"] == report.rows["runs"] * 10
            assert await _count(db, "runs") == 50
            assert await _count(db, "run_events") == 500
            await db.fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
            sizes.append(path.stat().st_size)
        kept = await runs.list(limit=1000)
        assert min(r.started for r in kept) == t + 4 * 1000 + 150  # the newest 50
    # without retention the file would grow ~5x over the five cycles; with it, it stays flat
    assert sizes[-1] <= sizes[0] * 1.1, sizes
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0  # freed pages went back
    conn.close()


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_days_prune_every_kind_of_row_and_dry_run_deletes_nothing(backend: str, tmp_path: Path) -> None:
    now = time.time()
    async with sql_database(backend, tmp_path) as db:
        if backend == "postgres":
            runs, inbox, usage, memory = (
                PostgresRunStore(db),
                PostgresInbox(db, worker="w"),
                SqlUsageStore(db),
                SqlMemoryStore(db),
            )
        else:
            runs, inbox, usage, memory = (
                SqlRunStore(db),
                SqlInbox(db),
                SqlUsageStore(db),
                SqlMemoryStore(db),
            )
        for s in (runs, inbox, usage, memory):
            await s.open()
        old = await _turns(runs, 5, started=now - 100 * DAY, events=2)
        new = await _turns(runs, 3, started=now - 1 * DAY, events=2)
        waiting = RunRecord("chat:w", started=now - 200 * DAY, state=RunState.FAILED, ended=now - 200 * DAY)
        await runs.create(waiting)  # old, but its input waits in the inbox for a retry: kept
        handled_old, handled_new, pending = (InputLog(type="text", content=str(i)) for i in range(3))
        for e in (handled_old, handled_new, pending):
            await inbox.record("chat:a", e)
        inbox.take([pending.id], waiting.id)
        await inbox.done([handled_old.id, handled_new.id])
        await db.write("UPDATE inbox SET handled = ? WHERE id = ?", (now - 95 * DAY, handled_old.id))
        usage.add("conversation:chat:a", time.strftime("%Y-%m-%d", time.gmtime(now - 91 * DAY)), 10)
        usage.add("conversation:chat:a", time.strftime("%Y-%m-%d", time.gmtime(now)), 10)
        memory.clock = lambda: now - 120 * DAY  # chat:old was last active 120 days ago
        await memory.begin("chat:old")
        for key in ("memory:chat:old", "working-memory:chat:old", "context:chat:old", "persona:x"):
            await memory.set(key, {"v": 1})
        memory.clock = lambda: now - 1 * DAY
        await memory.set("memory:chat:new", {"v": 1})  # unchanged for long: its conversation is active
        await memory.begin("chat:new")
        await db.write("UPDATE kv SET updated = ? WHERE key = 'memory:chat:new'", (now - 120 * DAY,))

        policy = RetentionSection(days=90, max_runs=0, batch=2)
        dry = await prune(db, policy, dry_run=True, now=now)
        # both handled inputs go: neither has a platform id that a redelivery could carry
        assert dry.rows == {"runs": 5, "run events": 10, "inbox rows": 2, "usage rows": 1, "conversations": 1}
        assert await _count(db, "runs") == 9  # nothing deleted by a dry run
        report = await prune(db, policy, now=now)
        assert report.rows == dry.rows
        assert {r.id for r in await runs.list(limit=100)} == {r.id for r in new} | {waiting.id}
        assert not set(r.id for r in old) & {r.id for r in await runs.list(limit=100)}
        assert [p.entry.id for p in await inbox.pending()] == [pending.id]
        assert await _count(db, "inbox") == 1
        assert await _count(db, "token_usage") == 1
        assert sorted(await memory.keys()) == ["memory:chat:new", "persona:x"]  # other keys are not a conversation's
        assert (await prune(db, policy, now=now)).total == 0


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_handled_inputs_keep_only_their_platform_id_for_the_redelivery_window(
    backend: str, tmp_path: Path
) -> None:
    now = time.time()
    async with sql_database(backend, tmp_path) as db:
        inbox = PostgresInbox(db, worker="w") if backend == "postgres" else SqlInbox(db)
        await inbox.open()
        big = "x" * 4000  # a long message: what a busy hub kept for 90 days, per input
        recent = InputLog(type="text", content=big, platform_id="tg:1:1")
        stale = InputLog(type="text", content=big, platform_id="tg:1:2")
        anonymous = InputLog(type="text", content=big)  # a webhook body, a schedule: no platform id
        waiting = InputLog(type="text", content=big, platform_id="tg:1:3")
        for e in (recent, stale, anonymous, waiting):
            assert await inbox.record("chat:a", e)
        await inbox.done([recent.id, stale.id, anonymous.id])
        await db.write("UPDATE inbox SET handled = ? WHERE id = ?", (now - 8 * DAY, stale.id))
        report = await prune(db, RetentionSection(days=90, max_runs=0, redelivery_days=7), now=now)
        assert report.rows["inbox rows"] == 2  # the anonymous one, and the one past its window
        rows = dict(await db.fetchall("SELECT id, length(data) FROM inbox"))
        assert set(rows) == {recent.id, waiting.id}
        assert rows[recent.id] < 10 and rows[waiting.id] > 4000  # handled: its id only; pending: whole
        assert await inbox.seen("tg:1:1")  # a redelivery within the window is still refused
        assert not await inbox.record("chat:a", InputLog(type="text", content=big, platform_id="tg:1:1"))
        assert not await inbox.seen("tg:1:2")  # past it, it would be answered again
        assert [p.entry.content for p in await inbox.pending()] == [big]


async def test_an_active_conversation_keeps_the_memory_it_did_not_change_and_the_bot_context_is_never_pruned(
    config, make_hub
) -> None:
    """Retention judges a conversation by its last activity, not by when its memory last
    changed: a user who talks every day keeps what the bot remembers about them, and the
    bot's own memory is never pruned (issue 40, item 1)."""
    from hub import Context, Extension, output

    async def remember(ctx) -> None:
        ctx.memory.setdefault("name", "Ann")  # written at the first run, unchanged after
        ctx.agent.memory.setdefault("name", "Ann")

    @output(type="t:say")
    async def say(content: str, ctx) -> None:
        pass

    ext = Extension(
        "t",
        contexts=[Context(type="t:chat", on_run=remember, outputs=[say], reply_output="t:say")],
        agent_context=Context(type="t:bot"),
    )
    from hub.models.scripted import ScriptedModel

    async with make_hub(ScriptedModel([], default='<response><output type="t:say">hi</output></response>'), ext) as hub:
        assert (await hub.send("t:chat", {"id": "1"}, "my name is Ann")).ok
        db = hub.stores.db
        assert db is not None
        # 100 days on: the memory keys were last written then, but the user spoke today
        await db.write("UPDATE kv SET updated = updated - ?", (100 * DAY,))
        if await db.fetchone("SELECT name FROM sqlite_master WHERE name = 'conversations'"):
            await db.write("UPDATE conversations SET active = active - ?", (100 * DAY,))
        assert (await hub.send("t:chat", {"id": "1"}, "hello again")).ok
        assert (await hub.memory.get("memory:t:chat:1")) == {"name": "Ann"}
        await db.write("UPDATE kv SET updated = updated - ? WHERE key = 'memory:t:chat:1'", (100 * DAY,))
        report = await prune(db, RetentionSection(days=90, max_runs=0))
        assert report.rows["conversations"] == 0, report
        assert await hub.memory.get("memory:t:chat:1") == {"name": "Ann"}
        assert await hub.memory.get("memory:t:bot:bot") == {"name": "Ann"}  # the bot's: idle, but kept
        assert len(await hub.memory.get("working-memory:t:chat:1")) == 4
        # idle past the window: the conversation goes whole, the bot's own context stays
        report = await prune(db, RetentionSection(days=90, max_runs=0), now=time.time() + 91 * DAY)
        assert report.rows["conversations"] == 1, report
        assert await hub.memory.keys("memory:") == ["memory:t:bot:bot"]
        assert await hub.memory.keys("working-memory:") == []


async def test_an_existing_database_is_switched_to_incremental_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated REAL NOT NULL)")
    conn.execute("INSERT INTO kv VALUES ('memory:a', '1', 0)")
    conn.commit()
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    conn.close()
    async with Database(path) as db:
        assert await db.fetchone("PRAGMA auto_vacuum") == (2,)
        assert await db.fetchone("SELECT value FROM kv") == ("1",)


async def test_the_hub_prunes_in_the_background_from_its_start(config, make_hub) -> None:
    import asyncio

    async with Database(config.data_dir / "hub.db") as db:
        runs = SqlRunStore(db)
        await runs.open()
        await _turns(runs, 6, started=time.time() - 100, events=3)
    config.hub.retention = RetentionSection(days=90, max_runs=2, interval=3600)
    async with make_hub(["hi"]) as hub:
        async with asyncio.timeout(10):  # the first prune is at start, in the background
            while len(await hub.runs.list(limit=100)) > 2:
                await asyncio.sleep(0.01)
        result = await hub.send("cli:session", {"user": "ann"}, "hello")
        assert result.ok


async def test_hub_prune_dry_run_shows_and_hub_prune_applies(tmp_path: Path, capsys) -> None:
    import asyncio

    from hub.cli import main

    (tmp_path / "config.toml").write_text('[hub]\ndata_dir = "data"\nretention = { days = 90, max_runs = 100000 }\n')
    async with Database(tmp_path / "data" / "hub.db") as db:
        runs = SqlRunStore(db)
        await runs.open()
        await _turns(runs, 4, started=time.time() - 200 * DAY, events=3)
        await _turns(runs, 2, started=time.time() - 10, events=3)
    config = ["--config", str(tmp_path / "config.toml")]
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["prune", "--dry-run", *config]) == 0
    out = capsys.readouterr().out
    assert "would delete 4 runs, 12 run events" in out and "runs ended within 90 days, at most 100000" in out
    assert await asyncio.to_thread(main, ["prune", *config]) == 0
    assert "deleted 4 runs, 12 run events" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["prune", "--dry-run", *config]) == 0
    assert "would delete 0 runs, 0 run events" in capsys.readouterr().out
