"""PostgreSQL behind every store (``[store] url``): an asyncpg pool with the same face as
`hub.store.sql.Database`, so the stores' SQL runs on either backend.

`PgDatabase` speaks the stores' SQL: ``?`` placeholders (and SQLite's ``?N``) become
``$N`` once per statement text. Writes are group-committed as on SQLite: a writer task
drains a queue and commits what it found in one transaction; when a statement fails the
batch is applied again with each write in a savepoint, so only the culprit fails. A lost
connection fails the batch (the callers that wait get a [`StoreError`][hub.StoreError],
the fire-and-forget writes are counted lost), and `PgDatabase.health()` reports it.
Strings lose what PostgreSQL refuses (NUL becomes U+FFFD), so no input makes a write fail.

Several workers share one database; what keeps them from stepping on each other is here
too: `PgDatabase.lock()` (a session advisory lock on a connection of its own, which
PostgreSQL releases by itself when the holder's connection dies) and the schema migration
under an advisory lock at open (`hub.store.sql`).

asyncpg is imported when a database is opened: it is the ``postgres`` extra.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ...errors import StoreError
from ._group_commit import GroupCommit
from ._migrations import SCHEMA_VERSION, migrate_postgres
from ._postgres_sql import (
    _can_resend,
    _is_outage,
    _pg_params,
    _pg_sql,
    _reset,
    _Unsent,
    is_postgres_url,
    lock_key,
    mask_url,
)
from ._sqlite_commit import _BARRIER, _group, _Write

__all__ = ["PgDatabase", "PgListening", "inspect"]

log = logging.getLogger("hub.store.sql")


_TRY_LOCK = "SELECT CASE WHEN pg_try_advisory_lock($1) THEN pg_advisory_unlock($1) ELSE false END"
"""Take and release in one statement (CASE evaluates in order): no round trip between them."""


class PgDatabase(GroupCommit):
    """An asyncpg pool with a group-committing writer; the PostgreSQL twin of
    `hub.store.sql.Database`. ``url`` is a ``postgresql://`` URL (its query may set server
    settings, e.g. ``?search_path=hub``); ``pool_size`` bounds the connections of reads and
    writes, ``lock_connections`` those held by `lock()` (one per conversation running).
    """

    dialect = "postgres"
    label = "PostgreSQL"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        lock_connections: int = 64,
        connect_timeout: float = 10.0,
        command_timeout: float = 60.0,
        degraded_for: float = 60.0,
        reconnect_retries: int = 3,
        retry_delay: float = 0.05,
    ) -> None:
        if not is_postgres_url(url):
            raise StoreError(f"[store] url must start with postgresql://, got {mask_url(url)!r}", store="postgres")
        self.url = url
        self.path = mask_url(url)  # what messages name (as Database.path does)
        self.pool_size = pool_size
        self.lock_connections = lock_connections
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.degraded_for = degraded_for
        self.reconnect_retries = reconnect_retries
        self.retry_delay = retry_delay
        self.reconnects = 0  # batches retried on another connection (nothing of them had landed)
        self._pool: Any = None
        self._lock_pool: Any = None
        self._lock_conns: set[Any] = set()
        # no linger: a PostgreSQL commit of event logs does not wait for the server's flush
        self._init_queue(linger=0.0)
        self._unflushed = False  # a batch was committed without waiting for the server's disk
        self.namespace = ""  # the schema the stores' tables live in (current_schema())
        self.server_version = ""
        self.schema_found: int | None = None
        self.busy_waits = 0  # never counted here (PostgreSQL has row locks); kept for /metrics

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    async def open(self) -> PgDatabase:
        if self._pool is not None:
            return self
        try:
            import asyncpg
        except ImportError as e:
            raise StoreError(
                "[store] url is a PostgreSQL URL but asyncpg is not installed: pip install 'hub[postgres]'",
                store="postgres",
                operation="open",
            ) from e
        try:
            self._pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                timeout=self.connect_timeout,
                command_timeout=self.command_timeout,
                reset=_reset,
            )
            async with self._pool.acquire() as conn:
                self.schema_found = await migrate_postgres(conn, where=f"PostgreSQL {self.path}")
                self.namespace = str(await conn.fetchval("SELECT current_schema()"))
                self.server_version = str(await conn.fetchval("SHOW server_version"))
        except StoreError:
            await self._close_pool()
            raise
        except (TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as e:
            await self._close_pool()
            self._failed(f"open: {e}")
            raise StoreError(
                f"cannot open PostgreSQL database {self.path}: {type(e).__name__}: {e}",
                store="postgres",
                operation="open",
            ) from e
        try:
            self._lock_pool = await asyncpg.create_pool(
                self.url,
                min_size=0,
                max_size=self.lock_connections,
                timeout=self.connect_timeout,
                command_timeout=None,  # a lock is waited for as long as its holder runs
            )
        except Exception as e:
            await self._close_pool()
            raise StoreError(
                f"cannot open PostgreSQL database {self.path} (lock connections): {e}",
                store="postgres",
                operation="open",
            ) from e
        self._closing = False
        self._start_writer(f"postgres-writer:{self.path}")
        return self

    async def _close_pool(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), timeout=5)
            except (TimeoutError, Exception):  # a dead server: drop the connections
                pool.terminate()

    @property
    def pool(self) -> Any:
        if self._pool is None:
            raise StoreError(f"database {self.path} is not open", store="postgres", operation="use")
        return self._pool

    # --- health -------------------------------------------------------------------------

    async def ping(self) -> str:
        """One round trip; what ``hub check`` and ``/healthz`` say about the database.

        Raises:
            StoreError: the server did not answer.
        """
        try:
            async with self.pool.acquire(timeout=self.connect_timeout) as conn:
                await conn.fetchval("SELECT 1")
        except Exception as e:  # not counted as a failed operation: /healthz reports it as it is
            raise StoreError(
                f"PostgreSQL {self.path}: no answer: {type(e).__name__}: {e}", store="postgres", operation="ping"
            ) from e
        return f"PostgreSQL {self.server_version} at {self.path}, schema {self.namespace!r} version {SCHEMA_VERSION}"

    # --- the stores' interface (as hub.db.Database) ---------------------------------------

    async def ensure_schema(self, name: str, script: str) -> None:
        """The tables are made by the migrations at open; kept so stores open alike on both backends."""
        self.pool  # noqa: B018 - raises when not open

    def _prepare(self, item: _Write) -> _Write:
        sql, params, fut = item
        return (_pg_sql(sql) if sql != _BARRIER else sql), _pg_params(params), fut

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query (or of a write with RETURNING). A connection found dead is
        replaced and the query tried again on another (``reconnect_retries`` times)."""
        query, args = _pg_sql(sql), _pg_params(params)
        delay = self.retry_delay
        for attempt in range(self.reconnect_retries + 1):
            try:
                rows = await self.pool.fetch(query, *args)
                return [tuple(r) for r in rows]
            except StoreError:
                raise
            except Exception as e:
                if attempt < self.reconnect_retries and _can_resend(query, e):
                    self.reconnects += 1
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                self._failed(f"read: {e}")
                raise StoreError(
                    f"{self.path}: query failed: {type(e).__name__}: {e}", store="postgres", operation="read"
                ) from e
        raise AssertionError("unreachable")

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    @asynccontextmanager
    async def scrubbing(self) -> AsyncIterator[None]:
        """As SQLite's (hub/store/sql/_sqlite.py), as far as PostgreSQL lets a client go: the
        deleted rows leave every table and index at once (the full-text vectors are columns
        of theirs); their dead tuples stay in the files until the server's autovacuum (or a
        ``VACUUM``) reuses the space."""
        yield
        await self.flush()

    async def incremental_vacuum(self, *, pages: int = 2000) -> int:
        """Nothing to do: PostgreSQL's autovacuum gives deleted rows' space back."""
        await self.flush()
        return 0

    async def _commit(self, batch: list[_Write]) -> list[BaseException | None]:
        """Commit ``batch``; one error (or None) per write. A connection found dead before
        the COMMIT was sent (the server restarted, a proxy cut it) is retried on another:
        nothing of the batch landed. A failure during the COMMIT itself is not retried (it
        may have landed): the batch fails, visibly."""
        writes = [(sql, params) for sql, params, _ in batch]
        barriers_only = all(sql == _BARRIER for sql, _ in writes)
        if barriers_only and not self._unflushed:
            return [None] * len(writes)
        # nobody waits on a batch of write_soon() alone (event logs, progress): committed
        # without waiting for the server's disk flush, as SQLite's synchronous=NORMAL does;
        # a batch with a write() or a flush() a caller awaits is durable when that caller goes
        # on. A flush alone, after such batches, commits a transaction of its own durably:
        # the server's WAL is then on disk up to it, earlier commits included (the runs'
        # no-double-answer rule relies on a flushed take surviving a server crash)
        durable = any(fut is not None for _, _, fut in batch)
        delay = self.retry_delay
        for attempt in range(self.reconnect_retries + 1):
            try:
                if barriers_only:
                    await self._flush_wal()
                    errors: list[BaseException | None] = [None] * len(writes)
                else:
                    errors = await self._commit_once(writes, durable=durable)
                self._unflushed = not durable
                return errors
            except _Unsent as e:
                if attempt == self.reconnect_retries:
                    raise e.original from None
                self.reconnects += 1
                log.warning("%s: connection lost before commit (%s); retrying in %.2fs", self.path, e.original, delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def _commit_once(
        self, writes: list[tuple[str, Sequence[Any] | None]], *, durable: bool
    ) -> list[BaseException | None]:
        try:
            holder = self.pool.acquire()
            conn = await holder.__aenter__()
        except StoreError:
            raise
        except Exception as e:
            if _is_outage(e):
                raise _Unsent(e) from e
            raise
        try:
            tr = conn.transaction()
            try:
                await tr.start()
                if not durable:
                    await conn.execute("SET LOCAL synchronous_commit TO OFF")
                for sql, group in _group(writes):
                    if len(group) == 1:
                        await conn.execute(sql, *(group[0] or ()))
                    else:
                        await conn.executemany(sql, [p or () for p in group])
            except Exception as e:
                try:
                    await tr.rollback()
                except Exception:  # the connection is gone: the server rolled it back
                    pass
                if _is_outage(e):
                    raise _Unsent(e) from e
                return await self._commit_each(conn, writes)  # a bad statement or value: find it
            await tr.commit()
            return [None] * len(writes)
        finally:
            try:
                await holder.__aexit__(None, None, None)
            except Exception as e:  # a dead connection given back: the pool replaces it; the batch's fate is known
                log.debug("%s: releasing a connection failed: %s", self.path, e)

    async def _flush_wal(self) -> None:
        """Commit, durably, a transaction that has an id (and so a commit record): the
        server's WAL is flushed up to it, and with it every commit made before without
        waiting for the disk."""
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                await conn.fetchval("SELECT txid_current()")
        except StoreError:
            raise
        except Exception as e:
            if _is_outage(e):
                raise _Unsent(e) from e  # nothing of it matters but the flush: tried again
            raise

    async def _commit_each(
        self, conn: Any, writes: list[tuple[str, Sequence[Any] | None]]
    ) -> list[BaseException | None]:
        errors: list[BaseException | None] = [None] * len(writes)
        tr = conn.transaction()
        try:
            await tr.start()
            for i, (sql, params) in enumerate(writes):
                if sql == _BARRIER:
                    continue
                try:
                    async with conn.transaction():  # a savepoint
                        await conn.execute(sql, *(params or ()))
                except Exception as e:
                    if _is_outage(e):
                        raise
                    errors[i] = e
        except Exception as e:
            try:
                await tr.rollback()
            except Exception:  # the connection is gone: the server rolled it back
                pass
            if _is_outage(e):
                raise _Unsent(e) from e
            raise
        await tr.commit()
        return errors

    @staticmethod
    def _describe(err: BaseException) -> str:
        return f"{type(err).__name__}: {err}"

    # --- coordination between workers -----------------------------------------------------

    @asynccontextmanager
    async def lock(self, name: str) -> AsyncIterator[None]:
        """Hold the advisory lock ``name`` (in this database's schema) until the block ends.

        The lock lives on a connection of its own (from a pool of ``lock_connections``,
        apart from the reads' and writes'): if this process dies or its connection is cut,
        PostgreSQL releases the lock by itself, and another worker waiting for it goes on.
        Waiting is in the server (``pg_advisory_lock``). A connection whose lock is in any
        doubt (the wait was cancelled, the unlock failed) is closed rather than reused, which
        releases whatever it held.

        Raises:
            StoreError: the lock could not be taken (the server is unreachable).
        """
        key = lock_key(self.namespace, name)
        if self._lock_pool is None:
            raise StoreError(f"database {self.path} is not open", store="postgres", operation="lock")
        pool = self._lock_pool
        try:
            conn = await pool.acquire()
        except Exception as e:
            self._failed(f"lock {name}: {e}")
            raise StoreError(
                f"PostgreSQL {self.path}: cannot take the lock for {name}: {e}", store="postgres", operation="lock"
            ) from e
        self._lock_conns.add(conn)
        locked = unlocked = False
        try:
            try:
                await conn.execute("SELECT pg_advisory_lock($1)", key)
                locked = True
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._failed(f"lock {name}: {e}")
                raise StoreError(
                    f"PostgreSQL {self.path}: cannot take the lock for {name}: {e}", store="postgres", operation="lock"
                ) from e
            yield
        finally:
            self._lock_conns.discard(conn)
            if locked:
                try:
                    unlocked = bool(await conn.fetchval("SELECT pg_advisory_unlock($1)", key))
                except BaseException:  # noqa: B036 - cancelled or cut: the connection goes below
                    unlocked = False
            if not unlocked:
                try:
                    conn.terminate()  # the session ends, and every lock it held with it
                except Exception as e:  # the server cut it already, and the pool took it back: no lock is left
                    log.debug("%s: closing a lock connection: %s", self.path, e)
            try:
                await pool.release(conn)
            except Exception as e:  # a terminated connection: the pool replaces it
                log.debug("%s: giving back a lock connection failed: %s", self.path, e)

    async def try_lock(self, name: str) -> bool:
        """Whether nobody holds the lock ``name`` now (taken and released at once, in one
        statement). A session lock outlives a failed statement and would go back to the pool
        with its connection, wedging that conversation on every worker: a connection whose
        check was cut short (cancelled, failed) is closed, which releases whatever it held."""
        key = lock_key(self.namespace, name)
        async with self.pool.acquire() as conn:
            try:
                got = await conn.fetchval(_TRY_LOCK, key)
            except BaseException:
                conn.terminate()
                raise
        return bool(got)

    async def lock_backends(self) -> list[int]:
        """The server process ids of the connections holding `lock()` locks now (tests
        cut them with ``pg_terminate_backend`` to show a dead worker's lock goes)."""
        return [c.get_server_pid() for c in list(self._lock_conns)]

    # --- notifications between processes ---------------------------------------------------

    async def notify(self, channel: str, payload: str) -> None:
        """``pg_notify(channel, payload)``: every connection listening on ``channel`` (any
        process, any schema of this database) is told, once this statement commits."""
        try:
            await self.pool.execute("SELECT pg_notify($1, $2)", channel, payload)
        except Exception as e:
            raise StoreError(
                f"{self.path}: notify {channel}: {type(e).__name__}: {e}", store="postgres", operation="notify"
            ) from e

    async def listen(
        self, channel: str, told: Callable[[str], None], *, lost: Callable[[], None] | None = None
    ) -> PgListening:
        """Call ``told`` with each payload notified on ``channel``, on a connection of its own
        (LISTEN holds it) until `PgListening.close`; once it is cut, ``alive`` is false
        and ``lost`` is called (to listen again).

        Raises:
            StoreError: the connection or the LISTEN failed.
        """
        import asyncpg

        try:
            conn = await asyncpg.connect(self.url, timeout=self.connect_timeout)
            await conn.add_listener(channel, lambda _conn, _pid, _channel, payload: told(str(payload)))
            if lost is not None:
                conn.add_termination_listener(lambda _conn: lost())
        except Exception as e:
            raise StoreError(
                f"{self.path}: listen {channel}: {type(e).__name__}: {e}", store="postgres", operation="listen"
            ) from e
        return PgListening(conn)

    # --- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        if self._pool is None:
            return
        await self._stop_writer()
        for conn in list(self._lock_conns):
            conn.terminate()
        self._lock_conns.clear()
        if self._lock_pool is not None:
            lock_pool, self._lock_pool = self._lock_pool, None
            lock_pool.terminate()  # nothing to flush there; a held lock goes with its session
        await self._close_pool()

    async def __aenter__(self) -> PgDatabase:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class PgListening:
    """A LISTEN on a connection of its own (`PgDatabase.listen`)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @property
    def alive(self) -> bool:
        return not self.conn.is_closed()

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.conn.close(), timeout=5)
        except Exception:  # a dead server: drop it
            self.conn.terminate()


async def inspect(url: str, *, timeout: float = 10.0) -> str:
    """What is at ``url``, in one line, without changing anything (``hub check``): the server's
    version, the schema, its version and how many runs and waiting inputs it holds.

    Raises:
        StoreError: it cannot be reached, or asyncpg is missing (the message says which).
    """
    try:
        import asyncpg
    except ImportError as e:
        raise StoreError("asyncpg is not installed: pip install 'hub[postgres]'", store="postgres") from e
    where = mask_url(url)
    try:
        conn = await asyncpg.connect(url, timeout=timeout)
    except Exception as e:
        raise StoreError(
            f"cannot connect to PostgreSQL {where}: {type(e).__name__}: {e}", store="postgres", operation="connect"
        ) from e
    try:
        version = await conn.fetchval("SHOW server_version")
        schema = await conn.fetchval("SELECT current_schema()")
        have = {
            r[0]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        }
        if "schema_version" not in have:
            found = "no hub tables yet (the first worker creates them)"
        else:
            v = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            runs = await conn.fetchval("SELECT COUNT(*) FROM runs") if "runs" in have else 0
            waiting = (
                await conn.fetchval("SELECT COUNT(*) FROM inbox WHERE state IN ('received', 'taken')")
                if "inbox" in have
                else 0
            )
            state = (
                "current"
                if v == SCHEMA_VERSION
                else (
                    f"older than this hub's {SCHEMA_VERSION}: upgraded when a worker starts"
                    if v < SCHEMA_VERSION
                    else f"NEWER than this hub's {SCHEMA_VERSION}: upgrade the hub"
                )
            )
            found = f"schema version {v} ({state}), {runs} runs, {waiting} inputs waiting"
    except Exception as e:
        raise StoreError(
            f"PostgreSQL {where}: cannot read the hub's tables: {e}", store="postgres", operation="inspect"
        ) from e
    finally:
        await conn.close()
    return f"PostgreSQL {version} at {where}, schema {schema!r}: {found}"
