"""``max_posts_per_day`` holds across workers (issue 40, item 6): the count of posts is taken
with the store's compare-and-set, so two hubs sharing one database never post more than the
limit together. Two real hubs on one PostgreSQL schema, each with its own X client against
the fake; and the reservation itself raced from two store connections on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from test_twitter import numbered, routed, settings_for

from hub import Hub
from hub.platform import SendFailed, reserve_posts
from hub.store.sql import Database, PgDatabase, SqlMemoryStore
from hub.testing import temp_config
from hub.testing.postgres import temporary_schema
from hub.testing.twitter import FakeTwitter
from hub_twitter import POSTS_KEY, TwitterBot, extension


class MeetingStore(SqlMemoryStore):
    """The memory store of one worker, whose first read of the day's posts waits until the
    other worker has read them too: the interleaving in which a read-then-write loses."""

    def __init__(self, db: Any, meeting: asyncio.Barrier) -> None:
        super().__init__(db)
        self.meeting = meeting
        self.met = False

    async def _meet(self, key: str) -> None:
        if key == POSTS_KEY and not self.met:
            self.met = True
            await asyncio.wait_for(self.meeting.wait(), 10)

    async def get(self, key: str) -> Any | None:
        value = await super().get(key)
        await self._meet(key)
        return value

    async def get_versioned(self, key: str) -> tuple[Any | None, Any]:
        got = await super().get_versioned(key)
        await self._meet(key)
        return got


@asynccontextmanager
async def shared_databases(backend: str, tmp_path: Path) -> AsyncIterator[list[Any]]:
    """Two connections to one database, as two workers have."""
    async with AsyncExitStack() as stack:
        if backend == "sqlite":
            yield [await stack.enter_async_context(Database(tmp_path / "shared.db")) for _ in range(2)]
        else:
            url = await stack.enter_async_context(temporary_schema())
            yield [await stack.enter_async_context(PgDatabase(url)) for _ in range(2)]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_workers_together_post_no_more_than_the_daily_limit(backend: str, tmp_path: Path) -> None:
    meeting = asyncio.Barrier(2)
    async with FakeTwitter() as tw, shared_databases(backend, tmp_path) as dbs, AsyncExitStack() as stack:
        hubs = []
        for n, db in enumerate(dbs):
            settings = settings_for(tw, max_posts_per_day=1)
            x = TwitterBot(settings, client_factory=routed(tw), resolve=tw.resolve)
            hub = Hub(
                temp_config(tmp_path / f"worker{n}"),
                model=numbered(f"worker {n}"),
                memory=MeetingStore(db, meeting),
                load_extensions=False,
                extensions=[extension(settings, bot=x)],
            )
            hubs.append(await stack.enter_async_context(hub))
        results = await asyncio.gather(*(h.send("twitter:timeline:home", data="post today's news") for h in hubs))
        outputs = [o for r in results for o in r.outputs]
    assert len(tw.sent) == 1, "the workers together posted past max_posts_per_day"
    (refused,) = [o for o in outputs if not o.sent]
    assert "max_posts_per_day = 1 reached" in (refused.error or "")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_reservations_raced_from_two_connections_never_pass_the_limit(backend: str, tmp_path: Path) -> None:
    async with shared_databases(backend, tmp_path) as dbs:
        stores = [SqlMemoryStore(db) for db in dbs]
        for s in stores:
            await s.open()

        async def one(store: SqlMemoryStore, n: int) -> Any:
            try:
                return await reserve_posts(store, n, platform="twitter", limit=7, chat="home")
            except SendFailed as e:
                return e

        got = await asyncio.gather(*(one(stores[i % 2], 1 + i % 2) for i in range(12)))
        taken = sum(1 + i % 2 for i, r in enumerate(got) if not isinstance(r, Exception))
        stored = await stores[0].get(POSTS_KEY)
    assert taken == len(stored) <= 7 and taken >= 6, (taken, stored)
