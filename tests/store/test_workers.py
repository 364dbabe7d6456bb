"""Several workers on one PostgreSQL database (``[store] url``): a hub answers end to end on
it; a conversation runs on one worker at a time (an advisory lock that the server lets go
when its holder's connection dies); inbox rows are claimed once, and a dead worker's are
taken over when its lease expires."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from hub import HubConfig, ScriptedModel
from hub.logs import InputLog
from hub.store import RunRecord, RunState
from hub.store.sql import PgDatabase, PostgresInbox, PostgresRunStore
from hub.testing.postgres import temporary_schema


async def wait_for(check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, what: str = "") -> None:
    """Wait until ``check()`` holds (polling the database's state, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.02)


def _config(config: HubConfig, tmp_path: Path, url: str, name: str) -> HubConfig:
    cfg = config.model_copy(deep=True)
    cfg.hub.data_dir = str(tmp_path / name)
    cfg.store.url = url
    return cfg


class Gated(ScriptedModel):
    """Answers "ok" once ``gate`` is set; says when a run reached it (``entered``)."""

    def __init__(self, name: str, order: list[str]) -> None:
        super().__init__(default="ok")
        self.name, self.order = name, order
        self.entered, self.gate = asyncio.Event(), asyncio.Event()

    async def stream(self, request):  # type: ignore[no-untyped-def]
        self.order.append(f"{self.name} start")
        self.entered.set()
        await self.gate.wait()
        async for chunk in super().stream(request):
            yield chunk
        self.order.append(f"{self.name} end")


async def _waiting_locks(db: PgDatabase) -> int:
    row = await db.fetchone("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    return int(row[0]) if row else 0


async def test_a_hub_on_postgres_answers_and_a_second_hub_sees_the_conversation(
    make_hub, config, out, tmp_path
) -> None:
    async with temporary_schema() as url:
        async with make_hub(["Nice to meet you, Ann."], cfg=_config(config, tmp_path, url, "a")) as hub:
            result = await hub.send("cli:session", {"user": "ann"}, "My name is Ann.")
            assert result.ok and "Nice to meet you, Ann." in out.getvalue()
            assert isinstance(hub._db, PgDatabase)
        model = ScriptedModel(["Your name is Ann."])
        async with make_hub(model, cfg=_config(config, tmp_path, url, "b")) as hub:
            again = await hub.send("cli:session", {"user": "ann"}, "What is my name?")
            runs = await hub.runs.list(context="cli:session:ann")
            pending = await hub.inbox.pending()
        assert again.ok and "My name is Ann." in model.requests[0].messages[0]["content"]
        assert [r.state for r in runs] == [RunState.COMPLETED, RunState.COMPLETED] and pending == []


async def test_two_hubs_run_one_conversation_one_at_a_time(make_hub, config, tmp_path) -> None:
    order: list[str] = []
    a, b = Gated("a", order), Gated("b", order)
    async with temporary_schema() as url:
        async with (
            make_hub(a, cfg=_config(config, tmp_path, url, "a")) as hub_a,
            make_hub(b, cfg=_config(config, tmp_path, url, "b")) as hub_b,
        ):
            first = await hub_a.submit("cli:session", {"user": "ann"}, "one")
            await asyncio.wait_for(a.entered.wait(), 10)
            second = await hub_b.submit("cli:session", {"user": "ann"}, "two")
            assert isinstance(hub_a._db, PgDatabase)
            await wait_for(lambda: _waiting_locks(hub_a._db), what="hub b waiting for the conversation's lock")  # type: ignore[arg-type]
            b.gate.set()  # hub b would answer at once, if it held the lock
            # a sentinel: another conversation runs to its end on hub b meanwhile
            assert (await asyncio.wait_for(hub_b.send("cli:session", {"user": "bob"}, "hi"), 10)).ok
            assert order == ["a start", "b start", "b end"] and not second.result.done()
            a.gate.set()
            r1, r2 = await asyncio.wait_for(asyncio.gather(first.wait(), second.wait()), 10)
            assert order[3:] == ["a end", "b start", "b end"]  # ann's second run began after the first ended
    assert r1.ok and r2.ok
    assert order.index("a end") < order.index("b start", 2)  # ann's second run began after the first ended


async def test_a_dead_workers_lock_is_let_go_by_the_server(make_hub, config, tmp_path) -> None:
    order: list[str] = []
    a, b = Gated("a", order), Gated("b", order)
    b.gate.set()
    async with temporary_schema() as url:
        async with (
            make_hub(a, cfg=_config(config, tmp_path, url, "a")) as hub_a,
            make_hub(b, cfg=_config(config, tmp_path, url, "b")) as hub_b,
        ):
            db_a = hub_a._db
            assert isinstance(db_a, PgDatabase)
            first = await hub_a.submit("cli:session", {"user": "ann"}, "one")
            await asyncio.wait_for(a.entered.wait(), 10)
            second = await hub_b.submit("cli:session", {"user": "ann"}, "two")
            await wait_for(lambda: _waiting_locks(db_a), what="hub b waiting for the lock")
            [pid] = await db_a.lock_backends()
            await db_a.fetchall("SELECT pg_terminate_backend(?)", (pid,))  # worker a's connection dies

            async def let_go() -> bool:  # b got the lock the server took from a
                return await _waiting_locks(db_a) == 0

            await wait_for(let_go, what="the server letting a's lock go to b")
            # b holds the lock, but "one" (older, on worker a) goes first: b waits for it, so
            # the conversation's replies keep the order of its messages
            a.gate.set()
            assert (await asyncio.wait_for(first.wait(), 10)).ok
            assert (await asyncio.wait_for(second.wait(), 10)).ok
            assert order == ["a start", "a end", "b start", "b end"]


async def _inboxes(url: str, *, lease: float) -> tuple[PgDatabase, PgDatabase, PostgresInbox, PostgresInbox]:
    db_a, db_b = await PgDatabase(url, pool_size=2).open(), await PgDatabase(url, pool_size=2).open()
    return db_a, db_b, PostgresInbox(db_a, worker="a", lease=lease), PostgresInbox(db_b, worker="b", lease=lease)


async def test_inputs_given_back_are_claimed_by_exactly_one_worker() -> None:
    async with temporary_schema() as url:
        db_a, db_b, a, b = await _inboxes(url, lease=60)
        try:
            entries = [InputLog(type="text", content=f"m{i}") for i in range(40)]
            for e in entries:
                assert await a.record(f"chat:{e.content}", e)
            assert await b.claim() == []  # a holds them, its leases alive
            await a.release()  # a stops cleanly: its inputs are anyone's now
            claims = await asyncio.gather(*(inbox.claim() for inbox in (a, b, a, b, b, a)))
            ids = [p.entry.id for batch in claims for p in batch]
            assert sorted(ids) == sorted(e.id for e in entries) and len(set(ids)) == len(ids)
            holders = await db_a.fetchall("SELECT DISTINCT claimed_by FROM inbox")
            assert {r[0] for r in holders} <= {"a", "b"}
            assert await a.renew() + await b.renew() == 40
        finally:
            await db_a.close()
            await db_b.close()


async def test_a_dead_workers_inputs_go_to_another_when_its_lease_expires() -> None:
    async with temporary_schema() as url:
        db_a, db_b, a, b = await _inboxes(url, lease=0.5)
        try:
            entry = InputLog(type="text", content="hello")
            assert await a.record("chat:1", entry)
            a.take([entry.id], "run-a")
            assert await a.renew() == 1
            await db_a.close()  # worker a dies: nobody renews its lease
            claimed: list[str] = []

            async def taken() -> bool:
                claimed.extend(p.entry.id for p in await b.claim())
                return bool(claimed)

            await wait_for(taken, what="b taking a's input after the lease")
            assert claimed == [entry.id]
            assert await b.claim() == []  # b's own now: not claimed twice
            assert await db_b.fetchone("SELECT claimed_by FROM inbox WHERE id = ?", (entry.id,)) == ("b",)
        finally:
            await db_a.close()
            await db_b.close()


async def test_an_input_whose_run_is_alive_elsewhere_is_not_taken(tmp_path: Path) -> None:
    async with temporary_schema() as url:
        db_a, db_b, a, b = await _inboxes(url, lease=0.2)
        try:
            runs_a, runs_b = PostgresRunStore(db_a), PostgresRunStore(db_b)
            run = RunRecord(context="chat:1")
            entry = InputLog(type="text", content="slow one")
            async with db_a.lock("chat:1"):  # worker a runs the conversation, stalled past its lease
                await runs_a.create(run)
                await a.record("chat:1", entry)
                a.take([entry.id], run.id)
                await db_a.flush()
                await db_b.fetchall("SELECT pg_sleep(0.3)")  # the server's clock passes the lease
                assert await runs_b.recover() == []  # alive: its conversation's lock is held
                assert await b.claim() == []
            [killed] = await runs_b.recover()  # the lock is free: the run is an orphan now
            assert killed.id == run.id
            assert [p.entry.id for p in await b.claim()] == [entry.id]
        finally:
            await db_a.close()
            await db_b.close()


async def test_a_hub_takes_over_a_dead_workers_input_and_answers_it(make_hub, config, out, tmp_path) -> None:
    async with temporary_schema() as url:
        async with PgDatabase(url) as db:  # what a worker that died mid-run left behind
            ghost = PostgresInbox(db, worker="ghost", lease=0.1)
            runs = PostgresRunStore(db)
            run = RunRecord(context="cli:session:ann")
            await runs.create(run)
            entry = InputLog(type="text", content="are you there?")
            await ghost.record("cli:session:ann", entry)
            ghost.take([entry.id], run.id)
            await db.fetchall("SELECT pg_sleep(0.2)")  # its lease lapses on the server's clock
        cfg = _config(config, tmp_path, url, "b")
        async with make_hub(["Yes, here."], cfg=cfg) as hub:

            async def answered() -> bool:
                new = [r for r in await hub.runs.list(context="cli:session:ann") if r.id != run.id]
                return await hub.inbox.pending() == [] and [r.state for r in new] == [RunState.COMPLETED]

            await wait_for(answered, what="the ghost's input answered by a run of this hub")
            dead = await hub.runs.get(run.id)
        assert dead is not None and (dead.state, dead.reason) == (RunState.KILLED, "abnormal_exit")
        assert out.getvalue().count("Yes, here.") == 1


async def test_a_running_hub_takes_over_when_a_worker_dies_later(make_hub, config, out, tmp_path) -> None:
    async with temporary_schema() as url:
        cfg = _config(config, tmp_path, url, "b")
        cfg.store.lease = 1.0  # this worker sweeps every third of a second
        async with make_hub(["Still here."], cfg=cfg) as hub, PgDatabase(url) as db:
            # another worker receives a message, starts its run, and dies (its lease lapses)
            ghost, runs = PostgresInbox(db, worker="ghost", lease=0.2), PostgresRunStore(db)
            run = RunRecord(context="cli:session:ann")
            await runs.create(run)
            entry = InputLog(type="text", content="hello?")
            await ghost.record("cli:session:ann", entry)
            ghost.take([entry.id], run.id)
            await db.flush()

            async def answered() -> bool:
                new = [r for r in await hub.runs.list(context="cli:session:ann") if r.id != run.id]
                return [r.state for r in new] == [RunState.COMPLETED] and await hub.inbox.pending() == []

            await wait_for(answered, what="the dead worker's input answered by the running hub")
            dead = await hub.runs.get(run.id)
        assert dead is not None and (dead.state, dead.reason) == (RunState.KILLED, "abnormal_exit")
        assert out.getvalue().count("Still here.") == 1
