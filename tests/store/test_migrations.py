"""Versioned schema migrations (hub/store/sql/_migrations.py): a database written by the releases
before versioning opens with every row kept and the schema at the current version, on
SQLite; PostgreSQL migrates once with several workers opening together."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hub.errors import StoreError
from hub.logs import InputLog
from hub.store.sql import SCHEMA_VERSION, Database, PgDatabase, SqlInbox, SqlMemoryStore, SqlRunStore
from hub.store.sql._migrations import POSTGRES_STEPS, SQLITE_STEPS
from hub.testing.postgres import temporary_schema
from tests._support.backends import SQL_BACKENDS, sql_database

# "Version 1": the tables exactly as the stores created them before versioning (commit
# 811bee7, each store's _SCHEMA), frozen here. Never edit this to follow a new step.
V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, context TEXT NOT NULL, state TEXT NOT NULL, reason TEXT,
    steps INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0, started REAL NOT NULL, ended REAL,
    parent_id TEXT, user TEXT
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started);
CREATE INDEX IF NOT EXISTS runs_state ON runs (state);
CREATE INDEX IF NOT EXISTS runs_context ON runs (context, started);
CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_id);
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, ts REAL NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inbox (
    id TEXT PRIMARY KEY, context TEXT NOT NULL, platform_id TEXT UNIQUE, data TEXT NOT NULL,
    state TEXT NOT NULL, run_id TEXT, received REAL NOT NULL, handled REAL
);
CREATE INDEX IF NOT EXISTS inbox_state ON inbox (state, received);
ALTER TABLE inbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN failed_run TEXT;
ALTER TABLE inbox ADD COLUMN error TEXT;
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS schedules (name TEXT PRIMARY KEY, last_fire REAL NOT NULL);
CREATE TABLE IF NOT EXISTS persona_revisions (
    name TEXT NOT NULL, rev INTEGER NOT NULL, ts REAL NOT NULL, sha TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '', text TEXT NOT NULL, PRIMARY KEY (name, rev)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS token_usage (
    scope TEXT NOT NULL, day TEXT NOT NULL, tokens INTEGER NOT NULL, PRIMARY KEY (scope, day)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pairings (
    platform TEXT NOT NULL, user TEXT NOT NULL, state TEXT NOT NULL, code TEXT UNIQUE,
    created REAL NOT NULL, expires REAL, approved REAL, PRIMARY KEY (platform, user)
);
"""

V1_ROWS = """
INSERT INTO runs VALUES ('run1', 'chat:1', 'completed', NULL, 2, 10, 5, 100.0, 101.0, NULL, 'alice');
INSERT INTO run_events VALUES ('run1', 1, 'input', 100.0,
  '{"kind": "input", "type": "text", "content": "hi", "id": "in1", "ts": 100.0}');
INSERT INTO inbox (id, context, platform_id, data, state, run_id, received, failures)
  VALUES ('in2', 'chat:1', 'tg:7', '{"kind": "input", "type": "text", "content": "waiting", "id": "in2", "ts": 102.0}',
          'received', NULL, 102.0, 1);
INSERT INTO kv VALUES ('context:chat:1', '{"n": 3}', 100.0);
INSERT INTO token_usage VALUES ('conversation:chat:1', '2026-01-01', 15);
INSERT INTO pairings VALUES ('tg', 'bob', 'approved', NULL, 1.0, NULL, 2.0);
"""


def _write_v1(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA + V1_ROWS)
    conn.commit()
    conn.close()


async def test_a_database_of_the_releases_before_versioning_upgrades_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    _write_v1(path)
    async with Database(path) as db:
        assert db.schema_found == 0  # no schema_version table: the releases before versioning
        versions = [r[0] for r in await db.fetchall("SELECT version FROM schema_version ORDER BY version")]
        assert versions == [s.version for s in SQLITE_STEPS]  # each step once (a gap in the numbers is fine)
        runs, inbox, kv = SqlRunStore(db), SqlInbox(db), SqlMemoryStore(db)
        for s in (runs, inbox, kv):
            await s.open()
        run = await runs.get("run1")
        assert run is not None and (run.state, run.user, run.tokens) == ("completed", "alice", 15)
        assert [e.content for e in await runs.events("run1")] == ["hi"]
        [pending] = await inbox.pending()
        assert (pending.entry.id, pending.entry.content) == ("in2", "waiting")
        assert not await inbox.record("chat:1", InputLog(type="text", content="again", platform_id="tg:7"))
        assert await kv.get("context:chat:1") == {"n": 3}
        columns = {r[1] for r in await db.fetchall("PRAGMA table_info(inbox)")}
        assert {"failures", "failed_run", "error", "claimed_by", "lease_until"} <= columns
    async with Database(path) as db:  # opened again: nothing to do
        assert db.schema_found == SCHEMA_VERSION
        row = await db.fetchone("SELECT COUNT(*) FROM schema_version")
        assert row == (len(SQLITE_STEPS),)


