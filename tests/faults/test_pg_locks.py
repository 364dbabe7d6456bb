"""A PostgreSQL advisory lock never leaks into the main pool: a check of a conversation's
lock cut short between taking and releasing it leaves no lock behind, so that conversation
is not wedged on every worker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hub.store.sql import PgDatabase
from hub.store.sql._postgres_sql import lock_key
from hub.testing.postgres import temporary_schema


class CutAfterTheLock:
    """A pooled connection whose lock check is cut short right after the server took the
    lock (a cancellation, a dropped statement): the statement that would release it never runs."""

    def __init__(self, conn: Any, key: int) -> None:
        self._conn, self._key = conn, key

    async def fetchval(self, sql: str, *args: Any) -> Any:
        if "pg_try_advisory_lock" in sql:
            await self._conn.fetchval("SELECT pg_try_advisory_lock($1)", self._key)
            raise asyncio.CancelledError()
        return await self._conn.fetchval(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def test_a_lock_check_cut_short_leaves_no_lock_in_the_pool() -> None:
    async with temporary_schema() as url:
        async with PgDatabase(url, pool_size=1) as db, PgDatabase(url, pool_size=1) as other:
            assert await db.try_lock("t:chat:ann")
            key = lock_key(db.namespace, "t:chat:ann")
            pool = db.pool
            real_acquire = pool.acquire

            class Acquire:
                def __init__(self) -> None:
                    self._cm = real_acquire()

                async def __aenter__(self) -> Any:
                    return CutAfterTheLock(await self._cm.__aenter__(), key)

                async def __aexit__(self, *exc: Any) -> Any:
                    return await self._cm.__aexit__(*exc)

            class Pool:
                acquire = Acquire

                def __getattr__(self, name: str) -> Any:
                    return getattr(pool, name)

            db._pool = Pool()
            with pytest.raises(asyncio.CancelledError):
                await db.try_lock("t:chat:ann")
            db._pool = pool
            # the pool's one connection serves the next reads and writes; no lock stayed with it
            assert await db.fetchall("SELECT 1") == [(1,)]
            assert await asyncio.wait_for(other.try_lock("t:chat:ann"), 5)
            async with asyncio.timeout(5):  # a worker's run takes the conversation's lock at once
                async with other.lock("t:chat:ann"):
                    pass
