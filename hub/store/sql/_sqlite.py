"""One SQLite database shared by the SQLite stores, with group commit and isolated failures.

Writes go through one queue. A writer task drains it and commits everything it found in
one transaction, so a thousand conversations writing at once cost a handful of commits,
not a thousand. `Database.write()` returns once the write is committed (use it when a
later step depends on durability: a received message, a run's terminal state);
`Database.write_soon()` returns at once and is committed within milliseconds (event
logs): a batch of such writes alone waits up to ``linger`` (5 ms) for more to share its
commit, and any awaited write ends that wait. WAL mode with ``synchronous=NORMAL``: a crash
may lose the last commits' worth of event log, never corrupt the file.

Small work runs on the event loop's thread. A turn's handful of commits and point reads cost
less in SQLite (WAL, no fsync on commit) than a trip to aiosqlite's thread and back, which
also lets the two threads contend for the GIL (the figures are on the docs' benchmarks
page). So a batch of up to
`INLINE_MAX` writes (and `INLINE_BYTES`) that someone waits for, and
`Database.fetchone()`, run inline whenever aiosqlite's thread is idle; everything else (a
batch of ``write_soon`` writes alone, which nobody waits for, so the loop goes on beside it;
larger batches, `Database.fetchall()`, schema, vacuum, the WAL checkpoint) runs in that
thread, and while anything is there, inline work queues behind it, so
the connection is never used by two threads at once. Nothing inline can wait on a lock: the
connection's busy timeout is 0, and work that meets another process's write lock is redone
in the thread with ``busy_timeout`` (and the writer's retries). The WAL is checkpointed in the
thread every `CHECKPOINT_EVERY` commits, never by a commit on the loop (SQLite's
automatic checkpoint, which copies pages and syncs the file, is off on this connection).

One bad write never takes others down with it. When a batch fails, it is applied again
with each write in a savepoint of its own, so only the culprit fails; ``SQLITE_BUSY``
(another process, such as ``hub persona rollback``, holding the write lock) is retried
with backoff. Writes that still fail are counted (`Database.lost_writes` for the
fire-and-forget ones), and `Database.health()` reports the store degraded while
failures occur. Strings are stored as valid UTF-8 (a lone surrogate becomes U+FFFD), so no
input can make a write fail.

The transaction of each batch is in ``_sqlite_commit``; the cleaning of values in ``_values``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import aiosqlite

from ...errors import StoreError
from ._group_commit import LINGER, GroupCommit, table_of
from ._migrations import SCHEMA_VERSION, migrate_sqlite
from ._sqlite_commit import _Busy, _commit_sync, _is_busy, _Write
from ._values import _clean_params

if TYPE_CHECKING:
    from ._postgres import PgDatabase

__all__ = ["Database", "SqlDatabase", "INLINE_MAX", "INLINE_BYTES", "CHECKPOINT_EVERY"]

log = logging.getLogger("hub.store.sql")

T = TypeVar("T")

INLINE_MAX = 64
"""The largest batch committed on the event loop's thread; a larger one goes to aiosqlite's
thread, where SQLite runs without the GIL beside the loop."""

INLINE_BYTES = 1 << 20
"""The most text and bytes a batch committed on the loop's thread may carry (a large memory
value is written in aiosqlite's thread instead)."""

CHECKPOINT_EVERY = 256
"""Commits between two WAL checkpoints (run in aiosqlite's thread, ``PASSIVE``: they never
wait for readers). A commit writes a few pages, so the WAL stays at a few MB, as with
SQLite's own default of 1,000 pages."""


SqlDatabase: TypeAlias = "Database | PgDatabase"
"""What the SQL stores are built on: SQLite here, or PostgreSQL (`hub.store.sql.PgDatabase`,
the same methods), chosen by ``[store] url``."""