async def test_an_inbox_older_than_its_dead_letter_columns_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    conn = sqlite3.connect(path)  # the first release's inbox, without failures/failed_run/error
    conn.executescript(V1_SCHEMA.split("ALTER TABLE")[0])
    conn.close()
    async with Database(path) as db:
        columns = {r[1] for r in await db.fetchall("PRAGMA table_info(inbox)")}
        assert {"failures", "failed_run", "error", "claimed_by"} <= columns


async def test_a_schema_newer_than_the_code_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    async with Database(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (?, 0, 'from the future')", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=f"version {SCHEMA_VERSION + 1}, newer than this hub"):
        await Database(path).open()


async def test_postgres_workers_opening_together_migrate_once() -> None:
    async with temporary_schema() as url:
        dbs = [PgDatabase(url, pool_size=2) for _ in range(4)]
        await asyncio.gather(*(db.open() for db in dbs))
        try:
            assert sorted(db.schema_found for db in dbs) == [0, SCHEMA_VERSION, SCHEMA_VERSION, SCHEMA_VERSION]
            rows = await dbs[0].fetchall("SELECT version FROM schema_version ORDER BY version")
            assert [r[0] for r in rows] == [s.version for s in POSTGRES_STEPS]
        finally:
            await asyncio.gather(*(db.close() for db in dbs))


_UNDO_AFTER_V60 = {  # v150-v152: reminders, the message history, the runs' full-text index
    "sqlite": (
        "DROP TRIGGER runs_fts_added",
        "DROP TRIGGER runs_fts_deleted",
        "DROP TRIGGER runs_fts_changed",
        "DROP TABLE runs_fts",
        "DROP TABLE history_fts",
        "DROP TABLE history",
        "DROP TABLE reminders",
    ),
    "postgres": ("ALTER TABLE runs DROP COLUMN search", "DROP TABLE history", "DROP TABLE reminders"),
}
_UNDO_AFTER_V4 = (
    "ALTER TABLE runs DROP COLUMN cost",  # v5
    "ALTER TABLE token_usage DROP COLUMN cost",
    "DROP TABLE run_stops",
    "ALTER TABLE runs DROP COLUMN user_name",  # v8
    "ALTER TABLE runs DROP COLUMN user_handle",
    "ALTER TABLE runs DROP COLUMN message",
    "ALTER TABLE runs DROP COLUMN reply",
    "ALTER TABLE pairings DROP COLUMN user_name",
    "ALTER TABLE pairings DROP COLUMN user_handle",
    "ALTER TABLE runs DROP COLUMN models",  # v50
    "ALTER TABLE runs DROP COLUMN cached_tokens",  # v60
)


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_runs_the_store_failed_before_the_flag_existed_are_flagged_once(backend: str, tmp_path: Path) -> None:
    # a database at version 3: runs had no store_failed column, only the reason's words said it
    async with sql_database(backend, tmp_path) as db:
        await db.write("ALTER TABLE runs DROP COLUMN store_failed")
        for statement in (*_UNDO_AFTER_V60[backend], *_UNDO_AFTER_V4):  # the steps after it, undone: at version 3
            await db.write(statement)
        await db.write("DELETE FROM schema_version WHERE version >= 4")
        for run_id, state, reason in (
            ("outage", "failed", "store_error: StoreError: SQLite table 'inbox': write failed: disk I/O error"),
            ("bug", "failed", "internal error: ValueError: boom"),
            ("quoted", "completed", "store_error in the words of a completed run"),
        ):
            await db.write(
                "INSERT INTO runs (id, context, state, reason, started) VALUES (?, 'chat:1', ?, ?, 1.0)",
                (run_id, state, reason),
            )
        await db.close()
        await db.open()  # opened again: the step runs at open
        assert db.schema_found == 3
        runs = SqlRunStore(db)
        flags = {r: (await runs.get(r)).store_failed for r in ("outage", "bug", "quoted")}  # type: ignore[union-attr]
        assert flags == {"outage": True, "bug": False, "quoted": False}
