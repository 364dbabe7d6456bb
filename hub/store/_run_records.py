"""Runs: one row per run with an append-only event log, behind the :class:`RunStore` seam.

States (DESIGN.md): ``running`` from the first step; then one terminal state of
``completed``, ``failed``, ``rejected`` or ``killed``. Runs found ``running`` at boot were cut
off by a crash and become ``killed`` with reason ``abnormal_exit``.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..logs import Log, from_dict, new_id, to_dict
from .sql import SqlDatabase, dumps

__all__ = [
    "RunState",
    "RunRecord",
    "RunStore",
    "InMemoryRunStore",
    "SQLiteRunStore",
    "PostgresRunStore",
    "TERMINAL_STATES",
    "collect_tree",
]


class RunState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    KILLED = "killed"


TERMINAL_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.REJECTED, RunState.KILLED})


@dataclass(slots=True)
class RunRecord:
    context: str
    id: str = field(default_factory=new_id)
    state: RunState = RunState.RUNNING
    reason: str | None = None
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started: float = field(default_factory=time.time)
    ended: float | None = None
    parent_id: str | None = None
    user: str | None = None
    seq: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def duration(self) -> float | None:
        return None if self.ended is None else self.ended - self.started


class RunStore(ABC):
    """Where runs and their event logs live."""

    @abstractmethod
    async def create(self, run: RunRecord) -> None:
        """Record a new run; durable when it returns."""

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        """Record a new run now and wait later: the result ends once the run is durable
        (raising what :meth:`create` would). A store that writes behind commits it with the
        entries appended after it, at the next :meth:`sync`: the engine's first step waits
        for both at once, before the model is asked anything."""
        return asyncio.ensure_future(self.create(run))

    @abstractmethod
    def append(self, run: RunRecord, entry: Log) -> None:
        """Append one entry to the run's log (committed within milliseconds, in order)."""

    @abstractmethod
    def update(self, run: RunRecord) -> None:
        """Record progress counters (steps, tokens) without waiting."""

    @abstractmethod
    async def finish(self, run: RunRecord) -> None:
        """Record the terminal state; durable when it returns, with every entry before it."""

    async def sync(self) -> None:  # noqa: B027 - stores that write behind override it
        """Wait until every entry appended so far is durable."""

    @abstractmethod
    async def get(self, run_id: str) -> RunRecord | None: ...

    @abstractmethod
    async def list(
        self, *, limit: int = 20, state: str | None = None, context: str | None = None, parent_id: str | None = None
    ) -> list[RunRecord]:
        """Most recent first."""

    async def page(
        self,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
    ) -> builtins.list[RunRecord]:
        """One page of runs, most recent first, ordered by (started, id): keyset paging, so a
        page costs the same however deep it is. ``before`` is the (started, id) of the last
        run of the previous page; ``platform`` keeps contexts whose type begins ``PLATFORM:``.

        This default reads through :meth:`list`; stores with an index override it.
        """
        runs = await self.list(limit=1_000_000, state=state, context=context)
        runs = [r for r in runs if _in_page(r, before, platform)]
        runs.sort(key=lambda r: (r.started, r.id), reverse=True)
        return runs[:limit]

    async def recent_contexts(
        self, *, limit: int = 50, platform: str | None = None
    ) -> builtins.list[tuple[str, float, int]]:
        """Conversations by their latest run: ``(context, started of its latest run, runs)``."""
        seen: dict[str, tuple[float, int]] = {}
        for r in await self.list(limit=1_000_000):
            if platform is not None and not r.context.startswith(platform + ":"):
                continue
            last, n = seen.get(r.context, (r.started, 0))
            seen[r.context] = (max(last, r.started), n + 1)
        rows = sorted(((c, t, n) for c, (t, n) in seen.items()), key=lambda x: x[1], reverse=True)
        return rows[:limit]

    @abstractmethod
    async def events(self, run_id: str) -> builtins.list[Log]: ...

    async def events_after(self, run_id: str, seq: int) -> builtins.list[tuple[int, Log]]:
        """The run's entries after the ``seq``-th, each with its number (from 1): a follower's cursor."""
        return [(n, e) for n, e in enumerate(await self.events(run_id), 1) if n > seq]

    async def active(self, *, since: float, context: str | None = None) -> builtins.list[RunRecord]:
        """Runs still running, or started at ``since`` or later, oldest first (``--follow``)."""
        runs = await self.list(limit=1_000_000, context=context)
        return sorted((r for r in runs if r.state == RunState.RUNNING or r.started >= since), key=lambda r: r.started)

    @abstractmethod
    async def recover(self) -> builtins.list[RunRecord]:
        """Runs left ``running`` by a crash become ``killed``/``abnormal_exit``; returns them."""

    async def find(self, prefix: str) -> RunRecord | None:
        """A run by id or unique id prefix (as printed by ``hub runs``)."""
        run = await self.get(prefix)
        if run is not None:
            return run
        matches = [r for r in await self.list(limit=10_000) if r.id.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


def _in_page(r: RunRecord, before: tuple[float, str] | None, platform: str | None) -> bool:
    if platform is not None and not r.context.startswith(platform + ":"):
        return False
    return before is None or (r.started, r.id) < before


def _prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds of the strings that start with ``prefix``, for an indexed range scan."""
    return prefix, prefix + "\U0010ffff"


class InMemoryRunStore(RunStore):
    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._events: dict[str, list[dict[str, Any]]] = {}

    async def create(self, run: RunRecord) -> None:
        self._runs[run.id] = run
        self._events[run.id] = []

    def append(self, run: RunRecord, entry: Log) -> None:
        run.seq += 1
        self._events.setdefault(run.id, []).append(to_dict(entry))

    def update(self, run: RunRecord) -> None:
        self._runs[run.id] = run

    async def finish(self, run: RunRecord) -> None:
        self._runs[run.id] = run

    async def get(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list(
        self, *, limit: int = 20, state: str | None = None, context: str | None = None, parent_id: str | None = None
    ) -> list[RunRecord]:
        runs = [
            r
            for r in self._runs.values()
            if (state is None or r.state == state)
            and (context is None or r.context == context)
            and (parent_id is None or r.parent_id == parent_id)
        ]
        runs.sort(key=lambda r: r.started, reverse=True)
        return runs[:limit]

    async def events(self, run_id: str) -> builtins.list[Log]:
        return [from_dict(d) for d in self._events.get(run_id, [])]

    async def recover(self) -> builtins.list[RunRecord]:
        found = []
        for r in self._runs.values():
            if r.state == RunState.RUNNING:
                r.state, r.reason, r.ended = RunState.KILLED, "abnormal_exit", time.time()
                found.append(r)
        return found


# "user" quoted: a reserved word in PostgreSQL (SQLite takes the quoted spelling alike)
_COLUMNS = 'id, context, state, reason, steps, prompt_tokens, completion_tokens, started, ended, parent_id, "user"'


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
    )


def _dumps(value: Any) -> str:
    return dumps(value)


class SQLiteRunStore(RunStore):
    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()

    async def create(self, run: RunRecord) -> None:
        await self.create_soon(run)

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        return self.db.submit(f"INSERT INTO runs ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", _row(run))

    def append(self, run: RunRecord, entry: Log) -> None:
        run.seq += 1
        self.db.write_soon(
            "INSERT INTO run_events (run_id, seq, kind, ts, data) VALUES (?,?,?,?,?)",
            (run.id, run.seq, entry.kind, entry.ts, _dumps(to_dict(entry))),
        )

    def update(self, run: RunRecord) -> None:
        self.db.write_soon(
            "UPDATE runs SET steps = ?, prompt_tokens = ?, completion_tokens = ? WHERE id = ?",
            (run.steps, run.prompt_tokens, run.completion_tokens, run.id),
        )

    async def sync(self) -> None:
        await self.db.flush()

    async def finish(self, run: RunRecord) -> None:
        await self.db.write(
            "UPDATE runs SET state = ?, reason = ?, steps = ?, prompt_tokens = ?, completion_tokens = ?, ended = ? "
            "WHERE id = ?",
            (str(run.state), run.reason, run.steps, run.prompt_tokens, run.completion_tokens, run.ended, run.id),
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
    ) -> builtins.list[RunRecord]:
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        for col, val in (("state", state), ("context", context)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        if platform is not None:
            where.append("context >= ? AND context < ?")
            params.extend(_prefix_range(platform + ":"))
        if before is not None:
            where.append("(started < ? OR (started = ? AND id < ?))")
            params.extend((before[0], before[0], before[1]))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY started DESC, id DESC LIMIT ?", (*params, limit)
        )
        return [_record(tuple(r)) for r in rows]

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


class PostgresRunStore(SQLiteRunStore):
    """The run store on PostgreSQL (``[store] url``), shared by several workers.

    A run is ``running`` while its worker holds its conversation's advisory lock (the
    runner takes it around every run, see :meth:`hub.store.sql.PgDatabase.lock`), and PostgreSQL
    lets a lock go when its worker's connection dies. So :meth:`recover` kills only the
    runs whose conversation's lock is free: the others are alive on another worker.
    """

    async def _orphaned(self, run: RunRecord) -> bool:
        try_lock = getattr(self.db, "try_lock", None)
        return True if try_lock is None else await try_lock(run.context)

    async def _kill(self, run: RunRecord) -> bool:
        # only if it is still running: a run that ended between the SELECT and the lock check
        # (its lock is free because it finished) keeps the state it ended with
        rows = await self.db.fetchall(
            "UPDATE runs SET state = ?, reason = ?, ended = ? WHERE id = ? AND state = ? RETURNING id",
            (str(run.state), run.reason, run.ended, run.id, str(RunState.RUNNING)),
        )
        return bool(rows)


async def collect_tree(store: RunStore, root_id: str, *, max_runs: int = 1000) -> dict[str, list[RunRecord]]:
    """Every descendant of ``root_id``: run id -> its child runs, oldest first (at most
    ``max_runs`` runs). ``hub trace`` draws it (hub/cli/_trace.py), the dashboard lists it (hub/http/dashboard/_pages.py)."""
    tree: dict[str, list[RunRecord]] = {}
    frontier, seen = [root_id], {root_id}
    count = 0
    while frontier and count < max_runs:
        parent = frontier.pop(0)
        kids = await store.list(parent_id=parent, limit=max_runs - count)
        kids = sorted((k for k in kids if k.id not in seen), key=lambda r: r.started)
        if kids:
            tree[parent] = kids
        for k in kids:
            seen.add(k.id)
            frontier.append(k.id)
        count += len(kids)
    return tree
