"""The group commit's transaction, run in aiosqlite's thread for `hub.store.sql.Database`:
a batch committed as one transaction, or, when a statement fails, applied again with each
write in a savepoint of its own so only the culprit fails; ``SQLITE_BUSY`` raised as
`_Busy` for the writer to retry with backoff.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

_Write = tuple[str, Sequence[Any] | None, "asyncio.Future[None] | None"]
_BARRIER = ""  # queued by flush(): resolves once everything queued before it is committed

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def _is_busy(e: BaseException) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    return isinstance(e, sqlite3.OperationalError) and "locked" in str(e)


class _Busy(Exception):
    """The write lock could not be taken within busy_timeout (retried with backoff)."""

    def __init__(self, original: sqlite3.Error) -> None:
        self.original = original


def _commit_sync(raw: sqlite3.Connection, writes: list[tuple[str, Sequence[Any] | None]]) -> list[BaseException | None]:
    """Runs in aiosqlite's thread. The fast path commits the batch as one transaction; if a
    statement fails, the batch is applied again with each write in a savepoint, so only the
    writes that fail are left out. A batch of flushes alone (nothing written since the last
    commit) commits nothing: no transaction, no lock taken."""
    if all(sql == _BARRIER for sql, _ in writes):
        return [None] * len(writes)
    try:
        _begin(raw)
    except sqlite3.Error as e:
        if _is_busy(e):
            raise _Busy(e) from e
        raise
    try:
        for sql, group in _group(writes):
            if len(group) == 1:
                raw.execute(sql, group[0] or ())
            else:
                raw.executemany(sql, [p or () for p in group])
        raw.execute("COMMIT")
        return [None] * len(writes)
    except Exception as e:  # a bad statement or value (a constraint, an int too large): find it
        _rollback(raw)
        if _is_busy(e):
            raise _Busy(e) from e  # type: ignore[arg-type]
    except BaseException:
        _rollback(raw)
        raise
    return _commit_each(raw, writes)


def _commit_each(raw: sqlite3.Connection, writes: list[tuple[str, Sequence[Any] | None]]) -> list[BaseException | None]:
    errors: list[BaseException | None] = [None] * len(writes)
    try:
        _begin(raw)
    except sqlite3.Error as e:
        if _is_busy(e):
            raise _Busy(e) from e
        raise
    try:
        for i, (sql, params) in enumerate(writes):
            if sql == _BARRIER:
                continue
            raw.execute("SAVEPOINT w")
            try:
                raw.execute(sql, params or ())
            except Exception as e:
                if _is_busy(e):
                    raise
                errors[i] = e
                raw.execute("ROLLBACK TO w")
            raw.execute("RELEASE w")
        raw.execute("COMMIT")
    except sqlite3.Error as e:
        _rollback(raw)
        if _is_busy(e):
            raise _Busy(e) from e
        raise
    except BaseException:
        _rollback(raw)
        raise
    return errors


def _begin(raw: sqlite3.Connection) -> None:
    raw.execute("BEGIN IMMEDIATE")  # take the write lock now, so the busy handler applies


def _rollback(raw: sqlite3.Connection) -> None:
    if raw.in_transaction:
        raw.execute("ROLLBACK")


def _group(batch: Iterable[tuple[str, Sequence[Any] | None]]) -> list[tuple[str, list[Sequence[Any] | None]]]:
    """Consecutive writes with the same SQL, grouped so each group is one executemany."""
    groups: list[tuple[str, list[Sequence[Any] | None]]] = []
    for sql, params in batch:
        if sql == _BARRIER:  # a flush: nothing to execute, its future resolves with the batch
            continue
        if groups and groups[-1][0] == sql:
            groups[-1][1].append(params)
        else:
            groups.append((sql, [params]))
    return groups
