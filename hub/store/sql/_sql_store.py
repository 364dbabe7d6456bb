"""What every SQL store shares: its database, opening it, and naming itself in its failures.

A SQL store runs the same statements on SQLite and PostgreSQL through `SqlDatabase`
(``?`` placeholders, translated for PostgreSQL by `PgDatabase`); where
PostgreSQL needs other SQL or behaviour, it has a class of its own (the workers' inbox and run
store). The database raises [`StoreError`][hub.StoreError] naming the table or the backend;
the store it passes through names itself and what it was doing (``inbox``, ``record``), so
that an operator reads which part of the hub failed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from ...errors import StoreError
from ._sqlite import SqlDatabase

__all__ = ["SqlStore"]

T = TypeVar("T")

_UNNAMED = frozenset({"open", "close"})  # the database's own words say it best there


class SqlStore:
    """The base of the SQL stores (beside the seam they implement): ``db`` is the database.

    A subclass gives its name as a class keyword (``class SqlInbox(SqlStore, InboxStore,
    store="inbox")``); a [`StoreError`][hub.StoreError] from any of its public coroutine methods then
    says so in `StoreError.during` (``"inbox.record"``).
    """

    store_name: ClassVar[str] = "store"

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()  # the tables are the migrations' (hub/store/sql/_migrations.py)

    def __init_subclass__(cls, *, store: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if store is not None:
            cls.store_name = store
        for attr, fn in list(vars(cls).items()):
            if not attr.startswith("_") and attr not in _UNNAMED and inspect.iscoroutinefunction(fn):
                setattr(cls, attr, _naming(fn, attr))


def _naming(fn: Callable[..., Awaitable[T]], operation: str) -> Callable[..., Awaitable[T]]:
    @functools.wraps(fn)
    async def method(self: SqlStore, *args: Any, **kwargs: Any) -> T:
        try:
            return await fn(self, *args, **kwargs)
        except StoreError as e:
            e.within(self.store_name, operation)
            raise

    return method
