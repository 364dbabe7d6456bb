"""The backends every store contract suite runs on: in memory, SQLite, PostgreSQL.

``sql_database(kind, tmp_path)`` opens the database a SQL store is built on: SQLite in
``tmp_path``, or PostgreSQL in a schema of its own (``hub.testing.postgres``), dropped
afterwards; skipped with the reason where PostgreSQL is not reachable, failed where CI is set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from hub.store.sql import Database, PgDatabase, SqlDatabase
from hub.testing.postgres import temporary_schema

BACKENDS = ["memory", "sqlite", "postgres"]
SQL_BACKENDS = ["sqlite", "postgres"]


@asynccontextmanager
async def sql_database(kind: str, tmp_path: Path, **options: Any) -> AsyncIterator[SqlDatabase]:
    """The database of backend ``kind``, open; ``options`` go to its constructor."""
    if kind == "sqlite":
        async with Database(tmp_path / "hub.db", **options) as db:
            yield db
        return
    assert kind == "postgres", kind
    async with temporary_schema() as url:
        async with PgDatabase(url, **options) as pg:
            yield pg
