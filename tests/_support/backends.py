"""The backends every store contract suite runs on: in memory, SQLite, PostgreSQL.

``sql_database(kind, tmp_path)`` opens the database a SQL store is built on: SQLite in
``tmp_path``, or PostgreSQL in a schema of its own (``hub.testing.postgres``), dropped
afterwards; skipped with the reason where PostgreSQL is not reachable, failed where CI is set.

``two_workers(kind, tmp_path, sql_store, memory_store)`` opens two workers' stores on one
database (two connections), ``on_own_loop(cm)`` enters such a context manager from a
synchronous test (hypothesis runs its examples there), and ``drive(machine, workers)`` runs a
hypothesis state machine against them. ``STORE_SETTINGS`` is what the store suites'
hypothesis settings share: no deadline (a database's latency is not the property), no health
check (one example can be a whole interleaving of workers).
``hostile_search_text(word)`` generates search text full of FTS operators and LIKE wildcards.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from hub.store.sql import Database, PgDatabase, SqlDatabase
from hub.testing.postgres import temporary_schema

BACKENDS = ["memory", "sqlite", "postgres"]
SQL_BACKENDS = ["sqlite", "postgres"]

STORE_SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck))
"""The store suites' hypothesis settings; each adds its ``max_examples`` (and
``stateful_step_count``): ``settings(STORE_SETTINGS, max_examples=20)``."""


class _Store(Protocol):
    async def open(self) -> None: ...


S = TypeVar("S", bound=_Store)
T = TypeVar("T")


@asynccontextmanager
async def sql_database(kind: str, tmp_path: Path, **options: Any) -> AsyncIterator[SqlDatabase]:
    """The database of backend ``kind``, open; ``options`` go to its constructor."""
    if kind == "sqlite":
        async with Database(tmp_path / "hub.db", **options) as db:
            yield db
        return
    assert kind == "postgres", kind
    async with temporary_schema() as url:
        async with PgDatabase(url, **options) as pg:
            yield pg


@asynccontextmanager
async def two_workers(
    kind: str, tmp_path: Path, sql_store: Callable[[SqlDatabase], S], memory_store: Callable[[], S]
) -> AsyncIterator[tuple[S, S]]:
    """Two workers' stores on backend ``kind``, opened: ``sql_store`` on two connections to one
    database (SQLite's file in ``tmp_path``, or one PostgreSQL schema), or in memory, where a
    process has one store, ``memory_store()`` twice the same."""
    if kind == "memory":
        store = memory_store()
        await store.open()
        yield store, store
        return
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(sql_database(kind, tmp_path))
        second: SqlDatabase
        if isinstance(first, PgDatabase):
            second = await stack.enter_async_context(PgDatabase(first.url))
        else:
            second = await stack.enter_async_context(Database(tmp_path / "hub.db"))
        stores = (sql_store(first), sql_store(second))
        for s in stores:
            await s.open()
        yield stores


@contextmanager
def on_own_loop(cm: AbstractAsyncContextManager[T]) -> Iterator[tuple[asyncio.AbstractEventLoop, T]]:
    """Enter ``cm`` on a new event loop and yield the loop and what ``cm`` gave: for a
    synchronous test (hypothesis's ``@given`` and state machines) that runs coroutines on the
    loop with ``loop.run_until_complete``. ``cm`` is left, and the loop closed, afterwards."""
    loop = asyncio.new_event_loop()
    try:
        value = loop.run_until_complete(cm.__aenter__())
        try:
            yield loop, value
        except BaseException as e:
            if not loop.run_until_complete(cm.__aexit__(type(e), e, e.__traceback__)):
                raise
        else:
            loop.run_until_complete(cm.__aexit__(None, None, None))
    finally:
        loop.close()


def drive(
    machine: type[RuleBasedStateMachine], workers: AbstractAsyncContextManager[Any], *, max_examples: int, steps: int
) -> None:
    """Run the state machine ``machine`` (hypothesis) on the stores ``workers`` opens (a
    ``two_workers(...)``), on a loop of its own: a subclass of it is given ``loop`` and
    ``workers`` as class attributes, for its rules to run coroutines on."""
    with on_own_loop(workers) as (loop, opened):
        on_these = type(machine.__name__, (machine,), {"loop": loop, "workers": opened})
        run_state_machine_as_test(
            on_these, settings=settings(STORE_SETTINGS, max_examples=max_examples, stateful_step_count=steps)
        )


_SYNTAX = [
    # quotes, LIKE's wildcards, prefix searches
    '"', "'", "''", '"unterminated', "%", "_", "*", "x*", "a_b", "50%",
    # FTS5's and tsquery's operators, and column filters
    "NEAR", "AND", "OR", "NOT", "(", ")", ":", "col:x", "^", "-", "!", "&", "|", "<->", "\\",
]  # fmt: skip


def hostile_search_text(word: str, *, max_size: int = 40) -> st.SearchStrategy[str]:
    """Search text as a person might type it, or built to break a query: any text, or words of
    FTS5's and tsquery's syntax, LIKE's wildcards and quotes, with ``word`` (one a test stores)
    among them."""
    return st.one_of(
        st.text(max_size=max_size),
        st.lists(st.sampled_from([*_SYNTAX, word]), max_size=8).map(" ".join),
    )
