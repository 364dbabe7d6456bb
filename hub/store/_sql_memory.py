"""MemoryStore on SQLite through aiosqlite (WAL), the default, in ``data/hub.db``."""

from __future__ import annotations

import json
import time
from typing import Any

from ._memory import MemoryStore
from .sql import SqlDatabase, dumps

__all__ = ["SQLiteMemoryStore", "PostgresMemoryStore"]


class SQLiteMemoryStore(MemoryStore):
    """Values stored as JSON text. ``set`` returns once the value is committed."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()

    async def get(self, key: str) -> Any | None:
        row = await self.db.fetchone("SELECT value FROM kv WHERE key = ?", (key,))
        return json.loads(row[0]) if row is not None else None

    async def set(self, key: str, value: Any) -> None:
        try:
            text = dumps(value, default=None)  # NaN/Infinity become null, lone surrogates U+FFFD
        except (TypeError, ValueError) as e:
            raise TypeError(f"value for {key!r} is not JSON-serialisable: {e}") from e
        await self.db.write(
            "INSERT INTO kv (key, value, updated) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated = excluded.updated",
            (key, text, time.time()),
        )

    async def delete(self, key: str) -> None:
        await self.db.write("DELETE FROM kv WHERE key = ?", (key,))

    async def clear(self, prefix: str = "") -> None:
        if prefix:
            await self.db.write("DELETE FROM kv WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
        else:
            await self.db.write("DELETE FROM kv")

    async def keys(self, prefix: str = "") -> list[str]:
        if prefix and prefix[-1] != "\U0010ffff":
            # a range of the primary key, not a scan of every key: the keys that start with
            # the prefix are those from it to it with its last character the next one
            # (code point order is SQLite's BINARY and PostgreSQL's "C" collation)
            after = ord(prefix[-1]) + 1
            end = prefix[:-1] + chr(0xE000 if 0xD800 <= after <= 0xDFFF else after)  # no surrogate
            rows = await self.db.fetchall(
                "SELECT key FROM kv WHERE key >= ? AND key < ? AND substr(key, 1, ?) = ? ORDER BY key",
                (prefix, end, len(prefix), prefix),
            )
        else:
            rows = await self.db.fetchall(
                "SELECT key FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key", (len(prefix), prefix)
            )
        return [r[0] for r in rows]


class PostgresMemoryStore(SQLiteMemoryStore):
    """The same MemoryStore on PostgreSQL (``[store] url``): the SQL is shared, the database
    is a :class:`hub.store.sql.PgDatabase` that several workers use at once."""
