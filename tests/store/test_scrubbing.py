"""``Database.scrubbing``: what is deleted inside it leaves nothing in the SQLite file, even on
a build whose ``secure_delete`` is off by default (many are; Debian's is on, so the test turns
it off first, as such a build would have it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hub.store.sql import Database

WORD = "quetzalcoatl-secret"


def _off(raw: sqlite3.Connection) -> None:
    raw.execute("PRAGMA secure_delete = OFF")


async def _file_holds(tmp_path: Path, *, scrub: bool) -> bool:
    path = tmp_path / "hub.db"
    async with Database(path) as db:
        await db._in_thread(_off)
        for i in range(50):
            await db.write("INSERT INTO kv (key, value, updated) VALUES (?, ?, 0)", (f"k{i}", f"{WORD} {i}"))
        await db.write("INSERT INTO kv (key, value, updated) VALUES ('keep', 'kept', 0)")
        await db.checkpoint()
        if scrub:
            async with db.scrubbing():
                await db.write("DELETE FROM kv WHERE key <> 'keep'")
        else:
            await db.write("DELETE FROM kv WHERE key <> 'keep'")
            await db.checkpoint()
        assert await db.fetchall("SELECT key FROM kv") == [("keep",)]
        raw = b"".join(p.read_bytes() for p in (path, tmp_path / "hub.db-wal") if p.exists())
    return WORD.encode() in raw


@pytest.mark.parametrize("scrub", [False, True])
async def test_deleted_content_leaves_the_file_only_when_scrubbed(tmp_path: Path, scrub: bool) -> None:
    assert await _file_holds(tmp_path, scrub=scrub) is not scrub