class Database(GroupCommit):
    """An aiosqlite connection with a group-committing writer. ``path`` may be ``":memory:"``.

    ``busy_timeout`` is how long SQLite waits for another process's write lock before a
    batch is retried (``busy_retries`` times, with doubling delays); ``degraded_for`` is how
    long a failure keeps `health()` degraded. Opening it brings its schema to
    `hub.store.sql.SCHEMA_VERSION` (every store's tables, see `hub.store.sql`).
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
        self._threaded = 0  # calls in aiosqlite's thread not yet returned: inline work waits
        self._commits = 0  # commits since the last WAL checkpoint
        self.checkpoints = 0
        self.last_checkpoint: tuple[int, int] | None = None  # (frames in the WAL, frames copied)

    async def open(self) -> Database:
        if self._conn is not None:
            return self
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            # check_same_thread off: small work runs on the loop's thread while aiosqlite's
            # is idle (never both at once, see _idle)
            self._conn = await aiosqlite.connect(self.path, isolation_level=None, check_same_thread=False)
            await self._conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            await self._migrate_auto_vacuum()
            await self._conn.execute("PRAGMA journal_mode=WAL")
            await self._conn.execute("PRAGMA synchronous=NORMAL")
            await self._conn.execute("PRAGMA foreign_keys=ON")
            # temporary tables (the search's index of runs under way) stay in memory: no
            # person's words in a temporary file that a forget could not reach
            await self._conn.execute("PRAGMA temp_store=MEMORY")
            await self._conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints: _checkpoint, in the thread
            self.schema_found = await migrate_sqlite(self._conn, where=f"SQLite {self.path}")
            await self._conn.execute("PRAGMA busy_timeout=0")  # inline work never waits (see _patient)
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
                free = await self._in_thread(_freelist)
                if not free:
                    return freed
                # fetched, not just executed: the pragma frees one page per step of the statement
                await self._in_thread(_fetchall, f"PRAGMA incremental_vacuum({min(free, pages)})", ())
                left = await self._in_thread(_freelist)
                if left >= free:
                    return freed  # nothing more can be freed (auto_vacuum is off)
                freed += free - left
                await asyncio.sleep(0)
        except sqlite3.Error as e:
            self._failed(f"incremental vacuum: {e}")
            raise StoreError(f"{self.path}: incremental vacuum failed: {e}", store="sqlite", operation="vacuum") from e

    @contextlib.asynccontextmanager
    async def scrubbing(self) -> AsyncIterator[None]:
        """Deletes within leave nothing behind in the file: SQLite overwrites deleted content
        with zeros (``secure_delete``), and after them the WAL's copies of the old pages are
        checkpointed away and the freed pages given back (``hub memory forget --person``).

        Raises:
            StoreError: the database failed.
        """
        await self.flush()
        try:
            await self._in_thread(_fetchall, "PRAGMA secure_delete = ON", ())
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: secure_delete: {e}", store="sqlite", operation="write") from e
        try:
            yield
            await self.flush()
        finally:
            try:
                await self._in_thread(_fetchall, "PRAGMA secure_delete = OFF", ())
            except sqlite3.Error as e:
                log.warning("%s: secure_delete left on for this connection: %s", self.path, e)
        await self.incremental_vacuum()
        try:
            await self._in_thread(_fetchall, "PRAGMA wal_checkpoint(TRUNCATE)", ())
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: checkpoint: {e}", store="sqlite", operation="write") from e

    # --- where the work runs ------------------------------------------------------------

    @property
    def _raw(self) -> sqlite3.Connection:
        raw = self.conn._connection
        if raw is None:  # aiosqlite is closing it
            raise StoreError(f"database {self.path} is not open", store="sqlite", operation="use")
        return raw

    def _idle(self) -> bool:
        """Nothing of ours is in aiosqlite's thread: the connection may be used inline."""
        return self._threaded == 0

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(raw, *args)`` in aiosqlite's thread, with the configured busy timeout (the
        connection's own is 0 for inline work). Inline work waits while this runs."""
        conn = self.conn
        work = asyncio.ensure_future(conn._execute(_patient, conn._connection, int(self.busy_timeout * 1000), fn, args))
        # counted until the thread is done with it, not until our caller stops waiting: a
        # cancelled caller leaves the work running there, and inline work must wait for it
        self._threaded += 1
        work.add_done_callback(self._thread_done)
        return await asyncio.shield(work)

    def _thread_done(self, work: asyncio.Future[Any]) -> None:
        self._threaded -= 1
        if not work.cancelled():
            work.exception()  # retrieved: a caller that stopped waiting is not told twice

    # --- writing ------------------------------------------------------------------------

    async def ensure_schema(self, name: str, script: str) -> None:
        """Create a store's tables once per connection (statements must be idempotent)."""
        if name in self._schemas:
            return
        await self.flush()
        try:
            await self._in_thread(_executescript, script)
        except sqlite3.Error as e:
            self._failed(f"{name}: create tables: {e}")
            raise StoreError(
                f"cannot create tables for {name} in {self.path}: {e}", store=name, operation="create tables"
            ) from e
        self._schemas.add(name)

    def _prepare(self, item: _Write) -> _Write:
        sql, params, fut = item
        return sql, _clean_params(params), fut

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """All rows, read in aiosqlite's thread (a listing may be long)."""
        try:
            return await self._in_thread(_fetchall, sql, _clean_params(params) or ())
        except sqlite3.Error as e:
            self._failed(f"read: {e}")
            raise StoreError(f"{self.path}: query failed: {e}", store="sqlite", operation="read") from e

    async def fetchall_after(
        self, prepare: Callable[[sqlite3.Connection], None], sql: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        """All rows, read in aiosqlite's thread right after ``prepare(raw)`` (which may fill
        temporary tables), both in one read transaction: nothing commits in between."""
        try:
            return await self._in_thread(_fetchall_after, prepare, sql, _clean_params(params) or ())
        except sqlite3.Error as e:
            self._failed(f"read: {e}")
            raise StoreError(f"{self.path}: query failed: {e}", store="sqlite", operation="read") from e

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row (use it for queries that select at most a few rows: it runs on the
        loop's thread when aiosqlite's is idle)."""
        values = _clean_params(params) or ()
        try:
            if self._idle():
                try:
                    return _fetchone(self._raw, sql, values)
                except sqlite3.Error as e:
                    if not _is_busy(e):
                        raise
            return await self._in_thread(_fetchone, sql, values)
        except sqlite3.Error as e:
            self._failed(f"read: {e}")
            raise StoreError(f"{self.path}: query failed: {e}", store="sqlite", operation="read") from e

    async def _commit(self, batch: list[_Write]) -> list[BaseException | None]:
        """Commit ``batch``; one error (or None) per write. Busy is retried with backoff."""
        writes = [(sql, params) for sql, params, _ in batch]
        self._commits += 1
        # inline only what someone waits for (the loop would wait for it anyway): a batch of
        # write_soon() alone (event logs) is committed beside the loop, which meanwhile
        # handles what arrives (a reply's closing tag waits for no event log)
        waited = any(fut is not None for _, _, fut in batch)
        if waited and len(writes) <= INLINE_MAX and self._idle() and _size(writes) <= INLINE_BYTES:
            try:
                return _commit_sync(self._raw, writes)
            except _Busy:
                pass  # another process holds the write lock: wait for it in the thread, below
        delay = self.retry_delay
        for attempt in range(self.busy_retries + 1):
            try:
                return await self._in_thread(_commit_sync, writes)
            except _Busy as e:
                self.busy_waits += 1
                if attempt == self.busy_retries:
                    raise StoreError(
                        f"SQLite {self.path}: the write lock stayed held by another connection "
                        f"({self.busy_retries + 1} tries): {e.original}",
                        store="sqlite",
                        operation="write",
                    ) from e.original
                log.warning("%s: database is locked by another connection; retrying in %.2fs", self.path, delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def write_apart(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """A large write, committed alone in aiosqlite's thread (never inline on the loop's:
        retention's deletes held the loop 150-290 ms a batch in bench/soak.py). It queues
        with the writer's own work in that thread, so the connection is never shared.

        Raises:
            StoreError: the write failed (naming the table).
        """
        await self.flush()  # what was queued before it is committed first, as with write()
        sql, params, _ = self._prepare((sql, params, None))
        try:
            (error,) = await self._in_thread(_commit_sync, [(sql, params)])
        except _Busy as e:
            error = e.original
        if error is not None:
            self._failed(f"write: {error}")
            raise StoreError(
                f"SQLite table {table_of(sql)!r} in {self.path}: write failed: {error}",
                store=table_of(sql),
                operation="write",
            ) from error

    async def _after_batch(self) -> None:
        if self._commits >= CHECKPOINT_EVERY:
            await self.checkpoint()

    async def checkpoint(self) -> None:
        """Copy the WAL's pages into the database file (``PASSIVE``: what readers still need
        stays), in aiosqlite's thread. A failure is counted; the next one tries again."""
        self._commits = 0
        try:
            rows = await self._in_thread(_fetchall, "PRAGMA wal_checkpoint(PASSIVE)", ())
            self.checkpoints += 1
            _, frames, copied = rows[0]
            self.last_checkpoint = (int(frames), int(copied))
        except sqlite3.Error as e:
            self._failed(f"checkpoint: {e}")
            log.warning("%s: WAL checkpoint failed: %s", self.path, e)

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


