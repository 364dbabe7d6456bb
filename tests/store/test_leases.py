"""Leases (hub/store/_leases.py): one contract run against every LeaseStore, and the LeaseKeeper.

The ``leases`` fixture gives a factory: each call is another worker's handle on the same
store (the same object in memory; another connection to the same SQLite file), all on
one fake clock, so races and expiry are tested the way workers meet them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from hub import Hub, HubConfig, RunError, StoreError
from hub.store import (
    InMemoryLeaseStore,
    Lease,
    LeaseKeeper,
    LeaseStore,
    worker_id,
)
from hub.store.sql import Database, PgDatabase, SqlDatabase, SqlLeaseStore
from hub.testing.postgres import temporary_schema
from tests._support.backends import BACKENDS


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
async def handles(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[Callable[[], LeaseStore]]:
    """Each call: one more worker's handle on the shared store (open it with ``opened``):
    the same object in memory, another connection to the SQLite file, another pool on the
    PostgreSQL schema."""
    shared = InMemoryLeaseStore(clock=clock)
    dbs: list[SqlDatabase] = []
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(temporary_schema()) if request.param == "postgres" else ""

        def make() -> LeaseStore:
            if request.param == "memory":
                return shared
            if request.param == "sqlite":
                dbs.append(Database(tmp_path / "hub.db"))
                return SqlLeaseStore(dbs[-1], clock=clock)
            dbs.append(PgDatabase(url))
            return SqlLeaseStore(dbs[-1], clock=clock)

        yield make
        for db in dbs:
            await db.close()


async def opened(store: LeaseStore) -> LeaseStore:
    await store.open()
    return store


async def test_a_free_lease_is_taken_and_then_refused_to_others(handles, clock: Clock) -> None:
    a, b = await opened(handles()), await opened(handles())
    lease = await a.acquire("telegram:poll:1", "worker-a", 30)
    assert lease == Lease("telegram:poll:1", "worker-a", clock.now + 30, 1)
    assert await b.acquire("telegram:poll:1", "worker-b", 30) is None
    assert await b.holder("telegram:poll:1") == lease
    assert await b.holder("another") is None
    # the holder acquiring again extends its holding, same token
    clock.now += 10
    again = await a.acquire("telegram:poll:1", "worker-a", 30)
    assert again == Lease("telegram:poll:1", "worker-a", clock.now + 30, 1)


async def test_an_expired_lease_goes_to_the_next_worker_with_a_new_token(handles, clock: Clock) -> None:
    a, b = await opened(handles()), await opened(handles())
    await a.acquire("x:poll", "worker-a", 30)
    clock.now += 29.9
    assert await b.acquire("x:poll", "worker-b", 30) is None
    clock.now += 0.1  # expired exactly now
    assert await b.holder("x:poll") is None
    taken = await b.acquire("x:poll", "worker-b", 30)
    assert taken is not None and taken.holder == "worker-b" and taken.token == 2
    # the old holder cannot renew, nor release, what it lost
    assert await a.renew("x:poll", "worker-a", 30) is None
    assert await a.release("x:poll", "worker-a") is False
    assert (await a.holder("x:poll")) == taken


async def test_renew_extends_only_a_live_holding_of_ones_own(handles, clock: Clock) -> None:
    a = await opened(handles())
    assert await a.renew("l", "worker-a", 30) is None  # never taken
    await a.acquire("l", "worker-a", 30)
    clock.now += 20
    renewed = await a.renew("l", "worker-a", 30)
    assert renewed == Lease("l", "worker-a", clock.now + 30, 1)
    assert await a.renew("l", "worker-b", 30) is None
    clock.now += 31
    assert await a.renew("l", "worker-a", 30) is None  # expired: acquire it again instead
    back = await a.acquire("l", "worker-a", 30)
    assert back is not None and back.token == 2  # a new holding, even by the same worker


async def test_release_frees_the_lease_at_once_and_tokens_keep_growing(handles, clock: Clock) -> None:
    a, b = await opened(handles()), await opened(handles())
    await a.acquire("l", "worker-a", 30)
    assert await b.release("l", "worker-b") is False  # not theirs
    assert await a.release("l", "worker-a") is True
    assert await a.release("l", "worker-a") is False  # released already
    assert await a.holder("l") is None
    taken = await b.acquire("l", "worker-b", 30)
    assert taken is not None and taken.token == 2


async def test_workers_racing_for_a_lease_leave_exactly_one_holder(handles) -> None:
    stores = [await opened(handles()) for _ in range(3)]
    results = await asyncio.gather(*(stores[i % 3].acquire("race", f"worker-{i}", 30) for i in range(12)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert await stores[0].holder("race") == winners[0]


async def test_bad_arguments_are_named(handles) -> None:
    a = await opened(handles())
    with pytest.raises(RunError, match="needs a name"):
        await a.acquire("", "w", 30)
    with pytest.raises(RunError, match="holder must not be empty"):
        await a.acquire("l", "", 30)
    with pytest.raises(RunError, match="ttl must be positive"):
        await a.acquire("l", "w", 0)


def test_worker_ids_differ_within_one_process() -> None:
    assert worker_id() != worker_id()


# --- the keeper -------------------------------------------------------------------------


class Work:
    """A piece of work that says when it runs and when it was stopped."""

    def __init__(self) -> None:
        self.running = asyncio.Event()
        self.stopped = asyncio.Event()
        self.runs = 0

    async def __call__(self) -> None:
        self.runs += 1
        self.running.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.running.clear()
            self.stopped.set()


class CountingStore(InMemoryLeaseStore):
    """Counts each holder's attempts to acquire, so a test can wait for a refused one."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.tries: dict[str, int] = {}
        self.tried = asyncio.Event()

    async def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        self.tries[holder] = self.tries.get(holder, 0) + 1
        self.tried.set()
        return await super().acquire(name, holder, ttl)


