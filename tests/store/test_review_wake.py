"""An approval wakes the worker that posts it, instead of waiting for its poll: through the
store object in this process (the dashboard, ``POST /reviews/{id}``), and on PostgreSQL from
another connection (``hub review approve`` in another process, another worker) by
LISTEN/NOTIFY, again after the listening connection was cut. The queues here poll once an
hour, so only a wake-up can post within the test."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from hub.platform import ReviewQueue
from hub.store import InMemoryReviewStore, Review, ReviewStore
from hub.store.sql import SqlReviewStore
from tests._support.backends import two_workers
from tests.store.test_reviews import held

HOUR = 3600.0


class Posted:
    def __init__(self) -> None:
        self.ids: list[str] = []
        self.event = asyncio.Event()

    async def __call__(self, review: Review) -> dict[str, str]:
        self.ids.append(review.id)
        self.event.set()
        return {"id": review.id}

    async def wait(self, n: int) -> None:
        async with asyncio.timeout(20):
            while len(self.ids) < n:
                self.event.clear()
                await self.event.wait()


async def _running(queue: ReviewQueue) -> asyncio.Task[None]:
    task = asyncio.create_task(queue.run())
    async with asyncio.timeout(10):  # its first look is done: it waits (listening where it can)
        while queue.looks < 1:
            await asyncio.sleep(0.01)
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_an_approval_in_this_process_wakes_the_queue(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlReviewStore, InMemoryReviewStore) as (store, _):
        posted = Posted()
        queue = ReviewQueue(store, "twitter", expiry=HOUR, poster=posted, poll=HOUR)
        task = await _running(queue)
        try:
            await store.add(held("w1"))
            await store.decide("w1", approve=True)
            await posted.wait(1)
        finally:
            await _stop(task)
        done = await store.get("w1")
        assert posted.ids == ["w1"] and done is not None and done.state == "posted"


async def test_sqlite_cannot_tell_other_processes_so_they_poll(tmp_path: Path) -> None:
    async with two_workers("sqlite", tmp_path, SqlReviewStore, InMemoryReviewStore) as (first, _):
        assert await first.listen(lambda platform: None) is None


async def test_on_postgres_an_approval_on_another_connection_wakes_the_queue_even_after_a_cut(
    tmp_path: Path,
) -> None:
    async with two_workers("postgres", tmp_path, SqlReviewStore, InMemoryReviewStore) as (worker, operator):
        posted = Posted()
        queue = ReviewQueue(worker, "mastodon", expiry=HOUR, poster=posted, poll=HOUR)
        other = ReviewQueue(worker, "bluesky", expiry=HOUR, poster=Posted(), poll=HOUR)
        tasks = [await _running(queue), await _running(other)]
        try:
            assert queue.listening is not None and queue.listening.alive
            for rid in ("p1", "p2"):
                await worker.add(_held(rid, "mastodon"))
            await operator.decide("p1", approve=True)  # another connection: as `hub review approve`
            await posted.wait(1)

            # the listening connection is cut (a server restart, a proxy): the queue listens again
            first = queue.listening
            assert first is not None
            pid = first.conn.get_server_pid()  # type: ignore[attr-defined]
            await _terminate(operator, pid)
            async with asyncio.timeout(10):
                while queue.listening is first or queue.listening is None or not queue.listening.alive:
                    await asyncio.sleep(0.01)
            await operator.decide("p2", approve=True)
            await posted.wait(2)
        finally:
            for task in tasks:
                await _stop(task)
        assert posted.ids == ["p1", "p2"]


def _held(rid: str, platform: str) -> Review:
    now = time.time()
    return Review(rid, platform, f"{platform}:reply", "c1", "hello", "pending", now, now + HOUR, in_reply_to="9")


async def _terminate(store: ReviewStore, pid: int) -> None:
    await store.db.fetchone("SELECT pg_terminate_backend(?)", (pid,))  # type: ignore[attr-defined]
