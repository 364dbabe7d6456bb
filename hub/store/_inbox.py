"""The inbox: every input is recorded before it is acknowledged, and marked done when handled.

This is what makes "no message lost, none answered twice" hold across a SIGKILL: a platform
extension records a message (with its platform id) before it confirms it to the platform;
a redelivered platform id is refused; at boot, inputs of runs that died before answering
are taken again.

A poison input (one whose run fails, or kills the process, every time) must not wedge its
conversation: each failed run is counted once per input (:meth:`InboxStore.failed`), and at
``[hub] dead_letter_after`` failures the input is *parked* with its last error. Parked
inputs are not resumed; ``hub inbox`` lists them, ``hub inbox retry ID`` puts one back and
``hub inbox drop ID`` gives it up.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import StoreError
from ..logs import InputLog, from_dict, to_dict
from .sql import SqlDatabase, dumps

if TYPE_CHECKING:
    from ._run_records import RunStore

__all__ = ["InboxStore", "InMemoryInbox", "SQLiteInbox", "PostgresInbox", "Pending", "Parked", "park_poison"]

log = logging.getLogger("hub.store")


@dataclass(slots=True)
class Pending:
    """An input recorded but not yet handled, and the run that took it (if any)."""

    context: str
    entry: InputLog
    run_id: str | None


@dataclass(slots=True)
class Parked:
    """An input given up on after ``failures`` failed runs, with the last one's error."""

    context: str
    entry: InputLog
    failures: int
    error: str
    run_id: str | None


