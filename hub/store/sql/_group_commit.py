"""The group-committing write queue both SQL databases share: `hub.store.sql.Database`
(SQLite) and `hub.store.sql.PgDatabase` (PostgreSQL).

Writes go through one queue; a writer task drains it and commits what it found as one
batch (the backend's `GroupCommit._commit()`), so many conversations writing at once
cost a handful of commits. `GroupCommit.write()` returns once its write is committed;
`GroupCommit.write_soon()` at once (a batch of those alone may wait ``linger`` seconds
for more). The backend reports one error (or None) per write; each is settled alone: a
waiter gets a [`StoreError`][hub.StoreError] naming the table, a fire-and-forget write is counted as
lost, and `GroupCommit.health()` says the store is degraded while failures occur.

The writer is watched: if it ever dies (a bug, an error from upkeep between batches), the
writes of the batch it held fail with a [`StoreError`][hub.StoreError] saying so, health reports it, and
a new writer takes the queue at once, so a ``write`` never waits on a dead task and a
``flush`` never returns with nothing committed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ...errors import StoreError
from ._sqlite_commit import _BARRIER, _Write

__all__ = ["GroupCommit", "LINGER", "LINGER_MAX", "table_of"]

LINGER = 0.005
"""Seconds a batch of ``write_soon`` writes alone waits for more before it is committed (a
waited-on write ends the wait at once)."""

LINGER_MAX = 512
"""Queued writes that end the wait early: a batch never grows without bound."""

_TABLE = re.compile(r"^\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)


def table_of(sql: str) -> str:
    """The table a write statement changes ("?" when it cannot tell)."""
    m = _TABLE.match(sql)
    return m.group(1) if m else "?"


class GroupCommit(ABC):
    """The write queue, its writer and the store's health; a backend gives `_commit()`
    (and may adapt each write as it is queued, `_prepare()`)."""

    label: ClassVar[str]
    """The backend as messages name it: ``"SQLite"``, ``"PostgreSQL"``."""

    path: str
    degraded_for: float

    def _init_queue(self, *, linger: float) -> None:
        self.linger = linger
        self._queue: asyncio.Queue[_Write] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._urgent: asyncio.Event | None = None  # set when a queued write has a waiter
        self._closing = False
        self.lost_writes = 0  # fire-and-forget writes that failed (nobody waited to be told)
        self.failed_writes = 0  # awaited writes that failed (their caller got the error)
        self.errors = 0  # failed operations of any kind
        self.batches = 0  # transactions the writer committed (or tried to)
        self.last_error: str | None = None
        self._last_failure: float | None = None
        self._failing = False  # the last operation failed: degraded until one succeeds
        self.writer_restarts = 0  # writers that died and were replaced
        self._batch: list[_Write] = []  # the batch the writer holds (failed if it dies)
        self._writer_name = "writer"

    def _start_writer(self, name: str) -> None:
        self._queue = asyncio.Queue()
        self._urgent = asyncio.Event()
        self._writer_name = name
        self._spawn_writer()

    def _spawn_writer(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name=self._writer_name)
        self._writer.add_done_callback(self._writer_ended)

    def _writer_ended(self, task: asyncio.Task[None]) -> None:
        """The writer ended: at close, as it should; otherwise it died. The writes of the
        batch it held fail, health says so, and a new writer takes the queue."""
        if self._closing or task is not self._writer:
            return
        cancelled = task.cancelled()  # not by close(): the event loop is going away
        error: BaseException = RuntimeError("the writer was cancelled") if cancelled else task.exception()  # type: ignore[assignment]
        if error is None:
            error = RuntimeError("the writer ended")
        what = "stopped" if cancelled else "restarted"
        message = f"the write queue's writer died ({type(error).__name__}: {error}); {what}"
        logging.getLogger(type(self).__module__).error("%s: %s", self.path, message, exc_info=error)
        self._failed(f"write: {message}")
        failed, self._batch = self._batch, []
        if cancelled:  # nobody writes any more: every queued write is told
            self._closing = True
            while self._queue is not None and not self._queue.empty():
                failed.append(self._queue.get_nowait())
        for sql, _, fut in failed:
            if fut is None:
                self.lost_writes += 1
            elif not fut.done():
                self.failed_writes += 1
                table = table_of(sql)
                told = StoreError(
                    f"{self.label} table {table!r} in {self.path}: the write queue's writer died "
                    f"({type(error).__name__}: {error}) before this write was confirmed: it may not be committed",
                    store=table,
                    operation="write",
                )
                told.__cause__ = error
                fut.set_exception(told)
        if not cancelled:
            self.writer_restarts += 1
            self._spawn_writer()

    async def _stop_writer(self) -> None:
        """Commit what is queued (a failure is logged: nobody waits any more), refuse new
        writes, and end the writer."""
        try:
            await self.flush()
        except StoreError as e:
            logging.getLogger(type(self).__module__).error("%s: last writes failed at close: %s", self.path, e)
        self._closing = True
        if self._writer is not None:
            self._writer.cancel()
            try:
                await self._writer
            except asyncio.CancelledError:
                pass
            except Exception as e:  # it died as it was told to stop: nothing more to commit
                logging.getLogger(type(self).__module__).error("%s: the writer failed at close: %s", self.path, e)
        self._writer = None

    # --- health -------------------------------------------------------------------------

    def _failed(self, error: str) -> None:
        self.errors += 1
        self.last_error = error
        self._last_failure = time.monotonic()
        self._failing = True

    def health(self) -> str | None:
        """None while the store works; else why it is degraded (failures in the last
        ``degraded_for`` seconds, or the last operation failed)."""
        if self._last_failure is None:
            return None
        ago = time.monotonic() - self._last_failure
        if not self._failing and ago > self.degraded_for:
            return None
        lost = f"; {self.lost_writes} writes lost" if self.lost_writes else ""
        return f"{self.label} {self.path}: {self.errors} failed operations, the last {ago:.0f}s ago ({self.last_error}){lost}"

    # --- writing ------------------------------------------------------------------------

    async def write(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Queue a write and wait until it is committed.

        Raises:
            StoreError: this write failed (naming the table); other writes of its batch are kept.
        """
        await self.submit(sql, params)

    def submit(self, sql: str, params: Sequence[Any] | None = None) -> asyncio.Future[None]:
        """Queue a write now and return its commit, to await later: it shares the commit of
        what is queued after it before that is awaited (a [`StoreError`][hub.StoreError] naming the
        table if it failed)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._put((sql, params, fut))
        return fut

    async def write_apart(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """A large write (retention's deletes of hundreds of rows), committed beside the
        event loop, never on its thread: the loop goes on while it runs. This default is
        `write()` (PostgreSQL's writes never run on the loop's thread).

        Raises:
            StoreError: the write failed (naming the table).
        """
        await self.write(sql, params)

    def write_soon(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Queue a write; it is committed with the next batch, within milliseconds."""
        self._put((sql, params, None))

    def _prepare(self, item: _Write) -> _Write:
        """A write as the backend will commit it (its SQL and parameters adapted)."""
        return item

    def _put(self, item: _Write) -> None:
        if self._queue is None or self._closing:
            raise StoreError(f"database {self.path} is closed", store=table_of(item[0]), operation="write")
        self._queue.put_nowait(self._prepare(item))
        if self._urgent is not None and (item[2] is not None or self._queue.qsize() >= LINGER_MAX):
            self._urgent.set()

    async def flush(self) -> None:
        """Wait until everything queued so far is committed.

        Raises:
            StoreError: the database is closed, or what was queued could not be committed.
        """
        if self._queue is None or self._closing:
            return  # closed: what was queued was committed (or reported) at close
        await self.write(_BARRIER)

    @abstractmethod
    async def _commit(self, batch: list[_Write]) -> list[BaseException | None]:
        """Commit ``batch``: one error (or None) per write; raising fails the whole batch."""

    async def _write_loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            first = await queue.get()
            batch = self._batch = [first]
            while not queue.empty():
                batch.append(queue.get_nowait())
            if self.linger > 0 and all(fut is None for _, _, fut in batch):
                # Nobody waits on these (event logs, progress): let the writes of the next
                # few milliseconds join their transaction. A turn queues its events a few
                # at a time between network reads, and each commit costs a round trip; a
                # write() or flush() ends the wait at once.
                await self._linger()
                while not queue.empty():
                    batch.append(queue.get_nowait())
            self.batches += 1
            try:
                errors = await self._commit(batch)
            except Exception as e:  # the whole batch failed (an outage: disk full, the server gone)
                errors = [e] * len(batch)
            self._settle(batch, errors)
            self._batch = []
            try:
                await self._after_batch()
            except Exception as e:  # upkeep failed; the writes are committed: go on writing
                self._failed(f"after a batch: {type(e).__name__}: {e}")
                logging.getLogger(type(self).__module__).error("%s: upkeep after a batch failed: %s", self.path, e)

    async def _after_batch(self) -> None:  # noqa: B027 (a hook: most backends need no upkeep)
        """Upkeep between batches (SQLite checkpoints its WAL here)."""

    async def _linger(self) -> None:
        urgent = self._urgent
        assert urgent is not None
        urgent.clear()
        timer = asyncio.get_running_loop().call_later(self.linger, urgent.set)
        try:
            await urgent.wait()
        finally:
            timer.cancel()

    def _settle(self, batch: list[_Write], errors: Sequence[BaseException | None]) -> None:
        lost: dict[str, int] = {}
        first_error: BaseException | None = None
        for (sql, _, fut), err in zip(batch, errors, strict=True):
            if err is None:
                if fut is not None and not fut.done():
                    fut.set_result(None)
                continue
            first_error = first_error or err
            table = table_of(sql)
            if fut is None:
                self.lost_writes += 1
                lost[table] = lost.get(table, 0) + 1
            else:
                self.failed_writes += 1
                if not fut.done():
                    fut.set_exception(self._error(table, err))
        if first_error is None:
            if any(sql != _BARRIER for sql, _, _ in batch):
                self._failing = False
            return
        self._failed(f"write: {first_error}")
        if lost:
            where = ", ".join(f"{n} to {t}" for t, n in sorted(lost.items()))
            logging.getLogger(type(self).__module__).error(
                "%s: %d queued writes lost (%s): %s", self.path, sum(lost.values()), where, first_error
            )

    def _error(self, table: str, err: BaseException) -> StoreError:
        """What the waiter of a failed write gets: a StoreError naming the table."""
        if isinstance(err, StoreError):
            return err
        e = StoreError(
            f"{self.label} table {table!r} in {self.path}: write failed: {self._describe(err)}",
            store=table,
            operation="write",
        )
        e.__cause__ = err
        return e

    @staticmethod
    def _describe(err: BaseException) -> str:
        return str(err)