# --- what runs on the raw connection (inline, or in aiosqlite's thread through _patient) -----


def _patient(raw: sqlite3.Connection, timeout_ms: int, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    """``fn(raw, *args)`` waiting up to ``timeout_ms`` for another process's lock."""
    raw.execute(f"PRAGMA busy_timeout={timeout_ms}")
    try:
        return fn(raw, *args)
    finally:
        raw.execute("PRAGMA busy_timeout=0")


def _size(writes: Sequence[tuple[str, Sequence[Any] | None]]) -> int:
    """The characters and bytes a batch's parameters carry."""
    n = 0
    for _, params in writes:
        for p in params or ():
            if isinstance(p, (str, bytes)):
                n += len(p)
    return n


def _fetchall(raw: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    return raw.execute(sql, params).fetchall()


def _fetchall_after(
    raw: sqlite3.Connection, prepare: Callable[[sqlite3.Connection], None], sql: str, params: Sequence[Any]
) -> list[tuple[Any, ...]]:
    raw.execute("BEGIN")
    try:
        prepare(raw)
        rows = raw.execute(sql, params).fetchall()
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    raw.execute("COMMIT")  # only temporary tables were written
    return rows


def _fetchone(raw: sqlite3.Connection, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    row = raw.execute(sql, params).fetchone()
    return None if row is None else tuple(row)


def _executescript(raw: sqlite3.Connection, script: str) -> None:
    raw.executescript(script)


def _freelist(raw: sqlite3.Connection) -> int:
    row = raw.execute("PRAGMA freelist_count").fetchone()
    return int(row[0]) if row else 0
