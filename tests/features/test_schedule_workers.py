"""Schedules across workers: three hubs on one store fire each tick once (an atomic claim
of the tick in the ScheduleStore), a worker that stops leaves the others firing, and a tick
claimed by a worker that died before its input was recorded is sent once by the next."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from pathlib import Path

import pytest

from hub import Hub, HubConfig, ScriptedModel
from hub.config import ScheduleSection
from hub.features import tick_id
from hub.logs import InputLog
from hub.store import InMemoryScheduleStore, ScheduleStore
from hub.store.sql import Database, PgDatabase, SqlScheduleStore
from hub.testing.postgres import temporary_schema
from tests._support.chat import Said, reply_to_input, test_extension

T0 = 1_772_434_800.0  # 2026-03-02 07:00 UTC


class SharedClock:
    """One fake wall clock for several schedulers: ``advance`` wakes the sleepers one by one
    in time order and waits until every scheduler sleeps again before the next."""

    def __init__(self, now: float) -> None:
        self.now = now
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._changed = asyncio.Event()

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        entry = (self.now + seconds, next(self._seq), fut)
        heapq.heappush(self._sleepers, entry)
        self._changed.set()
        try:
            await fut
        except asyncio.CancelledError:  # a stopped scheduler sleeps no more
            self._sleepers.remove(entry)
            heapq.heapify(self._sleepers)
            raise

    async def settle(self, n: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self._sleepers) < n:
                self._changed.clear()
                await self._changed.wait()

    async def advance(self, seconds: float, *, sleepers: int) -> None:
        target = self.now + seconds
        await self.settle(sleepers)
        while self._sleepers and self._sleepers[0][0] <= target:
            at, _, fut = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            fut.set_result(None)
            await self.settle(sleepers)
        self.now = target


def worker_config(tmp_path: Path, *, url: str = "", name: str = "") -> HubConfig:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)  # one database: the workers share the store
    if url:  # PostgreSQL: the shared store, and a data dir of its own per worker
        cfg.store.url = url
        cfg.hub.data_dir = str(tmp_path / name)
    cfg.hub.contexts_dir = str(tmp_path)
    cfg.hub.shutdown_grace = 0.0
    cfg.memory.episodes = False
    cfg.schedules = {"tick": ScheduleSection(context="test:chat:room", every="1h", input="write the post")}
    return cfg


def fires(hub: Hub) -> int:
    return int(hub.metrics.registry.get_sample_value("hub_schedule_fires_total", {"schedule": "tick"}) or 0)


async def schedule_inputs(hub: Hub) -> list[str]:
    rows = await hub._db.fetchall(  # type: ignore[union-attr]
        "SELECT platform_id FROM inbox WHERE platform_id LIKE 'schedule:%' ORDER BY received"
    )
    return [r[0] for r in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_three_workers_fire_each_tick_once_and_survive_one_stopping(
    tmp_path: Path,
    said: Said,
    backend: str,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(temporary_schema()) if backend == "postgres" else ""
        await _three_workers_fire_each_tick_once(tmp_path, said, url)


async def _three_workers_fire_each_tick_once(tmp_path: Path, said: Said, url: str) -> None:
    clock = SharedClock(T0)
    hubs = []
    for i in range(3):
        hub = Hub(
            worker_config(tmp_path, url=url, name=f"w{i}"),
            model=ScriptedModel(reply_to_input),
            load_extensions=False,
            extensions=[test_extension(said)],
        )
        hub.scheduler.clock, hub.scheduler.sleep = clock.time, clock.sleep
        hubs.append(hub)
    async with contextlib.AsyncExitStack() as stack:
        for hub in hubs:
            await stack.enter_async_context(hub)
        for tick in range(1, 4):
            await clock.advance(3600, sleepers=3)
            assert sum(fires(h) for h in hubs) == tick
            # answered before the next tick: two ticks' inputs that wait together may share
            # one reply (one run takes both), and each tick's own reply is what is counted
            await said.wait_for(tick)
        assert await schedule_inputs(hubs[0]) == [tick_id("tick", T0 + 3600 * i) for i in range(1, 4)]

        # the worker that fired last stops; the other two go on, still once per tick
        last = max(hubs, key=lambda h: (fires(h), id(h)))
        await last.stop()
        alive = [h for h in hubs if h is not last]
        before = sum(fires(h) for h in alive)
        for _ in range(2):
            await clock.advance(3600, sleepers=2)
        assert sum(fires(h) for h in alive) == before + 2
        # the two ticks fired after the stop are answered (two inputs that wait together
        # may share one reply)
        later = [tick_id("tick", T0 + 3600 * i) for i in (4, 5)]

        async def answered() -> bool:
            rows = await alive[0]._db.fetchall(  # type: ignore[union-attr]
                "SELECT COUNT(*) FROM inbox WHERE platform_id IN (?, ?) AND state = 'done'", tuple(later)
            )
            return rows[0][0] == 2

        async with asyncio.timeout(10):
            while not await answered():
                await asyncio.sleep(0.02)
        assert len(await schedule_inputs(alive[0])) == 5
        assert 4 <= len(said.items) <= 5


async def test_a_claimed_tick_whose_worker_died_is_sent_once_by_the_next(tmp_path: Path, said: Said) -> None:
    # a worker claimed the 08:00 tick and died before the input was recorded
    db = Database(tmp_path / "hub.db")
    store = SqlScheduleStore(db)
    await store.open()
    await store.start("tick", T0)
    assert await store.claim("tick", T0, T0 + 3600)
    await db.close()

    clock = SharedClock(T0 + 3600 + 5)
    hub = Hub(
        worker_config(tmp_path),
        model=ScriptedModel(reply_to_input),
        load_extensions=False,
        extensions=[test_extension(said)],
    )
    hub.scheduler.clock, hub.scheduler.sleep = clock.time, clock.sleep
    async with hub:
        await clock.settle(1)
        assert await said.wait_for(1) == [("test:chat:room", "echo: write the post")]
        assert await schedule_inputs(hub) == [tick_id("tick", T0 + 3600)]
        tick = await hub.scheduler.store.tick("tick")
        assert tick is not None and tick.done and tick.last == T0 + 3600
        await clock.advance(3600, sleepers=1)  # and the clock goes on from the claimed tick
        assert await schedule_inputs(hub) == [tick_id("tick", T0 + 3600), tick_id("tick", T0 + 7200)]


async def test_a_tick_claimed_by_a_worker_that_died_is_sent_once_by_the_live_ones(tmp_path: Path, said: Said) -> None:
    clock = SharedClock(T0)
    hubs = [
        Hub(
            worker_config(tmp_path),
            model=ScriptedModel(reply_to_input),
            load_extensions=False,
            extensions=[test_extension(said)],
        )
        for _ in range(2)
    ]
    for hub in hubs:
        hub.scheduler.clock, hub.scheduler.sleep = clock.time, clock.sleep
    async with contextlib.AsyncExitStack() as stack:
        for hub in hubs:
            await stack.enter_async_context(hub)
        await clock.settle(2)
        # a third worker claims the 08:00 tick a moment early and dies before sending it
        dead = SqlScheduleStore(Database(tmp_path / "hub.db"))
        await dead.open()
        assert await dead.claim("tick", T0, T0 + 3600)
        await dead.db.close()
        await clock.advance(3600, sleepers=2)
        assert sum(fires(h) for h in hubs) == 1  # one of the two sent it; the inbox refused the other
        assert await said.wait_for(1) == [("test:chat:room", "echo: write the post")]
        assert await schedule_inputs(hubs[0]) == [tick_id("tick", T0 + 3600)]
        assert (await hubs[0].scheduler.store.tick("tick")).done  # type: ignore[union-attr]
        await clock.advance(3600, sleepers=2)  # and the next tick is fired as usual
        assert sum(fires(h) for h in hubs) == 2


async def test_a_claimed_tick_already_recorded_is_not_sent_again(tmp_path: Path, said: Said) -> None:
    # the worker died after the input was recorded, before it marked the claim done
    db = Database(tmp_path / "hub.db")
    store = SqlScheduleStore(db)
    await store.open()
    await store.start("tick", T0)
    assert await store.claim("tick", T0, T0 + 3600)
    await db.close()
    clock = SharedClock(T0 + 3600 + 5)
    hub = Hub(
        worker_config(tmp_path),
        model=ScriptedModel(reply_to_input),
        load_extensions=False,
        extensions=[test_extension(said)],
    )
    hub.scheduler.clock, hub.scheduler.sleep = clock.time, clock.sleep
    hub.scheduler.enabled = False  # record the input as the dead worker did, then arm
    async with hub:
        entry = InputLog(type="schedule", content="write the post", platform_id=tick_id("tick", T0 + 3600))
        assert await hub.inbox.record("test:chat:room", entry)
        await hub.inbox.done([entry.id])
        await hub.scheduler.store.open()
        await hub.scheduler.tick()
        assert fires(hub) == 0
        assert await schedule_inputs(hub) == [tick_id("tick", T0 + 3600)]
        assert (await hub.scheduler.store.tick("tick")).done  # type: ignore[union-attr]


# --- the store's claim, every implementation ---------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path):
    """Three workers' handles on one schedule store."""
    if request.param == "memory":
        shared = InMemoryScheduleStore()
        yield [shared] * 3
        return
    if request.param == "postgres":  # three workers' connections on one schema
        async with temporary_schema() as url:
            pgs = [await PgDatabase(url, pool_size=2).open() for _ in range(3)]
            pg_handles: list[ScheduleStore] = [SqlScheduleStore(db) for db in pgs]
            for h in pg_handles:
                await h.open()
            yield pg_handles
            for db in pgs:
                await db.close()
        return
    dbs = [Database(tmp_path / "hub.db") for _ in range(3)]
    handles: list[ScheduleStore] = [SqlScheduleStore(db) for db in dbs]
    for h in handles:
        await h.open()
    yield handles
    for db in dbs:
        await db.close()


async def test_racing_claims_of_one_tick_have_one_winner(stores: list[ScheduleStore]) -> None:
    first = await stores[0].start("s", 100.0)
    assert first.last == 100.0 and first.done
    assert (await stores[1].start("s", 150.0)).last == 100.0  # another worker's start stands
    won = await asyncio.gather(*(stores[i % 3].claim("s", 100.0, 200.0) for i in range(9)))
    assert won.count(True) == 1
    tick = await stores[2].tick("s")
    assert tick is not None and tick.last == 200.0 and not tick.done
    assert not await stores[1].claim("s", 100.0, 300.0)  # stale expectation
    await stores[1].finish("s", 150.0)  # not the last tick: nothing changes
    assert not (await stores[0].tick("s")).done  # type: ignore[union-attr]
    await stores[1].finish("s", 200.0)
    assert (await stores[0].tick("s")).done  # type: ignore[union-attr]
    assert await stores[0].last("s") == 200.0


async def test_first_claims_of_a_new_schedule_have_one_winner(stores: list[ScheduleStore]) -> None:
    won = await asyncio.gather(*(stores[i % 3].claim("new", None, 50.0 + i) for i in range(6)))
    assert won.count(True) == 1
    assert await stores[0].last("new") == 50.0 + won.index(True)
