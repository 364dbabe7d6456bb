"""One SQLite database shared by the SQLite stores, with group commit.

Writes go through one queue. A writer task drains it and commits everything it found in
one transaction, so a thousand conversations writing at once cost a handful of commits,
not a thousand. :meth:`Database.write` returns once the write is committed (use it when a
later step depends on durability: a received message, a run's terminal state);
:meth:`Database.write_soon` returns at once and is committed within milliseconds (event
logs). WAL mode with ``synchronous=NORMAL``: a crash may lose the last commits' worth of
event log, never corrupt the file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from .errors import StoreError

__all__ = ["Database"]

log = logging.getLogger(__name__)

_Write = tuple[str, Sequence[Any] | None, "asyncio.Future[None] | None"]
_BARRIER = ""  # queued by flush(): resolves once everything queued before it is committed


class Database:
    """An aiosqlite connection with a group-committing writer. ``path`` may be ``":memory:"``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._conn: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Write] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._schemas: set[str] = set()
        self._closing = False

    async def open(self) -> Database:
        if self._conn is not None:
            return self
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = await aiosqlite.connect(self.path, isolation_level=None)
            await self._conn.execute("PRAGMA journal_mode=WAL")
            await self._conn.execute("PRAGMA synchronous=NORMAL")
            await self._conn.execute("PRAGMA busy_timeout=5000")
            await self._conn.execute("PRAGMA foreign_keys=ON")
        except (sqlite3.Error, OSError) as e:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
            raise StoreError(f"cannot open SQLite database {self.path}: {e}") from e
        self._queue = asyncio.Queue()
        self._closing = False
        self._writer = asyncio.create_task(self._write_loop(), name=f"sqlite-writer:{self.path}")
        return self

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError(f"database {self.path} is not open")
        return self._conn

    async def ensure_schema(self, name: str, script: str) -> None:
        """Create a store's tables once per connection (statements must be idempotent)."""
        if name in self._schemas:
            return
        await self.flush()
        try:
            await self.conn.executescript(script)
        except sqlite3.Error as e:
            raise StoreError(f"cannot create tables for {name} in {self.path}: {e}") from e
        self._schemas.add(name)

    async def write(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Queue a write and wait until it is committed."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._put((sql, params, fut))
        await fut

    def write_soon(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Queue a write; it is committed with the next batch, within milliseconds."""
        self._put((sql, params, None))

    def _put(self, item: _Write) -> None:
        if self._queue is None or self._closing:
            raise StoreError(f"database {self.path} is closed")
        self._queue.put_nowait(item)

    async def flush(self) -> None:
        """Wait until everything queued so far is committed."""
        if self._queue is not None and self._writer is not None and not self._writer.done():
            await self.write(_BARRIER)

    # Each await on aiosqlite is a round trip to its thread and back through the event
    # loop's self-pipe; a query through a cursor is three (execute, fetch, close), through
    # execute_fetchall one.

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row | tuple[Any, ...]]:
        try:
            return list(await self.conn.execute_fetchall(sql, params))
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: query failed: {e}") from e

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row (use it for queries that select at most a few rows)."""
        try:
            rows = await self.conn.execute_fetchall(sql, params)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: query failed: {e}") from e
        for row in rows:
            return tuple(row)
        return None

    async def _write_loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            first = await queue.get()
            batch = [first]
            while not queue.empty():
                batch.append(queue.get_nowait())
            try:
                await self._commit(batch)
            except Exception as e:  # report to every waiter; a fire-and-forget write is logged
                err = e if isinstance(e, StoreError) else StoreError(f"{self.path}: write failed: {e}")
                failed_quietly = 0
                for _, _, fut in batch:
                    if fut is None:
                        failed_quietly += 1
                    elif not fut.done():
                        fut.set_exception(err)
                if failed_quietly:
                    log.error("%s: %d queued writes failed: %s", self.path, failed_quietly, e)
            else:
                for _, _, fut in batch:
                    if fut is not None and not fut.done():
                        fut.set_result(None)

    async def _commit(self, batch: list[_Write]) -> None:
        conn = self.conn
        run_in_thread = getattr(conn, "_execute", None)
        raw = getattr(conn, "_connection", None)
        if run_in_thread is not None and raw is not None:
            # The whole transaction in one trip to aiosqlite's thread instead of one per
            # statement (BEGIN, each group, COMMIT). `_execute` is aiosqlite's own way
            # of running a function there (stable since 0.17; pinned <1).
            await run_in_thread(_commit_sync, raw, _group(batch))
            return
        await conn.execute("BEGIN")
        try:
            for sql, group in _group(batch):
                if len(group) == 1:
                    await conn.execute(sql, group[0] or ())
                else:
                    await conn.executemany(sql, [p or () for p in group])
            await conn.execute("COMMIT")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        if self._conn is None:
            return
        try:
            await self.flush()
        except StoreError as e:
            log.error("%s: last writes failed at close: %s", self.path, e)
        self._closing = True
        if self._writer is not None:
            self._writer.cancel()
            try:
                await self._writer
            except asyncio.CancelledError:
                pass
        self._writer = None
        await self._conn.close()
        self._conn = None
        self._schemas.clear()

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _commit_sync(raw: sqlite3.Connection, groups: list[tuple[str, list[Sequence[Any] | None]]]) -> None:
    raw.execute("BEGIN")
    try:
        for sql, group in groups:
            if len(group) == 1:
                raw.execute(sql, group[0] or ())
            else:
                raw.executemany(sql, [p or () for p in group])
        raw.execute("COMMIT")
    except BaseException:
        raw.execute("ROLLBACK")
        raise


def _group(batch: Iterable[_Write]) -> list[tuple[str, list[Sequence[Any] | None]]]:
    """Consecutive writes with the same SQL, grouped so each group is one executemany."""
    groups: list[tuple[str, list[Sequence[Any] | None]]] = []
    for sql, params, _ in batch:
        if sql == _BARRIER:  # a flush: nothing to execute, its future resolves with the batch
            continue
        if groups and groups[-1][0] == sql:
            groups[-1][1].append(params)
        else:
            groups.append((sql, [params]))
    return groups