async def test_only_the_holder_works_and_the_other_takes_over_when_it_stops(clock: Clock) -> None:
    store = CountingStore(clock)
    a = LeaseKeeper(store, "telegram:poll:1", "worker-a", ttl=3, retry=0.01)
    b = LeaseKeeper(store, "telegram:poll:1", "worker-b", ttl=3, retry=0.01)
    work_a, work_b = Work(), Work()
    task_a = asyncio.create_task(a.hold(work_a))
    await asyncio.wait_for(work_a.running.wait(), 2)
    task_b = asyncio.create_task(b.hold(work_b))
    # b stands by: wait until it was refused three times, then look
    async with asyncio.timeout(2):
        while store.tries.get("worker-b", 0) < 3:
            store.tried.clear()
            await store.tried.wait()
    assert work_b.runs == 0 and not b.held and a.held
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
    assert work_a.stopped.is_set() and not a.held
    await asyncio.wait_for(work_b.running.wait(), 2)
    assert (await store.holder("telegram:poll:1")).holder == "worker-b"  # type: ignore[union-attr]
    task_b.cancel()
    await asyncio.gather(task_b, return_exceptions=True)
    assert await store.holder("telegram:poll:1") is None  # released on the way out


async def test_a_keeper_that_loses_its_lease_stops_its_work_and_waits(clock: Clock) -> None:
    store = InMemoryLeaseStore(clock=clock)
    a = LeaseKeeper(store, "x:poll", "worker-a", ttl=0.15, retry=0.01)
    work = Work()
    task = asyncio.create_task(a.hold(work))
    await asyncio.wait_for(work.running.wait(), 2)
    # the worker stalled past its expiry (the fake clock jumps) and another took the lease
    clock.now += 1
    assert await store.acquire("x:poll", "worker-b", 3600) is not None
    await asyncio.wait_for(work.stopped.wait(), 2)  # cancelled at the next renewal
    assert not a.held and work.runs == 1
    # once the other gives it up, the keeper holds it again and the work restarts
    work.stopped.clear()
    await store.release("x:poll", "worker-b")
    await asyncio.wait_for(work.running.wait(), 2)
    assert work.runs == 2
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_work_that_fails_releases_the_lease_and_raises(clock: Clock) -> None:
    store = InMemoryLeaseStore(clock=clock)
    keeper = LeaseKeeper(store, "l", "worker-a", ttl=3)

    async def broken() -> None:
        raise ValueError("the poller broke")

    with pytest.raises(ValueError, match="the poller broke"):
        await keeper.hold(broken)
    assert await store.holder("l") is None


async def test_two_hubs_on_one_database_share_leases(tmp_path: Path) -> None:
    configs = []
    for _ in range(2):
        cfg = HubConfig()
        cfg.hub.data_dir = str(tmp_path)
        cfg.hub.contexts_dir = str(tmp_path)
        cfg.memory.episodes = False
        configs.append(cfg)
    async with Hub(configs[0], load_extensions=False) as one, Hub(configs[1], load_extensions=False) as two:
        assert one.worker != two.worker
        a, b = one.lease("telegram:poll:1"), two.lease("telegram:poll:1")
        assert (await a.store.acquire(a.name, a.holder, 30)) is not None
        assert (await b.store.acquire(b.name, b.holder, 30)) is None
        assert (await two.leases.holder("telegram:poll:1")).holder == one.worker  # type: ignore[union-attr]


class FlakyStore(InMemoryLeaseStore):
    """Every write fails (a store outage) while ``down``; counts the failed renewals."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.down = False
        self.failed = 0
        self.tried = asyncio.Event()

    async def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        if self.down:
            raise StoreError("the lease store is down (injected)", store="leases", operation="write")
        return await super().acquire(name, holder, ttl)

    async def renew(self, name: str, holder: str, ttl: float) -> Lease | None:
        if self.down:
            self.failed += 1
            self.tried.set()
            raise StoreError("the lease store is down (injected)", store="leases", operation="write")
        return await super().renew(name, holder, ttl)


async def test_an_unconfirmed_renewal_keeps_the_work_until_the_lease_would_expire(clock: Clock) -> None:
    store = FlakyStore(clock)
    keeper = LeaseKeeper(store, "l", "worker-a", ttl=0.3, retry=0.05)
    work = Work()
    task = asyncio.create_task(keeper.hold(work))
    await asyncio.wait_for(work.running.wait(), 2)
    store.down = True
    async with asyncio.timeout(2):
        while store.failed < 2:  # two renewals failed, the lease not yet near its expiry
            store.tried.clear()
            await store.tried.wait()
    assert keeper.held and work.running.is_set()
    clock.now += 0.25  # from now on no renewal could be confirmed before the lease expires
    await asyncio.wait_for(work.stopped.wait(), 2)
    assert not keeper.held
    # the store is back: the keeper takes the (expired) lease again and the work restarts
    store.down = False
    clock.now += 1
    work.stopped.clear()
    await asyncio.wait_for(work.running.wait(), 2)
    assert work.runs == 2
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