class InboxStore(ABC):
    @abstractmethod
    async def record(self, context: str, entry: InputLog) -> bool:
        """Record an input durably. False if its ``platform_id`` was recorded before (a redelivery)."""

    @abstractmethod
    def take(self, ids: list[str], run_id: str) -> None:
        """Mark inputs as taken by a run (not yet done)."""

    @abstractmethod
    async def done(self, ids: list[str]) -> None:
        """Mark inputs handled; durable when it returns."""

    @abstractmethod
    async def pending(self) -> list[Pending]:
        """Inputs recorded but neither done nor parked, oldest first."""

    @abstractmethod
    async def seen(self, platform_id: str) -> bool: ...

    async def claim(self) -> list[Pending]:
        """The pending inputs this worker takes on (at start, and from dead workers later),
        oldest first. With one process that is every pending input; where several workers
        share the inbox (:class:`PostgresInbox`) only those no live worker holds."""
        return await self.pending()

    async def renew(self) -> int:
        """Extend this worker's leases on the inputs it holds; how many (0 without leases)."""
        return 0

    async def hold(self, ids: list[str]) -> list[str]:
        """Of ``ids`` (inputs this worker queued), those it still holds and may answer now;
        called under the conversation's lock, just before a run takes them. With one process
        that is all of them; where workers share the inbox (:class:`PostgresInbox`) an input
        whose lease lapsed and that another worker claimed, or that a run already answered,
        is left out: it is that worker's to answer, or answered."""
        return list(ids)

    async def oldest_elsewhere(self, context: str, ids: list[str]) -> float | None:
        """When the oldest of ``context``'s unanswered inputs other than ``ids`` (those queued
        for the run about to start) was received; None when there is none (always, with one
        process). Called under the conversation's lock, so such an input is queued on another
        worker, a dead worker's, or being claimed here: the run answers only inputs older
        than it, so that a conversation's replies keep the order of its messages."""
        return None

    @abstractmethod
    async def failed(self, ids: list[str], run_id: str, error: str, *, park_after: int) -> list[str]:
        """Count a failed run ``run_id`` against each input (once per run, however often
        this is called for it), parking those with ``park_after`` failures; returns the ids
        parked now. Durable when it returns."""

    @abstractmethod
    async def parked(self) -> list[Parked]:
        """Parked inputs, oldest first."""

    @abstractmethod
    async def retry(self, input_id: str) -> bool:
        """A parked input is pending again, its failures forgotten. False if none is parked with that id."""

    @abstractmethod
    async def drop(self, input_id: str) -> bool:
        """A parked input is given up (marked done). False if none is parked with that id."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


@dataclass(slots=True)
class _Item:
    context: str
    entry: InputLog
    run_id: str | None = None
    failures: int = 0
    failed_run: str | None = None
    error: str | None = None
    parked: bool = False


class InMemoryInbox(InboxStore):
    def __init__(self) -> None:
        self._items: dict[str, _Item] = {}
        self._platform_ids: set[str] = set()

    async def record(self, context: str, entry: InputLog) -> bool:
        if entry.platform_id is not None:
            if entry.platform_id in self._platform_ids:
                return False
            self._platform_ids.add(entry.platform_id)
        self._items[entry.id] = _Item(context, entry)
        return True

    def take(self, ids: list[str], run_id: str) -> None:
        for i in ids:
            if i in self._items:
                self._items[i].run_id = run_id

    async def done(self, ids: list[str]) -> None:
        for i in ids:
            self._items.pop(i, None)

    async def pending(self) -> list[Pending]:
        return [Pending(it.context, it.entry, it.run_id) for it in self._items.values() if not it.parked]

    async def seen(self, platform_id: str) -> bool:
        return platform_id in self._platform_ids

    async def failed(self, ids: list[str], run_id: str, error: str, *, park_after: int) -> list[str]:
        parked = []
        for i in ids:
            it = self._items.get(i)
            if it is None or it.parked:
                continue
            if it.failed_run != run_id:
                it.failures, it.failed_run, it.error = it.failures + 1, run_id, error
            if park_after and it.failures >= park_after:
                it.parked = True
                parked.append(i)
        return parked

    async def parked(self) -> list[Parked]:
        return [
            Parked(it.context, it.entry, it.failures, it.error or "", it.run_id)
            for it in self._items.values()
            if it.parked
        ]

    async def retry(self, input_id: str) -> bool:
        it = self._items.get(input_id)
        if it is None or not it.parked:
            return False
        it.parked, it.failures, it.failed_run, it.error, it.run_id = False, 0, None, None, None
        return True

    async def drop(self, input_id: str) -> bool:
        it = self._items.get(input_id)
        if it is None or not it.parked:
            return False
        del self._items[input_id]
        return True


class SQLiteInbox(InboxStore):
    """Handled rows are kept (platform ids must stay known); retention (hub/store/_retention.py)
    drops old handled rows. States: received, taken, done, parked."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()  # the tables are the migrations' (hub/store/sql/_migrations.py)

    async def record(self, context: str, entry: InputLog) -> bool:
        if entry.platform_id is not None and await self.seen(entry.platform_id):
            return False
        await self.db.write(
            "INSERT INTO inbox (id, context, platform_id, data, state, received) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            (entry.id, context, entry.platform_id, dumps(to_dict(entry)), "received", entry.ts),
        )
        if entry.platform_id is None:
            return True
        row = await self.db.fetchone("SELECT id FROM inbox WHERE platform_id = ?", (entry.platform_id,))
        return row is not None and row[0] == entry.id

    def take(self, ids: list[str], run_id: str) -> None:
        for i in ids:
            self.db.write_soon("UPDATE inbox SET state = 'taken', run_id = ? WHERE id = ?", (run_id, i))

    async def done(self, ids: list[str]) -> None:
        now = time.time()
        for i in ids:
            self.db.write_soon("UPDATE inbox SET state = 'done', handled = ? WHERE id = ?", (now, i))
        await self.db.flush()

    async def pending(self) -> list[Pending]:
        try:
            await self.db.flush()  # takes queued before are seen, when they can be written
        except StoreError:
            pass  # the store cannot write now: what is committed is still worth listing
        rows = await self.db.fetchall(
            "SELECT context, data, run_id FROM inbox WHERE state IN ('received', 'taken') ORDER BY received"
        )
        return [Pending(context, _entry(data), run_id) for context, data, run_id in rows]

    async def seen(self, platform_id: str) -> bool:
        return await self.db.fetchone("SELECT 1 FROM inbox WHERE platform_id = ?", (platform_id,)) is not None

    async def failed(self, ids: list[str], run_id: str, error: str, *, park_after: int) -> list[str]:
        for i in ids:
            self.db.write_soon(
                "UPDATE inbox SET failures = failures + 1, failed_run = ?, error = ? "
                "WHERE id = ? AND state IN ('received', 'taken') AND (failed_run IS NULL OR failed_run <> ?)",
                (run_id, error, i, run_id),
            )
        await self.db.flush()
        if not park_after or not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = await self.db.fetchall(
            f"SELECT id FROM inbox WHERE id IN ({marks}) AND state IN ('received', 'taken') AND failures >= ?",
            (*ids, park_after),
        )
        parked = [r[0] for r in rows]
        for i in parked:
            self.db.write_soon("UPDATE inbox SET state = 'parked', handled = ? WHERE id = ?", (time.time(), i))
        await self.db.flush()
        return parked

    async def parked(self) -> list[Parked]:
        rows = await self.db.fetchall(
            "SELECT context, data, failures, error, run_id FROM inbox WHERE state = 'parked' ORDER BY received"
        )
        return [Parked(c, _entry(d), int(f), e or "", r) for c, d, f, e, r in rows]

    async def retry(self, input_id: str) -> bool:
        if await self.db.fetchone("SELECT 1 FROM inbox WHERE id = ? AND state = 'parked'", (input_id,)) is None:
            return False
        await self.db.write(
            "UPDATE inbox SET state = 'received', run_id = NULL, failures = 0, failed_run = NULL, error = NULL, "
            "handled = NULL, claimed_by = NULL, lease_until = NULL WHERE id = ? AND state = 'parked'",
            (input_id,),
        )
        return True

    async def drop(self, input_id: str) -> bool:
        if await self.db.fetchone("SELECT 1 FROM inbox WHERE id = ? AND state = 'parked'", (input_id,)) is None:
            return False
        await self.db.write(
            "UPDATE inbox SET state = 'done', handled = ? WHERE id = ? AND state = 'parked'", (time.time(), input_id)
        )
        return True

    async def find(self, prefix: str) -> str | None:
        """The id of the one input whose id starts with ``prefix`` (as ``hub inbox`` prints it)."""
        rows = await self.db.fetchall(
            "SELECT id FROM inbox WHERE id >= ? AND id < ? LIMIT 2", (prefix, prefix + "\uffff")
        )
        return rows[0][0] if len(rows) == 1 else None


