"""SQLite's small work runs on the event loop's thread, and never beside aiosqlite's.

A turn's few commits and point reads cost SQLite tens of microseconds; a trip to aiosqlite's
thread costs more than that. So they run inline while that thread is idle (hub/store/sql/_sqlite.py), and
these tests hold the rules that make it safe: the connection is never used by two threads
at once, nothing inline waits on another process's lock, and the WAL is checkpointed in the
thread, not by a commit on the loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

import hub.store.sql._sqlite as hub_db
from hub.store.sql import INLINE_MAX, Database

SCHEMA = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT)"


async def _open(path: Path, **kw) -> Database:
    db = await Database(path, **kw).open()
    await db.ensure_schema("t", SCHEMA)
    return db


class Trips:
    """Counts the calls that went to aiosqlite's thread."""

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        conn = db.conn
        original = conn._execute

        async def counted(fn, *args):
            self.n += 1
            return await original(fn, *args)

        monkeypatch.setattr(conn, "_execute", counted)


async def test_a_small_commit_and_a_point_read_make_no_trip_to_the_thread(tmp_path: Path, monkeypatch) -> None:
    db = await _open(tmp_path / "hub.db")
    try:
        trips = Trips(db, monkeypatch)
        await db.write("INSERT INTO t VALUES (?, ?)", ("a", "1"))
        db.write_soon("INSERT INTO t VALUES (?, ?)", ("b", "2"))
        await db.flush()
        assert await db.fetchone("SELECT v FROM t WHERE k = ?", ("b",)) == ("2",)
        assert trips.n == 0
        # a listing is read in the thread (it may be long)
        assert sorted(await db.fetchall("SELECT k FROM t")) == [("a",), ("b",)]
        assert trips.n == 1
    finally:
        await db.close()


async def test_a_large_batch_is_committed_in_the_thread(tmp_path: Path, monkeypatch) -> None:
    db = await _open(tmp_path / "hub.db")
    try:
        trips = Trips(db, monkeypatch)
        for i in range(INLINE_MAX + 1):
            db.write_soon("INSERT INTO t VALUES (?, ?)", (f"k{i}", "v"))
        await db.flush()
        assert trips.n == 1
        assert await db.fetchone("SELECT COUNT(*) FROM t") == (INLINE_MAX + 1,)
    finally:
        await db.close()


async def test_inline_work_waits_while_the_thread_uses_the_connection(tmp_path: Path) -> None:
    """While something of ours runs in aiosqlite's thread, a commit or a point read does not
    touch the connection from the loop: it queues behind, in the thread, in order."""
    db = await _open(tmp_path / "hub.db")
    try:
        entered, release = threading.Event(), threading.Event()
        users: list[str] = []

        def slow(raw: sqlite3.Connection) -> None:
            entered.set()
            users.append("thread start")
            release.wait(10)
            users.append("thread end")

        blocker = asyncio.ensure_future(db._in_thread(slow))
        await asyncio.to_thread(entered.wait, 10)
        write = asyncio.ensure_future(db.write("INSERT INTO t VALUES (?, ?)", ("a", "1")))
        read = asyncio.ensure_future(db.fetchone("SELECT COUNT(*) FROM t"))
        # a sentinel through the loop: both have had their chance to run inline by now
        for _ in range(20):
            await asyncio.sleep(0)
        assert not write.done() and not read.done()
        release.set()
        await blocker
        await write
        assert users == ["thread start", "thread end"]
        assert await read in ((0,), (1,))
        assert await db.fetchone("SELECT v FROM t WHERE k = 'a'") == ("1",)
    finally:
        await db.close()


