"""The run store on SQL: `SqlRunStore` (one process, SQLite) and `PostgresRunStore`
(workers sharing PostgreSQL, where a run found ``running`` may be alive on another worker).
The seam is hub/store/_run_records.py.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Awaitable
from typing import Any

from ...logs import InputLog, Log, from_dict, to_dict
from .._history import search_terms
from .._run_records import RunRecord, RunState, RunStore, RunTotals, forgotten_input
from ._migrations import _RUNS_FTS_COLUMNS as _FTS_COLUMNS
from ._migrations import _RUNS_FTS_TOKENIZE
from ._postgres import PgDatabase
from ._sql_store import SqlStore
from ._sqlite import Database
from ._values import dumps, holds_text

__all__ = ["SqlRunStore", "PostgresRunStore"]


_BATCH = 500  # ids a statement names (SQLite allows 32,766 variables; a batch stays small)


def _marks(ids: builtins.list[str]) -> str:
    return ",".join("?" * len(ids))


def _prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds of the strings that start with ``prefix``, for an indexed range scan."""
    return prefix, prefix + "\U0010ffff"


# "user" quoted: a reserved word in PostgreSQL (SQLite takes the quoted spelling alike)
_COLUMNS = (
    'id, context, state, reason, steps, prompt_tokens, completion_tokens, started, ended, parent_id, "user", '
    "store_failed, cost, user_name, user_handle, message, reply, models, cached_tokens"
)
_VALUES = ",".join("?" for _ in _COLUMNS.split(","))  # one placeholder a column
_QUALIFIED = ", ".join(f"r.{c.strip()}" for c in _COLUMNS.split(","))
# what a search looks in (hub/store/_run_records.py: RunStore.search): context, user, name,
# handle, message and reply, through their full-text index (migration 152), never a scan


def _fts_match(text: str) -> tuple[str, tuple[Any, ...]]:
    """SQLite: the runs holding a word starting with each word of ``text``; each word a
    quoted prefix phrase, so no part of ``text`` is query syntax. Ended runs are in FTS5
    ``runs_fts`` (migration 181), runs under way in ``temp.runs_live``, which
    `_index_live_runs` fills from them for each search (the same tokenizer: the same words)."""
    terms = search_terms(text)
    if not terms:
        return "0 = 1", ()
    query = " ".join(f'"{t}"*' for t in terms)
    return (
        "(rowid IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?)"
        " OR rowid IN (SELECT rowid FROM temp.runs_live WHERE runs_live MATCH ?))",
        (query, query),
    )


def _index_live_runs(raw: sqlite3.Connection) -> None:
    """Index the runs under way for one search (in its read transaction): a few rows (the
    runs in flight), where keeping them in ``runs_fts`` as they change cost every turn."""
    raw.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.runs_live USING fts5({_FTS_COLUMNS}, {_RUNS_FTS_TOKENIZE})")
    raw.execute("DELETE FROM temp.runs_live")
    raw.execute(
        f"INSERT INTO temp.runs_live (rowid, {_FTS_COLUMNS}) SELECT rowid, {_FTS_COLUMNS} FROM runs WHERE state = ?",
        (str(RunState.RUNNING),),
    )


def _row(run: RunRecord) -> tuple[Any, ...]:
    return (
        run.id,
        run.context,
        str(run.state),
        run.reason,
        run.steps,
        run.prompt_tokens,
        run.completion_tokens,
        run.started,
        run.ended,
        run.parent_id,
        run.user,
        int(run.store_failed),
        run.cost,
        run.user_name,
        run.user_handle,
        run.message,
        run.reply,
        run.models,
        run.cached_tokens,
    )


def _record(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        id=row[0],
        context=row[1],
        state=RunState(row[2]),
        reason=row[3],
        steps=row[4],
        prompt_tokens=row[5],
        completion_tokens=row[6],
        started=row[7],
        ended=row[8],
        parent_id=row[9],
        user=row[10],
        store_failed=bool(row[11]),
        cost=float(row[12] or 0.0),
        user_name=row[13],
        user_handle=row[14],
        message=row[15] or "",
        reply=row[16] or "",
        models=row[17] or "",
        cached_tokens=int(row[18] or 0),
    )


