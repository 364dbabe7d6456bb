"""The stores' SQL as PostgreSQL takes it, for `hub.store.sql`: ``?`` and ``?N`` placeholders
as ``$N``, values PostgreSQL accepts (text without NUL), URLs without their password, the
advisory lock keys, and which failures are the connection's (the batch is retried on another
connection, or fails whole) rather than one statement's (only that write fails).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._values import _clean_params

__all__ = ["is_postgres_url", "mask_url", "lock_key"]

_TABLE = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"'[^']*'|\"[^\"]*\"|\?(\d*)")


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def mask_url(url: str) -> str:
    """``url`` without its password, for messages and ``hub check``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


@lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """The stores' SQL with ``?``/``?N`` as ``$N`` (quoted text left alone)."""
    counter = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal counter
        if not m.group(0).startswith("?"):
            return m.group(0)
        if m.group(1):
            return f"${m.group(1)}"
        counter += 1
        return f"${counter}"

    return _PLACEHOLDER.sub(sub, sql)


def _pg_params(params: Sequence[Any] | None) -> Sequence[Any]:
    cleaned = _clean_params(params) or ()
    if not any(isinstance(p, str) and "\x00" in p for p in cleaned):
        return cleaned
    return [p.replace("\x00", "\ufffd") if isinstance(p, str) else p for p in cleaned]


def _table(sql: str) -> str:
    m = _TABLE.match(sql)
    return m.group(1) if m else "?"


def lock_key(namespace: str, name: str) -> int:
    """A stable signed 64-bit advisory lock key for ``name`` within ``namespace`` (the schema,
    so two hubs on two schemas of one database never share a lock)."""
    digest = hashlib.blake2b(f"{namespace}\x00{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _is_outage(e: BaseException) -> bool:
    """The connection or the server failed (the whole batch fails), not one statement."""
    import asyncpg

    if isinstance(e, (OSError, asyncio.TimeoutError, asyncpg.PostgresConnectionError, asyncpg.InternalClientError)):
        return True  # (InternalClientError: a connection left mid-operation by its death)
    if isinstance(e, asyncpg.InterfaceError) and not isinstance(e, asyncpg.DataError):
        return True  # the connection is closed or in a bad state
    return isinstance(e, (asyncpg.AdminShutdownError, asyncpg.CannotConnectNowError, asyncpg.CrashShutdownError))


def _can_resend(query: str, e: BaseException) -> bool:
    """Whether a query that failed with ``e`` can be sent again on another connection: a
    read that lost its connection, or any query whose connection was dead before it was
    sent. A write with RETURNING (an inbox claim) cut off mid-way may have landed: not resent."""
    import asyncpg

    if not _is_outage(e) or isinstance(e, asyncio.TimeoutError):  # a slow server is not helped by more
        return False
    if query.lstrip()[:6].upper() == "SELECT":
        return True
    return isinstance(e, (OSError, asyncpg.CannotConnectNowError)) or (
        isinstance(e, asyncpg.InterfaceError)
        and not isinstance(e, asyncpg.ConnectionDoesNotExistError)
        and "closed" in str(e)
    )


async def _reset(conn: Any) -> None:
    """What a read or write connection needs when it goes back to the pool: no transaction
    left open. (asyncpg's default also unlistens, closes cursors and resets settings, which
    these connections never change: a round trip per use saved. Its ``pg_advisory_unlock_all()``
    is not needed either: the only session lock taken on them is `PgDatabase.try_lock()`'s,
    released in the statement that takes it, and a connection whose check was cut short is
    closed, not given back.)"""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


class _Unsent(Exception):
    """The connection failed before the batch's COMMIT was sent: nothing landed, retry it."""

    def __init__(self, original: BaseException) -> None:
        self.original = original
