"""The write queue's writer is watched: if it dies, the writes it held fail with a
StoreError saying so (none hangs), health says the store is degraded, and a new writer
commits what comes next; upkeep that fails between batches never kills it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hub.errors import StoreError
from hub.store.sql import SqlDatabase
from tests._support.backends import SQL_BACKENDS, sql_database

TABLE = "CREATE TABLE IF NOT EXISTS notes (body TEXT NOT NULL)"
INSERT = "INSERT INTO notes (body) VALUES (?)"


async def _rows(db: SqlDatabase) -> list[str]:
    return sorted(r[0] for r in await db.fetchall("SELECT body FROM notes"))


async def _prepared(db: SqlDatabase) -> None:
    await db.write(TABLE)


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_a_writer_that_dies_fails_its_writes_restarts_and_says_so(kind: str, tmp_path: Path) -> None:
    async with sql_database(kind, tmp_path) as db:
        db.degraded_for = 60.0
        await _prepared(db)
        real = db._settle
        broken = [True]

        def settle(batch: Any, errors: Any) -> None:  # a bug in the writer, once
            if broken[0] and any("INSERT" in sql for sql, _, _ in batch):
                broken[0] = False
                raise RuntimeError("injected: the writer's bug")
            real(batch, errors)

        db._settle = settle  # type: ignore[method-assign]
        with pytest.raises(StoreError, match="writer died"):
            await asyncio.wait_for(db.write(INSERT, ("first",)), 5)  # told, never left waiting
        assert "writer died" in (db.health() or "")
        assert db.writer_restarts == 1
        await asyncio.wait_for(db.write(INSERT, ("second",)), 5)  # the new writer commits it
        db.write_soon(INSERT, ("third",))
        await asyncio.wait_for(db.flush(), 5)
        assert await _rows(db) == ["first", "second", "third"]  # its batch was committed before the bug; nothing twice


async def test_upkeep_that_fails_between_batches_does_not_kill_the_writer(tmp_path: Path) -> None:
    """The issue's reproduction: a StoreError out of the WAL checkpoint killed the writer;
    flush() then returned at once with nothing committed and write() hung."""
    async with sql_database("sqlite", tmp_path) as db:
        db.degraded_for = 60.0
        await _prepared(db)

        async def checkpoint() -> None:
            raise StoreError("injected: the checkpoint's connection is gone", store="sqlite", operation="checkpoint")

        db._after_batch = checkpoint  # type: ignore[method-assign]
        await asyncio.wait_for(db.write(INSERT, ("one",)), 5)
        db.write_soon(INSERT, ("two",))
        await asyncio.wait_for(db.flush(), 5)
        assert await _rows(db) == ["one", "two"]
        assert "checkpoint's connection is gone" in (db.health() or "")
        await asyncio.wait_for(db.write(INSERT, ("three",)), 5)
        assert await _rows(db) == ["one", "three", "two"]
