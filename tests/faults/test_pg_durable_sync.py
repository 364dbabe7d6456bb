"""On PostgreSQL, a ``flush()`` (the runs' ``sync``) returns only once what was queued before
it is durable against a server crash: a batch that holds a flush is committed with
``synchronous_commit`` on, and a flush alone after batches committed without waiting for the
disk commits a transaction of its own durably (the WAL is flushed up to it)."""

from __future__ import annotations

import asyncio
from typing import Any

from hub.store.sql import PgDatabase
from hub.testing.postgres import temporary_schema


class Spy:
    """What the database committed, and how: ("batch", durable, writes) or ("wal-flush",)."""

    def __init__(self, db: PgDatabase) -> None:
        self.seen: list[tuple[Any, ...]] = []
        commit_once, flush_wal = db._commit_once, getattr(db, "_flush_wal", None)

        async def spy_commit_once(writes: Any, *, durable: bool) -> Any:
            self.seen.append(("batch", durable, [sql for sql, _ in writes if sql]))
            return await commit_once(writes, durable=durable)

        async def spy_flush_wal() -> None:
            self.seen.append(("wal-flush",))
            assert flush_wal is not None
            await flush_wal()

        db._commit_once = spy_commit_once  # type: ignore[method-assign]
        if flush_wal is not None:
            db._flush_wal = spy_flush_wal  # type: ignore[method-assign]

    def durable_after(self, n: int) -> bool:
        """Whether something committed durably from the ``n``-th record on."""
        return any(s[0] == "wal-flush" or (s[0] == "batch" and s[1]) for s in self.seen[n:])


INSERT = "INSERT INTO notes (body) VALUES (?)"


async def test_a_flush_queued_with_fire_and_forget_writes_commits_them_durably() -> None:
    async with temporary_schema() as url, PgDatabase(url) as db:
        await db.write("CREATE TABLE notes (body TEXT NOT NULL)")
        spy = Spy(db)
        db.write_soon(INSERT, ("taken",))
        await db.flush()  # queued together: one batch, which the flush's caller waits on
        assert spy.seen and all(s[0] == "batch" for s in spy.seen)
        (batch,) = [s for s in spy.seen if any("notes" in w for w in s[2])]
        assert batch[1] is True, spy.seen  # durable, not synchronous_commit = off


async def test_a_flush_alone_after_fire_and_forget_batches_makes_them_durable() -> None:
    async with temporary_schema() as url, PgDatabase(url) as db:
        await db.write("CREATE TABLE notes (body TEXT NOT NULL)")
        spy = Spy(db)
        db.write_soon(INSERT, ("event",))
        while not spy.seen:  # the writer commits it alone, without waiting for the disk
            await asyncio.sleep(0.001)
        for _ in range(100):
            if db._queue is not None and db._queue.empty() and not db._batch:
                break
            await asyncio.sleep(0.001)
        assert spy.seen[0][1] is False
        mark = len(spy.seen)
        await db.flush()  # a barrier alone: it must still make that commit durable
        assert spy.durable_after(mark), spy.seen
        assert await db.fetchall("SELECT body FROM notes") == [("event",)]
        # nothing is left undurable: another flush costs nothing
        mark = len(spy.seen)
        await db.flush()
        assert spy.seen[mark:] == []
