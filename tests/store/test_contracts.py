"""One contract per store seam, run on every backend: in memory, SQLite and PostgreSQL.

The stores come from :func:`hub.store.open_stores`, as the hub and the command line get
them, so the contracts run on what each backend really gives. The key-value memory's, the
leases', the pairing store's and the inbox's dead-letter contracts are in their own files
(tests/memory/test_store_contract.py, tests/store/test_leases.py, tests/features/test_access.py,
tests/store/test_dead_letter.py), parametrised over the same backends (tests/_support/backends.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hub import HubConfig, HubError, StoreError
from hub.logs import InputLog, OutputLog, ThoughtLog
from hub.store import (
    InMemoryInbox,
    InMemoryLeaseStore,
    InMemoryPairingStore,
    InMemoryRevisionStore,
    InMemoryRunStore,
    InMemoryScheduleStore,
    InMemoryStopStore,
    InMemoryStore,
    InMemoryUsageStore,
    Pairing,
    RunRecord,
    RunState,
    Stores,
    open_stores,
)
from hub.store.sql import (
    Database,
    PgDatabase,
    PostgresInbox,
    PostgresRunStore,
    SqlInbox,
    SqlLeaseStore,
    SqlMemoryStore,
    SqlPairingStore,
    SqlRevisionStore,
    SqlRunStore,
    SqlScheduleStore,
    SqlStopStore,
    SqlUsageStore,
)
from hub.testing.postgres import temporary_schema
from tests._support.backends import BACKENDS

# what each backend gives for each seam (memory, runs, inbox, leases, usage, schedules,
# revisions, pairings, stops), and the database they share
_GIVEN: dict[str, tuple[type | None, tuple[type, ...]]] = {
    "memory": (
        None,
        (
            InMemoryStore,
            InMemoryRunStore,
            InMemoryInbox,
            InMemoryLeaseStore,
            InMemoryUsageStore,
            InMemoryScheduleStore,
            InMemoryRevisionStore,
            InMemoryPairingStore,
            InMemoryStopStore,
        ),
    ),
    "sqlite": (
        Database,
        (
            SqlMemoryStore,
            SqlRunStore,
            SqlInbox,
            SqlLeaseStore,
            SqlUsageStore,
            SqlScheduleStore,
            SqlRevisionStore,
            SqlPairingStore,
            SqlStopStore,
        ),
    ),
    "postgres": (
        PgDatabase,
        (
            SqlMemoryStore,
            PostgresRunStore,
            PostgresInbox,
            SqlLeaseStore,
            SqlUsageStore,
            SqlScheduleStore,
            SqlRevisionStore,
            SqlPairingStore,
            SqlStopStore,
        ),
    ),
}


@asynccontextmanager
async def _stores(backend: str, tmp_path: Path) -> AsyncIterator[Stores]:
    """Every store of ``backend``, open, as :func:`open_stores` gives them."""
    config = HubConfig()
    config.hub.data_dir = str(tmp_path / "data")
    if backend == "memory":  # the stores a test gives the hub: the others are in memory then
        async with open_stores(config, memory=InMemoryStore(), runs=InMemoryRunStore(), inbox=InMemoryInbox()) as s:
            yield s
        return
    if backend == "sqlite":
        async with open_stores(config, worker="w1") as s:
            yield s
        return
    async with temporary_schema() as url:
        config.store.url = url
        async with open_stores(config, worker="w1") as s:
            yield s


@asynccontextmanager
async def _open(seam: str, backend: str, tmp_path: Path) -> AsyncIterator[Any]:
    async with _stores(backend, tmp_path) as stores:
        yield getattr(stores, seam)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_runs_record_their_life_and_event_log_in_order(backend: str, tmp_path: Path) -> None:
    async with _open("runs", backend, tmp_path) as runs:
        run = RunRecord(context="chat:1", user="u\x00ser", parent_id=None, started=1000.5)
        await runs.create(run)
        runs.append(run, InputLog(type="text", content="hi \ud800 there"))
        runs.append(run, ThoughtLog(content="thinking"))
        run.steps, run.prompt_tokens, run.completion_tokens = 2, 30, 12
        runs.update(run)
        runs.append(run, OutputLog(type="cli:message", content="hello", sent=True))
        run.state, run.reason, run.ended = RunState.COMPLETED, None, 1001.75
        await runs.finish(run)
        got = await runs.get(run.id)
        assert got is not None
        assert (got.state, got.steps, got.tokens, got.started, got.ended) == (
            RunState.COMPLETED,
            2,
            42,
            1000.5,
            1001.75,
        )
        assert got.user is not None and got.user.startswith("u")
        kinds = [e.kind for e in await runs.events(run.id)]
        assert kinds == ["input", "thought", "output"]
        assert (await runs.events(run.id))[0].content in ("hi \ufffd there", "hi \ud800 there")
        assert await runs.get("nope") is None


async def test_runs_list_filter_find_and_recover(backend: str, tmp_path: Path) -> None:
    async with _open("runs", backend, tmp_path) as runs:
        a = RunRecord(context="chat:a", id="aaaa1111", started=1.0)
        b = RunRecord(context="chat:b", id="aaab2222", started=2.0, parent_id="aaaa1111")
        c = RunRecord(context="chat:a", id="bbbb3333", started=3.0)
        for r in (a, b, c):
            await runs.create(r)
        a.state, a.ended = RunState.FAILED, 1.5
        await runs.finish(a)
        assert [r.id for r in await runs.list()] == ["bbbb3333", "aaab2222", "aaaa1111"]
        assert [r.id for r in await runs.list(limit=1)] == ["bbbb3333"]
        assert [r.id for r in await runs.list(context="chat:a")] == ["bbbb3333", "aaaa1111"]
        assert [r.id for r in await runs.list(state="failed")] == ["aaaa1111"]
        assert [r.id for r in await runs.list(parent_id="aaaa1111")] == ["aaab2222"]
        assert (await runs.find("bbbb")).id == "bbbb3333"  # type: ignore[union-attr]
        assert await runs.find("aaa") is None  # two runs start with it
        recovered = await runs.recover()
        assert sorted(r.id for r in recovered) == ["aaab2222", "bbbb3333"]
        for r in recovered:
            got = await runs.get(r.id)
            assert got is not None and (got.state, got.reason) == (RunState.KILLED, "abnormal_exit")
        assert await runs.recover() == []


async def test_inbox_records_once_takes_and_finishes(backend: str, tmp_path: Path) -> None:
    async with _open("inbox", backend, tmp_path) as inbox:
        first = InputLog(type="text", content="one", platform_id="tg:1")
        again = InputLog(type="text", content="one again", platform_id="tg:1")
        second = InputLog(type="text", content="two")
        assert await inbox.record("chat:1", first)
        assert not await inbox.record("chat:1", again)  # a redelivery
        assert await inbox.record("chat:2", second)
        assert await inbox.seen("tg:1") and not await inbox.seen("tg:2")
        inbox.take([first.id], "run-1")
        pending = await inbox.pending()
        assert [(p.context, p.entry.id, p.entry.content, p.run_id) for p in pending] == [
            ("chat:1", first.id, "one", "run-1"),
            ("chat:2", second.id, "two", None),
        ]
        await inbox.done([first.id])
        assert [p.entry.id for p in await inbox.pending()] == [second.id]
        assert await inbox.seen("tg:1")  # handled ids stay known


async def test_forget_user_takes_their_runs_children_and_inputs_on_their_platform_only(
    backend: str, tmp_path: Path
) -> None:
    from hub.store import FORGOTTEN

    async with _stores(backend, tmp_path) as stores:
        runs, inbox = stores.runs, stores.inbox
        theirs = RunRecord(context="tg:chat:1", user="7", started=1.0)
        child = RunRecord(context="tg:helper", parent_id=theirs.id, started=2.0)
        grandchild = RunRecord(context="tg:helper", parent_id=child.id, started=3.0)
        group = RunRecord(context="tg:chat:-5", user="8", started=4.0)
        elsewhere = RunRecord(context="dc:chat:1", user="7", started=5.0)  # "7" on another platform
        for r in (theirs, child, grandchild, group, elsewhere):
            await runs.create(r)
        runs.append(theirs, InputLog(type="text", content="mine", user="7"))
        runs.append(group, InputLog(type="text", content="8 opens", user="8"))
        joined = InputLog(type="text", content="7 joins", user="7", meta={"user_name": "Seven"})
        runs.append(group, joined)
        runs.append(elsewhere, InputLog(type="text", content="other 7", user="7"))
        waiting = InputLog(type="text", content="later", user="7")
        handled = InputLog(type="text", content="earlier", user="7", platform_id="tg:99")
        for context, entry in (
            ("tg:chat:1", waiting),
            ("tg:chat:1", handled),
            ("dc:chat:1", InputLog(type="text", content="x", user="7")),
        ):
            assert await inbox.record(context, entry)
        await inbox.done([handled.id])
        await runs.sync()

        assert await runs.forget_user("7", platform="tg") == (3, 1)
        assert {r.id for r in await runs.list(limit=100)} == {group.id, elsewhere.id}
        assert await runs.events(theirs.id) == []
        said = [(e.id, e.content, e.user, e.meta) for e in await runs.events(group.id)]
        assert said[0][1:3] == ("8 opens", "8") and said[1] == (joined.id, FORGOTTEN, None, {})
        assert [e.content for e in await runs.events(elsewhere.id)] == ["other 7"]
        assert await inbox.forget_user("7", platform="tg") == (1 if backend == "memory" else 2)
        assert [p.context for p in await inbox.pending()] == ["dc:chat:1"]
        assert await inbox.seen("tg:99")  # a redelivery of a handled one is still recognised
        assert await runs.forget_user("7", platform="tg") == (0, 0)  # again: nothing more


async def test_schedules_remember_the_last_fire(backend: str, tmp_path: Path) -> None:
    async with _open("schedules", backend, tmp_path) as store:
        assert await store.last("morning") is None
        await store.record("morning", 1_700_000_000.25)
        await store.record("morning", 1_700_086_400.5)
        assert await store.last("morning") == 1_700_086_400.5
        assert await store.last("evening") is None


async def test_schedules_claim_a_tick_once(backend: str, tmp_path: Path) -> None:
    """The compare-and-set several workers fire a tick through (hub/features/_schedules.py): of two
    claims expecting the same last fire, one wins; the tick stays undone until finished."""
    async with _open("schedules", backend, tmp_path) as store:
        start = await store.start("morning", 1_700_000_000.25)
        assert (start.last, start.done) == (1_700_000_000.25, True)
        assert (await store.start("morning", 1_800_000_000.0)).last == 1_700_000_000.25  # another worker's start
        assert await store.claim("morning", 1_700_000_000.25, 1_700_086_400.5)
        assert not await store.claim("morning", 1_700_000_000.25, 1_700_086_400.5)  # the tick is taken
        tick = await store.tick("morning")
        assert tick is not None and (tick.last, tick.done) == (1_700_086_400.5, False)
        await store.finish("morning", 1_700_000_000.25)  # not the last fire any more: no change
        assert not (await store.tick("morning")).done
        await store.finish("morning", 1_700_086_400.5)
        assert (await store.tick("morning")).done
        assert await store.claim("evening", None, 1_700_000_000.0)  # never seen
        assert not await store.claim("evening", None, 1_700_000_000.0)


async def test_revisions_number_and_skip_repeats(backend: str, tmp_path: Path) -> None:
    async with _open("revisions", backend, tmp_path) as store:
        store.record("default", "v1")
        store.record("default", "v1")  # the same text: no new revision
        store.record("default", "v2", note="edit")
        store.record("other", "x")
        await store.flush()
        history = await store.history("default")
        assert [(r.rev, r.text) for r in history] == [(1, "v1"), (2, "v2")]
        assert history[1].note == "edit"
        assert await store.names() == ["default", "other"]
        assert (await store.get("default", 2)).text == "v2"


async def test_usage_adds_up_per_scope_and_day(backend: str, tmp_path: Path) -> None:
    async with _open("usage", backend, tmp_path) as store:
        store.add("conversation:a", "2026-01-01", 10)
        store.add("conversation:a", "2026-01-01", 5)
        store.add("conversation:a", "2026-01-02", 7)
        assert await store.get("conversation:a", "2026-01-01") == 15
        assert await store.get("conversation:a", "2026-01-02") == 7
        assert await store.get("user:x", "2026-01-01") == 0


async def test_usage_adds_up_money_beside_tokens(backend: str, tmp_path: Path) -> None:
    async with _open("usage", backend, tmp_path) as store:
        store.add("conversation:a", "2026-01-01", 10)
        store.add_cost("conversation:a", "2026-01-01", 0.25)
        store.add_cost("conversation:a", "2026-01-01", 0.125)
        store.add_cost("bot", "2026-01-01", 1.5)
        assert await store.cost("conversation:a", "2026-01-01") == pytest.approx(0.375)
        assert await store.get("conversation:a", "2026-01-01") == 10  # the tokens are untouched
        assert await store.cost("bot", "2026-01-01") == pytest.approx(1.5)
        assert await store.cost("bot", "2026-01-02") == 0.0
        assert await store.get("bot", "2026-01-01") == 0


async def test_runs_keep_their_cost(backend: str, tmp_path: Path) -> None:
    async with _open("runs", backend, tmp_path) as runs:
        run = RunRecord(context="chat:1")
        await runs.create(run)
        run.cost = 0.0125
        runs.update(run)
        await runs.sync()
        assert (await runs.get(run.id)).cost == pytest.approx(0.0125)  # type: ignore[union-attr]
        run.cost, run.state, run.ended = 0.02, RunState.COMPLETED, run.started + 1
        await runs.finish(run)
        assert (await runs.get(run.id)).cost == pytest.approx(0.02)  # type: ignore[union-attr]


async def test_stop_requests_are_kept_until_taken_or_pruned(backend: str, tmp_path: Path) -> None:
    async with _open("stops", backend, tmp_path) as stops:
        assert await stops.requested() == {}
        await stops.request("run-1", "stopped by operator")
        await stops.request("run-1", "stopped by user")  # the first request's reason stays
        await stops.request("run-2", "stopped by user")
        assert await stops.requested() == {"run-1": "stopped by operator", "run-2": "stopped by user"}
        await stops.clear(["run-1", "nope"])
        assert await stops.requested() == {"run-2": "stopped by user"}
        assert await stops.prune(time.time() - 60) == 0  # recent: kept
        assert await stops.prune(time.time() + 1) == 1
        assert await stops.requested() == {}


async def test_open_stores_chooses_the_backend_once_for_every_store(backend: str, tmp_path: Path) -> None:
    database, classes = _GIVEN[backend]
    async with _stores(backend, tmp_path) as stores:
        got = (
            stores.memory,
            stores.runs,
            stores.inbox,
            stores.leases,
            stores.usage,
            stores.schedules,
            stores.revisions,
            stores.pairings,
            stores.stops,
        )
        assert [type(s) for s in got] == list(classes)
        assert type(stores.db) is database if database is not None else stores.db is None
        # only workers sharing PostgreSQL run a conversation under a lock, and keep claims
        assert stores.shared is (backend == "postgres")
        # every store of the bundle works on the database it shares
        await stores.memory.set("k", {"v": 1})
        await stores.pairings.put(Pairing("fake", "u1", "approved", None, 1.0))
        assert await stores.memory.get("k") == {"v": 1}
        assert (await stores.pairings.get("fake", "u1")) is not None


async def test_a_command_reading_a_hub_needs_its_database(tmp_path: Path) -> None:
    config = HubConfig()
    config.hub.data_dir = str(tmp_path / "data")
    with pytest.raises(HubError, match="no runs yet: .*hub.db does not exist"):
        open_stores(config, missing="no runs yet")
    assert not (tmp_path / "data" / "hub.db").exists()  # and nothing was created


async def test_a_store_names_itself_and_what_it_was_doing_when_the_database_fails(tmp_path: Path) -> None:
    async with _stores("sqlite", tmp_path) as stores:
        assert stores.db is not None
        await stores.db.close()  # the database goes away under the stores
        with pytest.raises(StoreError) as ei:
            await stores.inbox.record("chat:1", InputLog(type="text", content="hi"))
        assert ei.value.during == "inbox.record"  # the store and what it was doing
        assert (ei.value.store, ei.value.operation) == ("inbox", "write")  # and what failed below it
        with pytest.raises(StoreError) as ei:
            await stores.runs.get("nope")
        assert ei.value.during == "runs.get"