async def test_another_process_holding_the_write_lock_never_blocks_the_loop(tmp_path: Path) -> None:
    """The connection's own busy timeout is 0: a commit that meets the lock is redone in the
    thread, where it waits (``busy_timeout``, then the writer's retries) while the loop goes on."""
    path = tmp_path / "hub.db"
    db = await _open(path, busy_timeout=5.0)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        assert await db.fetchone("PRAGMA busy_timeout") == (0,)
        other.execute("BEGIN IMMEDIATE")
        loop = asyncio.get_running_loop()
        started = loop.time()
        write = asyncio.ensure_future(db.write("INSERT INTO t VALUES (?, ?)", ("a", "1")))
        for _ in range(50):  # the loop keeps turning while the write waits for the lock
            await asyncio.sleep(0.001)
        assert not write.done()
        assert loop.time() - started < 5.0  # not blocked for the busy timeout
        other.execute("COMMIT")
        await write
        assert await db.fetchone("SELECT v FROM t WHERE k = 'a'") == ("1",)
        assert await db.fetchone("PRAGMA busy_timeout") == (0,)  # the thread's wait was its own
        assert db.health() is None
    finally:
        other.close()
        await db.close()


async def test_the_wal_is_checkpointed_in_the_thread(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hub_db, "CHECKPOINT_EVERY", 8)
    path = tmp_path / "hub.db"
    db = await _open(path)
    try:
        trips = Trips(db, monkeypatch)
        for i in range(8):
            await db.write("INSERT INTO t VALUES (?, ?)", (f"k{i}", "x" * 1000))
        await db.flush()  # the writer's upkeep after the eighth commit ran before this barrier
        assert db.checkpoints == 1
        assert trips.n == 1  # the checkpoint, and nothing else, went to the thread
        frames, copied = db.last_checkpoint
        assert frames > 0 and copied == frames  # every page of the WAL is in the database file
        # SQLite's own checkpoint (which a commit on the loop would have run) is off
        assert await db.fetchone("PRAGMA wal_autocheckpoint") == (0,)
    finally:
        await db.close()


async def test_a_caller_that_stops_waiting_leaves_the_connection_to_the_thread(tmp_path: Path) -> None:
    """A cancelled caller does not end the work it gave aiosqlite's thread: inline work still
    waits until the thread is done with the connection."""
    db = await _open(tmp_path / "hub.db")
    try:
        entered, release = threading.Event(), threading.Event()

        def slow(raw: sqlite3.Connection) -> None:
            entered.set()
            release.wait(10)

        caller = asyncio.ensure_future(db._in_thread(slow))
        await asyncio.to_thread(entered.wait, 10)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert not db._idle()  # the thread still has the connection
        write = asyncio.ensure_future(db.write("INSERT INTO t VALUES (?, ?)", ("a", "1")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not write.done()
        release.set()
        await write
        assert db._idle()
        assert await db.fetchone("SELECT v FROM t WHERE k = 'a'") == ("1",)
    finally:
        await db.close()


async def test_a_batch_carrying_a_large_value_is_committed_in_the_thread(tmp_path: Path, monkeypatch) -> None:
    db = await _open(tmp_path / "hub.db")
    try:
        trips = Trips(db, monkeypatch)
        await db.write("INSERT INTO t VALUES (?, ?)", ("big", "x" * (hub_db.INLINE_BYTES + 1)))
        assert trips.n == 1
        await db.write("INSERT INTO t VALUES (?, ?)", ("small", "x"))
        assert trips.n == 1
    finally:
        await db.close()


async def test_writes_nobody_waits_for_are_committed_beside_the_loop(tmp_path: Path, monkeypatch) -> None:
    """A batch of write_soon() alone (event logs) goes to the thread: the loop, meanwhile,
    handles what arrives (a reply's closing tag must not wait behind an event log's commit)."""
    db = await _open(tmp_path / "hub.db")
    try:
        trips = Trips(db, monkeypatch)
        committed = db.batches
        db.write_soon("INSERT INTO t VALUES (?, ?)", ("a", "1"))
        while db.batches == committed:  # the writer's linger ends, then it commits
            await asyncio.sleep(0.001)
        await db.flush()
        assert trips.n == 1
        assert await db.fetchone("SELECT v FROM t WHERE k = 'a'") == ("1",)
    finally:
        await db.close()