_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::float8"  # the server's clock: workers' clocks may differ


class PostgresInbox(SQLiteInbox):
    """The inbox on PostgreSQL, shared by several workers, each holding its inputs with a lease.

    An input is claimed by the worker that records it (``claimed_by``, ``lease_until``, on
    the server's clock). A live worker renews its leases every third of ``lease`` (the
    claims sweep of :class:`hub.engine.Intake`); a worker that dies stops renewing, and once
    its leases expire another worker's :meth:`claim` takes its inputs, row locks taken with
    ``FOR UPDATE SKIP LOCKED`` so that two workers claiming at once never get the same
    input. An input whose run is still ``running`` (its worker holds the conversation's
    lock) is never claimed. A clean stop gives the worker's inputs back at once.
    """

    def __init__(self, db: SqlDatabase, *, worker: str, lease: float = 60.0) -> None:
        super().__init__(db)
        self.worker = worker
        self.lease = lease

    async def record(self, context: str, entry: InputLog) -> bool:
        if entry.platform_id is not None and await self.seen(entry.platform_id):
            return False
        await self.db.write(
            "INSERT INTO inbox (id, context, platform_id, data, state, received, claimed_by, lease_until) "
            f"VALUES (?,?,?,?,'received',?,?,{_NOW} + ?) ON CONFLICT DO NOTHING",
            (entry.id, context, entry.platform_id, dumps(to_dict(entry)), entry.ts, self.worker, self.lease),
        )
        if entry.platform_id is None:
            return True
        row = await self.db.fetchone("SELECT id FROM inbox WHERE platform_id = ?", (entry.platform_id,))
        return row is not None and row[0] == entry.id

    def take(self, ids: list[str], run_id: str) -> None:
        for i in ids:
            self.db.write_soon(
                f"UPDATE inbox SET state = 'taken', run_id = ?, claimed_by = ?, lease_until = {_NOW} + ? WHERE id = ?",
                (run_id, self.worker, self.lease, i),
            )

    async def claim(self) -> list[Pending]:
        await self.db.flush()
        rows = await self.db.fetchall(
            "WITH c AS ("
            " SELECT id FROM inbox WHERE state IN ('received', 'taken')"
            f" AND (claimed_by IS NULL OR (claimed_by <> ? AND lease_until < {_NOW}))"
            " AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = inbox.run_id AND runs.state = 'running')"
            " ORDER BY received FOR UPDATE SKIP LOCKED"
            f") UPDATE inbox SET claimed_by = ?, lease_until = {_NOW} + ? FROM c WHERE inbox.id = c.id"
            " RETURNING inbox.context, inbox.data, inbox.run_id, inbox.received",
            (self.worker, self.worker, self.lease),
        )
        rows.sort(key=lambda r: r[3])
        return [Pending(context, _entry(data), run_id) for context, data, run_id, _ in rows]

    async def renew(self) -> int:
        # Not behind this worker's queued writes (no flush): a write queue backed up under
        # load must not delay the renewal past the lease, or another worker takes inputs this
        # one still holds. Rows locked by this worker's own writer are skipped, not waited on
        # (that write sets the lease itself), and the rows are locked in one order, so a
        # renewal never deadlocks with a batch of takes or a claim.
        row = await self.db.fetchone(
            "WITH c AS ("
            " SELECT id FROM inbox WHERE claimed_by = ? AND state IN ('received', 'taken')"
            " ORDER BY id FOR UPDATE SKIP LOCKED"
            f"), r AS (UPDATE inbox SET lease_until = {_NOW} + ? FROM c WHERE inbox.id = c.id RETURNING 1)"
            " SELECT COUNT(*) FROM r",
            (self.worker, self.lease),
        )
        return int(row[0]) if row else 0

    async def hold(self, ids: list[str]) -> list[str]:
        # one statement: the check and a fresh lease together, so between this and the run's
        # take (which marks the input with its running run) no other worker can claim it
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        rows = await self.db.fetchall(
            f"UPDATE inbox SET lease_until = {_NOW} + ? WHERE id IN ({marks})"
            " AND claimed_by = ? AND state IN ('received', 'taken') RETURNING id",
            (self.lease, *ids, self.worker),
        )
        kept = {r[0] for r in rows}
        return [i for i in ids if i in kept]

    async def oldest_elsewhere(self, context: str, ids: list[str]) -> float | None:
        mine = f" AND id NOT IN ({','.join('?' for _ in ids)})" if ids else ""
        row = await self.db.fetchone(
            f"SELECT MIN(received) FROM inbox WHERE context = ? AND state IN ('received', 'taken'){mine}",
            (context, *ids),
        )
        return None if row is None or row[0] is None else float(row[0])

    async def release(self) -> None:
        """Give this worker's unhandled inputs back, for another worker to claim now."""
        await self.db.write(
            "UPDATE inbox SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = ? AND state IN ('received', 'taken')",
            (self.worker,),
        )

    async def close(self) -> None:
        try:
            await self.release()
        except Exception as e:  # the database is gone: the leases expire by themselves
            log.warning("inbox: could not give back the inputs of worker %s: %s", self.worker, e)


def _entry(data: str) -> InputLog:
    entry = from_dict(json.loads(data))
    assert isinstance(entry, InputLog)
    return entry


async def park_poison(inbox: InboxStore, runs: RunStore, p: Pending, *, park_after: int) -> bool:
    """At start, before a pending input is resumed: if the run that last took it failed (or
    died with the process), count that against it; True if it is now parked."""
    if p.run_id is None:
        return False
    run = await runs.get(p.run_id)
    if run is None or not (run.state == "failed" or (run.state == "killed" and run.reason == "abnormal_exit")):
        return False  # still running elsewhere, or stopped by a shutdown: not the input's fault
    if (run.reason or "").startswith("store_error"):
        return False  # the store failed, not the input: it is retried as often as it takes
    error = f"run {run.id[:8]} {run.state}: {run.reason}"
    if not await inbox.failed([p.entry.id], run.id, error, park_after=park_after):
        return False
    log.warning(
        "inbox: input %s for %s parked after %d failed runs (last: %s); `hub inbox` lists it, "
        "`hub inbox retry %s` resumes it",
        p.entry.id[:8],
        p.context,
        park_after,
        error,
        p.entry.id[:8],
    )
    return True
