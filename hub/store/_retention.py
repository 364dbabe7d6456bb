"""Retention: the database stays bounded (``[hub] retention``; ``hub prune [--dry-run]``).

A background task (started with the hub, then every ``interval`` seconds) deletes, in
transactions of ``batch`` rows so the event loop and the other writers keep going:

- runs that ended more than ``days`` ago, or beyond the newest ``max_runs``, with their
  event logs (never a run that an input waiting in the inbox still refers to);
- handled inbox rows: their content at once (the run's log holds the input), whole rows
  with no platform id (nothing could be redelivered), and the rest, kept only to recognise
  a redelivery by its platform id, once older than ``redelivery_days`` (a redelivery after
  that is answered again). Keeping whole inputs for ``days`` grew a busy hub's database by
  the size of every message it took (bench/soak.py: 90 MB to 205 MB over 100,000 turns);
- daily token usage older than ``days``;
- conversations idle for ``days``: judged by their last activity (a run, a command, a
  ``/new``; hub/store/_conversations.py), never by when one key last changed, and pruned
  whole (``context:``, ``memory:``, ``working-memory:`` keys together). The bot's own
  context is marked ``keep`` and never pruned.

Freed pages go back to the file system through incremental vacuum (the database is created
with ``auto_vacuum=INCREMENTAL``; an older one is converted once at open, see hub/store/sql/_sqlite.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..tasks import cancel_and_wait
from .sql import SqlDatabase, prune_conversations

if TYPE_CHECKING:
    from ..config import RetentionSection

__all__ = ["Retention", "prune", "PruneReport"]

log = logging.getLogger("hub.store")

_DAY = 86_400.0


@dataclass(slots=True)
class PruneReport:
    """Rows deleted (or, for a dry run, that would be) per table, and pages given back."""

    rows: dict[str, int] = field(default_factory=dict)
    freed_pages: int = 0
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    def __str__(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        parts = ", ".join(f"{n} {t}" for t, n in self.rows.items()) or "nothing"
        freed = f"; {self.freed_pages} pages freed" if self.freed_pages else ""
        return f"{verb} {parts}{freed}"


async def _tables(db: SqlDatabase) -> set[str]:
    if db.dialect == "postgres":
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {r[0] for r in await db.fetchall(sql)}


async def prune(
    db: SqlDatabase, policy: RetentionSection, *, dry_run: bool = False, now: float | None = None
) -> PruneReport:
    """Apply ``policy`` to ``db`` now (or count what it would delete).

    Raises:
        StoreError: the database failed; what was deleted before stays deleted.
    """
    now = time.time() if now is None else now
    report = PruneReport(dry_run=dry_run)
    tables = await _tables(db)
    cutoff = now - policy.days * _DAY if policy.days else None
    batch = policy.batch

    async def drain(name: str, table: str, key: str, where: str, params: tuple[Any, ...]) -> None:
        """Delete ``table``'s rows matching ``where``, ``batch`` rows per transaction (by
        rowid on SQLite, by the primary ``key`` on PostgreSQL, which has no rowid)."""
        if db.dialect == "sqlite":
            key = "rowid"
        if dry_run:
            row = await _one(db, f"SELECT COUNT(*) FROM {table} WHERE {where}", params)
            report.rows[name] = int(row[0]) if row else 0
            return
        total = 0
        while True:
            ids = [
                r[0] for r in await db.fetchall(f"SELECT {key} FROM {table} WHERE {where} LIMIT ?", (*params, batch))
            ]
            if ids:  # the condition again: a row written since the select stays
                marks = ",".join("?" * len(ids))
                await db.write_apart(f"DELETE FROM {table} WHERE {key} IN ({marks}) AND {where}", (*ids, *params))
                total += len(ids)
            if len(ids) < batch:
                break
            await asyncio.sleep(0)  # let runs write between batches
        report.rows[name] = total

    if "runs" in tables:
        await _prune_runs(db, policy, cutoff, report, dry_run=dry_run, tables=tables)
    if "inbox" in tables:
        await drain("inbox rows", "inbox", "id", *_handled_inputs(policy, now, cutoff))
        await _strip_handled(db, batch, dry_run=dry_run)
    if cutoff is not None:
        if "token_usage" in tables:  # one row per scope and day: deleted a day at a time
            day = time.strftime("%Y-%m-%d", time.gmtime(cutoff))
            days = await db.fetchall("SELECT day, COUNT(*) FROM token_usage WHERE day < ? GROUP BY day", (day,))
            if not dry_run:
                for d, _ in days:
                    await db.write_apart("DELETE FROM token_usage WHERE day = ?", (d,))
            report.rows["usage rows"] = sum(int(n) for _, n in days)
        if "conversations" in tables:
            report.rows["conversations"] = await prune_conversations(db, cutoff, batch=batch, dry_run=dry_run)
    if not dry_run and report.total:
        report.freed_pages = await db.incremental_vacuum()
    return report


async def _one(db: SqlDatabase, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
    """The first row, read beside the loop: SQLite's ``fetchone`` runs on the loop's thread,
    and a count over a busy hub's tables is not the small read it is meant for."""
    rows = await db.fetchall(sql, params)
    return rows[0] if rows else None


