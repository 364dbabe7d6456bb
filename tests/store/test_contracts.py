"""One contract per store seam, run on every backend: in memory, SQLite and PostgreSQL.

The memory store's, the pairing store's and the inbox's dead-letter contracts are in their
own files (tests/memory/test_store_contract.py, tests/features/test_access.py,
tests/store/test_dead_letter.py), parametrised over the same backends (tests/_support/backends.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hub.features import (
    InMemoryScheduleStore,
    InMemoryUsageStore,
    PostgresScheduleStore,
    PostgresUsageStore,
    SQLiteScheduleStore,
    SQLiteUsageStore,
)
from hub.logs import InputLog, OutputLog, ThoughtLog
from hub.personas import InMemoryRevisionStore, PostgresRevisionStore, SQLiteRevisionStore
from hub.store import (
    InMemoryInbox,
    InMemoryRunStore,
    PostgresInbox,
    PostgresRunStore,
    RunRecord,
    RunState,
    SQLiteInbox,
    SQLiteRunStore,
)
from tests._support.backends import BACKENDS, sql_database

_CLASSES: dict[str, tuple[type, type, type]] = {
    "runs": (InMemoryRunStore, SQLiteRunStore, PostgresRunStore),
    "inbox": (InMemoryInbox, SQLiteInbox, PostgresInbox),
    "schedules": (InMemoryScheduleStore, SQLiteScheduleStore, PostgresScheduleStore),
    "revisions": (InMemoryRevisionStore, SQLiteRevisionStore, PostgresRevisionStore),
    "usage": (InMemoryUsageStore, SQLiteUsageStore, PostgresUsageStore),
}


@asynccontextmanager
async def _open(seam: str, backend: str, tmp_path: Path) -> AsyncIterator[Any]:
    memory, sqlite, postgres = _CLASSES[seam]
    if backend == "memory":
        store = memory()
        await store.open()
        yield store
        return
    async with sql_database(backend, tmp_path) as db:
        if backend == "sqlite":
            store = sqlite(db)
        else:
            store = postgres(db, worker="w1") if seam == "inbox" else postgres(db)
        await store.open()
        yield store
        await store.close()


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
