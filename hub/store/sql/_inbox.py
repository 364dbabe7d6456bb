"""The inbox on SQL: `SqlInbox` (one process, SQLite) and `PostgresInbox`
(workers sharing PostgreSQL, each holding the inputs it took on with a lease, claims taken
with ``FOR UPDATE SKIP LOCKED``). The seam is hub/store/_inbox.py.
"""

from __future__ import annotations

import json
import logging
import time

from ...errors import StoreError
from ...logs import InputLog, from_dict, to_dict
from .._inbox import InboxStore, Parked, Pending
from ._postgres import PgDatabase
from ._sql_store import SqlStore
from ._values import dumps, holds_text

__all__ = ["SqlInbox", "PostgresInbox"]

log = logging.getLogger("hub.store")


class SqlInbox(SqlStore, InboxStore, store="inbox"):
    """The inbox of one process (SQLite): every pending input is this process's to answer.
    Handled rows are kept (platform ids must stay known); retention (hub/store/_retention.py)
    drops old handled rows. States: received, taken, done, parked."""

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

    async def forget_user(self, user: str, *, platform: str) -> int:
        lo, hi = f"{platform}:", f"{platform};"
        holds, args = holds_text("data", user, self.db.dialect)
        rows = await self.db.fetchall(
            f"SELECT id, state, data FROM inbox WHERE context >= ? AND context < ? AND {holds}", (lo, hi, *args)
        )
        theirs = [(i, state) for i, state, data in rows if _sender(data) == user]
        for input_id, state in theirs:
            if state == "done":  # as retention strips a handled input: its platform id stays
                await self.db.write("UPDATE inbox SET data = '{}', error = NULL WHERE id = ?", (input_id,))
            else:
                await self.db.write("DELETE FROM inbox WHERE id = ?", (input_id,))
        return len(theirs)

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

    async def park(self, context: str, entry: InputLog, error: str, *, failures: int) -> bool:
        if entry.platform_id is not None and await self.seen(entry.platform_id):
            return False
        await self.db.write(
            "INSERT INTO inbox (id, context, platform_id, data, state, received, handled, failures, error) "
            "VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            (
                entry.id,
                context,
                entry.platform_id,
                dumps(to_dict(entry)),
                "parked",
                entry.ts,
                time.time(),
                failures,
                error,
            ),
        )
        if entry.platform_id is None:
            return True
        row = await self.db.fetchone("SELECT id FROM inbox WHERE platform_id = ?", (entry.platform_id,))
        return row is not None and row[0] == entry.id

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


class PostgresInbox(SqlInbox):
    """The inbox on PostgreSQL, shared by several workers, each holding its inputs with a lease.

    An input is claimed by the worker that records it (``claimed_by``, ``lease_until``, on
    the server's clock). A live worker renews its leases every third of ``lease`` (the
    claims sweep of `hub.engine.Intake`); a worker that dies stops renewing, and once
    its leases expire another worker's `claim()` takes its inputs, row locks taken with
    ``FOR UPDATE SKIP LOCKED`` so that two workers claiming at once never get the same
    input. An input whose run is still ``running`` (its worker holds the conversation's
    lock) is never claimed. A clean stop gives the worker's inputs back at once.
    """

    def __init__(self, db: PgDatabase, *, worker: str, lease: float = 60.0) -> None:
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


def _sender(data: str) -> str | None:
    """Who sent the input stored as ``data`` (None: nobody, or a row stripped already)."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    user = value.get("user") if isinstance(value, dict) else None
    return user if isinstance(user, str) else None
