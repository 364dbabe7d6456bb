"""One SQLite database shared by the SQLite stores, with group commit and isolated failures.

Writes go through one queue. A writer task drains it and commits everything it found in
one transaction, so a thousand conversations writing at once cost a handful of commits,
not a thousand. :meth:`Database.write` returns once the write is committed (use it when a
later step depends on durability: a received message, a run's terminal state);
:meth:`Database.write_soon` returns at once and is committed within milliseconds (event
logs): a batch of such writes alone waits up to ``linger`` (5 ms) for more to share its
commit, and any awaited write ends that wait. WAL mode with ``synchronous=NORMAL``: a crash
may lose the last commits' worth of event log, never corrupt the file.

One bad write never takes others down with it. When a batch fails, it is applied again
with each write in a savepoint of its own, so only the culprit fails; ``SQLITE_BUSY``
(another process, such as ``hub persona rollback``, holding the write lock) is retried
with backoff. Writes that still fail are counted (:attr:`Database.lost_writes` for the
fire-and-forget ones), and :meth:`Database.health` reports the store degraded while
failures occur. Strings are stored as valid UTF-8 (a lone surrogate becomes U+FFFD), so no
input can make a write fail.

The transaction of each batch is in :mod:`hub.db_commit`; the cleaning of values in
:mod:`hub.db_values` (``dumps`` and ``clean_text`` are re-exported here).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import aiosqlite

from .db_batch import LINGER, LINGER_MAX, GroupCommit
from .db_commit import _Busy, _commit_sync, _Write
from .errors import StoreError
from .db_values import _clean_params, clean_text, dumps
from .migrations import SCHEMA_VERSION, migrate_sqlite

if TYPE_CHECKING:
    from .pg import PgDatabase

__all__ = ["Database", "SqlDatabase", "dumps", "clean_text", "LINGER", "LINGER_MAX"]

log = logging.getLogger(__name__)



SqlDatabase: TypeAlias = "Database | PgDatabase"
"""What the SQL stores are built on: SQLite here, or PostgreSQL (:class:`hub.pg.PgDatabase`,
the same methods), chosen by ``[store] url``."""


class Database(GroupCommit):
    """An aiosqlite connection with a group-committing writer. ``path`` may be ``":memory:"``.

    ``busy_timeout`` is how long SQLite waits for another process's write lock before a
    batch is retried (``busy_retries`` times, with doubling delays); ``degraded_for`` is how
    long a failure keeps :meth:`health` degraded. Opening it brings its schema to
    :data:`hub.migrations.SCHEMA_VERSION` (every store's tables, see :mod:`hub.migrations`).
    """

    dialect = "sqlite"  # the SQL it speaks (hub.pg.PgDatabase speaks "postgres")
    label = "SQLite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        busy_retries: int = 6,
        retry_delay: float = 0.05,
        degraded_for: float = 60.0,
        linger: float = LINGER,
    ) -> None:
        self.path = str(path)
        self._init_queue(linger=linger)
        self.busy_timeout = busy_timeout
        self.busy_retries = busy_retries
        self.retry_delay = retry_delay
        self.degraded_for = degraded_for
        self._conn: aiosqlite.Connection | None = None
        self._schemas: set[str] = set()
        self.busy_waits = 0  # batches retried because another connection held the write lock
        self.schema_found: int | None = None  # the schema version the database had when opened

    async def open(self) -> Database:
        if self._conn is not None:
            return self
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = await aiosqlite.connect(self.path, isolation_level=None)
            await self._conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            await self._migrate_auto_vacuum()
            await self._conn.execute("PRAGMA journal_mode=WAL")
            await self._conn.execute("PRAGMA synchronous=NORMAL")
            await self._conn.execute("PRAGMA foreign_keys=ON")
            self.schema_found = await migrate_sqlite(self._conn, where=f"SQLite {self.path}")
        except (sqlite3.Error, OSError, StoreError) as e:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
            self._failed(f"open: {e}")
            if isinstance(e, StoreError):
                raise
            raise StoreError(f"cannot open SQLite database {self.path}: {e}", store="sqlite", operation="open") from e
        if getattr(self._conn, "_execute", None) is None or getattr(self._conn, "_connection", None) is None:
            raise StoreError(f"aiosqlite {aiosqlite.__version__} lacks Connection._execute; install aiosqlite<1")
        self._closing = False
        self._start_writer(f"sqlite-writer:{self.path}")
        return self

    async def _migrate_auto_vacuum(self) -> None:
        """Incremental vacuum (retention frees pages without rewriting the file). A database
        made before that setting is rewritten once by VACUUM, which is what applies it."""
        row = await (await self.conn.execute("PRAGMA auto_vacuum")).fetchone()
        if row is not None and row[0] == 2:
            return
        await self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        tables = await self.conn.execute_fetchall("SELECT 1 FROM sqlite_master LIMIT 1")
        if tables:
            log.info("%s: switching to incremental vacuum (a one-off VACUUM)", self.path)
            await self.conn.execute("VACUUM")

    @property
    def schema_version(self) -> int:
        """The schema version this code keeps the database at (once open)."""
        return SCHEMA_VERSION

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError(f"database {self.path} is not open", store="sqlite", operation="use")
        return self._conn

    async def incremental_vacuum(self, *, pages: int = 2000) -> int:
        """Give free pages back to the file system, ``pages`` per step; returns how many."""
        await self.flush()
        freed = 0
        try:
            while True:
                row = await self.fetchone("PRAGMA freelist_count")
                free = int(row[0]) if row else 0
                if not free:
                    return freed
                # fetched, not just executed: the pragma frees one page per step of the statement
                await self.conn.execute_fetchall(f"PRAGMA incremental_vacuum({min(free, pages)})")
                row = await self.fetchone("PRAGMA freelist_count")
                left = int(row[0]) if row else 0
                if left >= free:
                    return freed  # nothing more can be freed (auto_vacuum is off)
                freed += free - left
                await asyncio.sleep(0)
        except sqlite3.Error as e:
            self._failed(f"incremental vacuum: {e}")
            raise StoreError(f"{self.path}: incremental vacuum failed: {e}", store="sqlite", operation="vacuum") from e

    # --- health -------------------------------------------------------------------------

    # --- writing ------------------------------------------------------------------------

    async def ensure_schema(self, name: str, script: str) -> None:
        """Create a store's tables once per connection (statements must be idempotent)."""
        if name in self._schemas:
            return
        await self.flush()
        try:
            await self.conn.executescript(script)
        except sqlite3.Error as e:
            self._failed(f"{name}: create tables: {e}")
            raise StoreError(
                f"cannot create tables for {name} in {self.path}: {e}", store=name, operation="create tables"
            ) from e
        self._schemas.add(name)

    def _prepare(self, item: _Write) -> _Write:
        sql, params, fut = item
        return sql, _clean_params(params), fut

    # Each await on aiosqlite is a round trip to its thread and back through the event
    # loop's self-pipe; a query through a cursor is three (execute, fetch, close), through
    # execute_fetchall one.

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row | tuple[Any, ...]]:
        try:
            return list(await self.conn.execute_fetchall(sql, _clean_params(params) or ()))
        except sqlite3.Error as e:
            self._failed(f"read: {e}")
            raise StoreError(f"{self.path}: query failed: {e}", store="sqlite", operation="read") from e

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row (use it for queries that select at most a few rows)."""
        try:
            rows = await self.conn.execute_fetchall(sql, _clean_params(params) or ())
        except sqlite3.Error as e:
            self._failed(f"read: {e}")
            raise StoreError(f"{self.path}: query failed: {e}", store="sqlite", operation="read") from e
        for row in rows:
            return tuple(row)
        return None

    async def _commit(self, batch: list[_Write]) -> list[BaseException | None]:
        """Commit ``batch``; one error (or None) per write. Busy is retried with backoff."""
        conn = self.conn
        # The whole transaction in one trip to aiosqlite's thread instead of one per
        # statement. `_execute` is aiosqlite's own way of running a function there (stable
        # since 0.17; pinned <1, checked at open).
        run_in_thread = conn._execute
        raw = conn._connection
        writes = [(sql, params) for sql, params, _ in batch]
        delay = self.retry_delay
        for attempt in range(self.busy_retries + 1):
            try:
                return await run_in_thread(_commit_sync, raw, writes)
            except _Busy as e:
                self.busy_waits += 1
                if attempt == self.busy_retries:
                    raise StoreError(
                        f"SQLite {self.path}: the write lock stayed held by another connection "
                        f"({self.busy_retries + 1} tries): {e.original}", store="sqlite", operation="write",
                    ) from e.original
                log.warning("%s: database is locked by another connection; retrying in %.2fs", self.path, delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._conn is None:
            return
        await self._stop_writer()
        await self._conn.close()
        self._conn = None
        self._schemas.clear()

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