class SqlRunStore(SqlStore, RunStore, store="runs"):
    """Runs in the hub's database, for one process (SQLite): every run found ``running`` at
    start was cut off by a crash. Event entries and progress are written behind (committed
    within milliseconds, in order); a run's start and end are durable when awaited."""

    _match = staticmethod(_fts_match)  # the search's condition: PostgreSQL's is its own

    # a histogram's bucket of a run (never negative: the rows start at ``since``), truncated
    _BUCKET = "CAST((started - ?) / ? AS INTEGER)"

    async def create(self, run: RunRecord) -> None:
        await self.create_soon(run)

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        return self.db.submit(f"INSERT INTO runs ({_COLUMNS}) VALUES ({_VALUES})", _row(run))

    def append(self, run: RunRecord, entry: Log) -> None:
        run.seq += 1
        self.db.write_soon(
            "INSERT INTO run_events (run_id, seq, kind, ts, data) VALUES (?,?,?,?,?)",
            (run.id, run.seq, entry.kind, entry.ts, dumps(to_dict(entry))),
        )

    def update(self, run: RunRecord) -> None:
        self.db.write_soon(
            "UPDATE runs SET steps = ?, prompt_tokens = ?, completion_tokens = ?, cost = ?, reply = ?, models = ?, "
            "cached_tokens = ? WHERE id = ?",
            (
                run.steps,
                run.prompt_tokens,
                run.completion_tokens,
                run.cost,
                run.reply,
                run.models,
                run.cached_tokens,
                run.id,
            ),
        )

    async def sync(self) -> None:
        await self.db.flush()

    async def finish(self, run: RunRecord) -> None:
        await self.db.write(
            "UPDATE runs SET state = ?, reason = ?, steps = ?, prompt_tokens = ?, completion_tokens = ?, ended = ?, "
            "store_failed = ?, cost = ?, reply = ?, models = ?, cached_tokens = ? WHERE id = ?",
            (
                str(run.state),
                run.reason,
                run.steps,
                run.prompt_tokens,
                run.completion_tokens,
                run.ended,
                int(run.store_failed),
                run.cost,
                run.reply,
                run.models,
                run.cached_tokens,
                run.id,
            ),
        )

    async def get(self, run_id: str) -> RunRecord | None:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return _record(row) if row else None

    async def list(
        self, *, limit: int = 20, state: str | None = None, context: str | None = None, parent_id: str | None = None
    ) -> list[RunRecord]:
        where, params = [], []
        for col, val in (("state", state), ("context", context), ("parent_id", parent_id)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY started DESC LIMIT ?", (*params, limit)
        )
        return [_record(tuple(r)) for r in rows]

    async def page(
        self,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
        text: str | None = None,
    ) -> builtins.list[RunRecord]:
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        for col, val in (("state", state), ("context", context)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        if text:
            match, args = self._match(text)
            where.append(match)
            params.extend(args)
        if platform is not None:
            where.append("context >= ? AND context < ?")
            params.extend(_prefix_range(platform + ":"))
        if before is not None:
            where.append("(started < ? OR (started = ? AND id < ?))")
            params.extend((before[0], before[0], before[1]))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY started DESC, id DESC LIMIT ?", (*params, limit), text
        )
        return [_record(tuple(r)) for r in rows]

    async def search(
        self,
        text: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
    ) -> builtins.list[RunRecord]:
        return await self.page(limit=limit, before=before, state=state, context=context, platform=platform, text=text)

    async def _read(self, sql: str, params: tuple[Any, ...], text: str | None) -> builtins.list[tuple[Any, ...]]:
        """A listing's rows; a search's after the runs under way are indexed for it."""
        if not text:
            return await self.db.fetchall(sql, params)
        db = self.db
        assert isinstance(db, Database), "PostgresRunStore reads with its own _read"
        return await db.fetchall_after(_index_live_runs, sql, params)

    async def conversations(
        self, *, limit: int = 50, platform: str | None = None, text: str | None = None
    ) -> builtins.list[tuple[RunRecord, int]]:
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if platform is not None:
            where.append("context >= ? AND context < ?")
            params.extend(_prefix_range(platform + ":"))
        if text:
            match, args = self._match(text)
            where.append(match)
            params.extend(args)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        # each conversation's latest (matching) run, found by the (context, started) index
        rows = await self._read(
            f"SELECT {_QUALIFIED}, c.n FROM (SELECT context, MAX(started) AS last, COUNT(*) AS n FROM runs {clause} "
            "GROUP BY context ORDER BY last DESC LIMIT ?) c JOIN runs r ON r.context = c.context AND r.started = c.last "
            "ORDER BY c.last DESC, r.id DESC",
            (*params, limit),
            text,
        )
        out: builtins.list[tuple[RunRecord, int]] = []
        seen: set[str] = set()
        for row in rows:
            record = _record(tuple(row[:-1]))
            if record.context not in seen:  # two runs started at the same instant: the one shown once
                seen.add(record.context)
                out.append((record, int(row[-1])))
        return out

    async def totals(self, *, since: float) -> RunTotals:
        row = await self.db.fetchone(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state = ? THEN 1 ELSE 0 END), 0), "
            "COALESCE(SUM(prompt_tokens + completion_tokens), 0), COALESCE(SUM(cost), 0) FROM runs WHERE started >= ?",
            (str(RunState.FAILED), since),
        )
        return RunTotals(int(row[0]), int(row[1]), int(row[2]), float(row[3])) if row else RunTotals()

    async def histogram(self, *, since: float, width: float, buckets: int) -> builtins.list[RunTotals]:
        # by the started index; a bucket's number is worked out here, in SQL, so one row per bucket comes back
        rows = await self.db.fetchall(
            f"SELECT {self._BUCKET} AS b, COUNT(*), "
            "SUM(CASE WHEN state = ? THEN 1 ELSE 0 END), SUM(prompt_tokens + completion_tokens), SUM(cost) "
            "FROM runs WHERE started >= ? AND started < ? GROUP BY b",
            (float(since), float(width), str(RunState.FAILED), float(since), float(since + width * buckets)),
        )
        out = [RunTotals() for _ in range(buckets)]
        for b, n, failed, tokens, cost in rows:
            if 0 <= int(b) < buckets:
                out[int(b)] = RunTotals(int(n), int(failed or 0), int(tokens or 0), float(cost or 0.0))
        return out

    async def recent_contexts(
        self, *, limit: int = 50, platform: str | None = None
    ) -> builtins.list[tuple[str, float, int]]:
        clause, params = "", []
        if platform is not None:
            clause, params = "WHERE context >= ? AND context < ?", list(_prefix_range(platform + ":"))
        rows = await self.db.fetchall(
            f"SELECT context, MAX(started), COUNT(*) FROM runs {clause} GROUP BY context ORDER BY 2 DESC LIMIT ?",
            (*params, limit),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def find(self, prefix: str) -> RunRecord | None:
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM runs WHERE id >= ? AND id < ? LIMIT 2", (prefix, prefix + "\uffff")
        )
        return _record(tuple(rows[0])) if len(rows) == 1 else None

    async def events(self, run_id: str) -> builtins.list[Log]:
        await self.db.flush()
        rows = await self.db.fetchall("SELECT data FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [from_dict(json.loads(r[0])) for r in rows]

    async def events_after(self, run_id: str, seq: int) -> builtins.list[tuple[int, Log]]:
        rows = await self.db.fetchall(
            "SELECT seq, data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, seq)
        )
        return [(r[0], from_dict(json.loads(r[1]))) for r in rows]

    async def active(self, *, since: float, context: str | None = None) -> builtins.list[RunRecord]:
        where = "(state = ? OR started >= ?)" + (" AND context = ?" if context else "")
        params: tuple[Any, ...] = (str(RunState.RUNNING), since, *((context,) if context else ()))
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM runs WHERE {where} ORDER BY started", params)
        return [_record(tuple(r)) for r in rows]

    async def forget_user(self, user: str, *, platform: str) -> tuple[int, int]:
        lo, hi = _prefix_range(platform + ":")
        rows = await self.db.fetchall(
            'SELECT id FROM runs WHERE "user" = ? AND context >= ? AND context < ?', (user, lo, hi)
        )
        doomed = [str(r[0]) for r in rows]
        seen, frontier = set(doomed), list(doomed)
        while frontier:  # child runs: what they were asked came from this person's message
            batch, frontier = frontier[:_BATCH], frontier[_BATCH:]
            kids = await self.db.fetchall(f"SELECT id FROM runs WHERE parent_id IN ({_marks(batch)})", batch)
            fresh = [str(k[0]) for k in kids if k[0] not in seen]
            seen.update(fresh)
            doomed.extend(fresh)
            frontier.extend(fresh)
        for i in range(0, len(doomed), _BATCH):
            ids = doomed[i : i + _BATCH]
            # the log first, the row last: cut off between them, the run is found again next time
            await self.db.write_apart(f"DELETE FROM run_events WHERE run_id IN ({_marks(ids)})", ids)
            await self.db.write_apart(f"DELETE FROM runs WHERE id IN ({_marks(ids)})", ids)
        blanked = await self._blank_inputs(user, lo, hi)
        if doomed:
            await self._purge_index()
        return len(doomed), blanked

    async def _blank_inputs(self, user: str, lo: str, hi: str) -> int:
        """Their inputs taken by other people's runs in the platform's conversations (a
        message that joined a run under way) are blanked where they lie in those logs."""
        holds, args = holds_text("e.data", user, self.db.dialect)
        rows = await self.db.fetchall(
            "SELECT e.run_id, e.seq, e.data FROM run_events e JOIN runs r ON r.id = e.run_id "
            f"WHERE e.kind = 'input' AND r.context >= ? AND r.context < ? AND {holds}",
            (lo, hi, *args),
        )
        blanked = 0
        for run_id, seq, data in rows:
            entry = from_dict(json.loads(data))
            if isinstance(entry, InputLog) and entry.user == user:
                blank = dumps(to_dict(forgotten_input(entry)))
                await self.db.write("UPDATE run_events SET data = ? WHERE run_id = ? AND seq = ?", (blank, run_id, seq))
                blanked += 1
        return blanked

    async def _purge_index(self) -> None:
        """SQLite's FTS5 keeps a deleted row's words in its segments, marked deleted, until they
        are merged: merged now, so the search index holds no word of a forgotten run."""
        await self.db.write_apart("INSERT INTO runs_fts (runs_fts) VALUES ('optimize')")

    async def recover(self) -> builtins.list[RunRecord]:
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM runs WHERE state = ?", (str(RunState.RUNNING),))
        found = []
        now = time.time()
        for run in (_record(tuple(r)) for r in rows):
            if not await self._orphaned(run):
                continue
            run.state, run.reason, run.ended = RunState.KILLED, "abnormal_exit", now
            last = await self.db.fetchone("SELECT MAX(seq) FROM run_events WHERE run_id = ?", (run.id,))
            run.seq = (last[0] or 0) if last else 0
            if await self._kill(run):
                found.append(run)
        return found

    async def _kill(self, run: RunRecord) -> bool:
        """Record a run found cut off as ``killed``; whether it was (one process: always)."""
        await self.finish(run)
        return True

    async def _orphaned(self, run: RunRecord) -> bool:
        """Whether a run left ``running`` has nobody running it (one process: always)."""
        return True


class PostgresRunStore(SqlRunStore):
    """The run store on PostgreSQL (``[store] url``), shared by several workers.

    A run is ``running`` while its worker holds its conversation's advisory lock (the
    runner takes it around every run, see `hub.store.sql.PgDatabase.lock()`), and PostgreSQL
    lets a lock go when its worker's connection dies. So `recover()` kills only the
    runs whose conversation's lock is free: the others are alive on another worker.
    """

    db: PgDatabase
    _BUCKET = "FLOOR((started - ?) / ?)::BIGINT"  # PostgreSQL's CAST rounds

    def __init__(self, db: PgDatabase) -> None:
        super().__init__(db)

    @staticmethod
    def _match(text: str) -> tuple[str, tuple[Any, ...]]:
        """The runs holding a word starting with each word of ``text`` (the generated
        ``search`` tsvector and its GIN index); each word a quoted lexeme, never syntax."""
        terms = search_terms(text)
        if not terms:
            return "0 = 1", ()
        return "search @@ to_tsquery('simple', ?)", (" & ".join(f"'{t}':*" for t in terms),)

    async def _read(self, sql: str, params: tuple[Any, ...], text: str | None) -> builtins.list[tuple[Any, ...]]:
        return await self.db.fetchall(sql, params)  # every row's tsvector is current: nothing to index first

    async def _purge_index(self) -> None:
        pass  # the tsvector is a column of the row: it went with it

    async def _orphaned(self, run: RunRecord) -> bool:
        return await self.db.try_lock(run.context)

    async def _kill(self, run: RunRecord) -> bool:
        # only if it is still running: a run that ended between the SELECT and the lock check
        # (its lock is free because it finished) keeps the state it ended with
        rows = await self.db.fetchall(
            "UPDATE runs SET state = ?, reason = ?, ended = ? WHERE id = ? AND state = ? RETURNING id",
            (str(run.state), run.reason, run.ended, run.id, str(RunState.RUNNING)),
        )
        return bool(rows)