def _handled_inputs(policy: RetentionSection, now: float, cutoff: float | None) -> tuple[str, tuple[Any, ...]]:
    """The handled inbox rows to delete: those with no platform id, and those whose
    redelivery window (``redelivery_days``, else ``days``) has passed."""
    window = policy.redelivery_days * _DAY if policy.redelivery_days else None
    until = now - window if window is not None else cutoff
    if until is None:
        return "state = 'done' AND platform_id IS NULL", ()
    return "state = 'done' AND (platform_id IS NULL OR handled < ?)", (until,)


#: What a handled input's content becomes: its platform id is all that is still needed.
_STRIPPED = "{}"


async def _strip_handled(db: SqlDatabase, batch: int, *, dry_run: bool) -> None:
    """Drop the content of handled inputs kept for their platform id, ``batch`` at a time."""
    while not dry_run:
        rows = await db.fetchall(
            "SELECT id FROM inbox WHERE state = 'done' AND platform_id IS NOT NULL AND data <> ? LIMIT ?",
            (_STRIPPED, batch),
        )
        ids = [r[0] for r in rows]
        if ids:
            marks = ",".join("?" * len(ids))
            await db.write_apart(
                f"UPDATE inbox SET data = ? WHERE id IN ({marks}) AND state = 'done'", (_STRIPPED, *ids)
            )
        if len(ids) < batch:
            return
        await asyncio.sleep(0)


async def _prune_runs(
    db: SqlDatabase,
    policy: RetentionSection,
    cutoff: float | None,
    report: PruneReport,
    *,
    dry_run: bool,
    tables: set[str],
) -> None:
    conditions, params = [], []
    if cutoff is not None:
        conditions.append("ended < ?")
        params.append(cutoff)
    if policy.max_runs:
        row = await _one(db, "SELECT started FROM runs ORDER BY started DESC LIMIT 1 OFFSET ?", (policy.max_runs - 1,))
        if row is not None:
            conditions.append("started < ?")
            params.append(row[0])
    if not conditions:
        return
    where = f"state != 'running' AND ({' OR '.join(conditions)})"
    if "inbox" in tables:  # a run whose inputs wait for a retry is evidence for the dead-letter count
        where += " AND id NOT IN (SELECT run_id FROM inbox WHERE state IN ('received', 'taken') AND run_id IS NOT NULL)"
    if dry_run:
        row = await _one(db, f"SELECT COUNT(*) FROM runs WHERE {where}", tuple(params))
        report.rows["runs"] = int(row[0]) if row else 0
        if "run_events" in tables:
            row = await _one(
                db,
                f"SELECT COUNT(*) FROM run_events WHERE run_id IN (SELECT id FROM runs WHERE {where})",
                tuple(params),
            )
            report.rows["run events"] = int(row[0]) if row else 0
        return
    runs = events = 0
    while True:
        ids = [r[0] for r in await db.fetchall(f"SELECT id FROM runs WHERE {where} LIMIT ?", (*params, policy.batch))]
        if not ids:
            break
        marks = ",".join("?" * len(ids))
        if "run_events" in tables:
            row = await _one(db, f"SELECT COUNT(*) FROM run_events WHERE run_id IN ({marks})", ids)
            events += int(row[0]) if row else 0
            await db.write_apart(f"DELETE FROM run_events WHERE run_id IN ({marks})", ids)
        if "history" in tables:  # a pruned run's messages leave the search index with it
            await db.write_apart(f"DELETE FROM history WHERE run_id IN ({marks})", ids)
        await db.write_apart(f"DELETE FROM runs WHERE id IN ({marks})", ids)
        runs += len(ids)
        if len(ids) < policy.batch:
            break
        await asyncio.sleep(0)
    report.rows["runs"] = runs
    report.rows["run events"] = events


class Retention:
    """The hub's component that prunes in the background (every ``policy.interval`` seconds)."""

    def __init__(self, db: SqlDatabase, policy: RetentionSection) -> None:
        self.db = db
        self.policy = policy
        self.last: PruneReport | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Any) -> None:  # the Hub, through its public API (submit, metrics, store health)
        if self._task is None and (self.policy.days or self.policy.max_runs):
            self._task = asyncio.create_task(self._loop(), name="retention")

    async def _loop(self) -> None:
        while True:
            try:
                self.last = await prune(self.db, self.policy)
                if self.last.total:
                    log.info("retention: %s", self.last)
            except StoreError as e:  # reported by the store's health; try again next time
                log.error("retention: prune failed: %s", e)
            except Exception:  # a task that dies would silently stop retention
                log.exception("retention: prune failed")
            await asyncio.sleep(self.policy.interval)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
