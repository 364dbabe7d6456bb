"""A store that fails: every method of every store, failing its Nth call during a run."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from hub import Extension, action
from hub.backoff import Backoff
from hub.errors import StoreError
from hub.logs import ActionResultLog
from hub.store import RunState
from hub.store.sql import Database

from .faults import (
    SEND_BOUND,
    STORES,
    FunctionModel,
    check,
    faulty_sqlite_stores,
    methods,
    send_bounded,
    snapshot,
    store_failed,
)

CLI = "cli:session"


class NoArgs(BaseModel):
    pass


@action(name="count", memory="counter")
async def count(args: NoArgs, ctx) -> dict:
    ctx.action_memory = (ctx.action_memory or 0) + 1
    return {"n": ctx.action_memory}


def script(request) -> str:
    """Call `count`, then answer with its result: two steps, every store touched."""
    prompt = request.system + "".join(m["content"] for m in request.messages)
    if "<action_result" in prompt:
        return '<response><output type="cli:message">counted</output></response>'
    return '<response><reasoning>count first</reasoning><action_call name="count">{}</action_call></response>'


CASES = [(store, method, nth) for store, abc in STORES.items() for method in methods(abc) for nth in (1, 2, 3)]


@pytest.fixture
async def faulty_hub(make_hub, config):
    """``faulty_hub(model, *extensions) -> (hub, faulty)``: a hub built on SQLite stores
    wrapped in FaultyStores (their database is closed after the test)."""
    dbs: list[Database] = []

    def make(model, *extensions):  # type: ignore[no-untyped-def]
        db = Database(config.data_dir / "hub.db")
        dbs.append(db)
        faulty = faulty_sqlite_stores(db)
        return make_hub(model, *extensions, **faulty), faulty

    yield make
    for db in dbs:
        await db.close()


@pytest.mark.parametrize(("store", "method", "nth"), CASES, ids=[f"{s}.{m}#{n}" for s, m, n in CASES])
async def test_a_store_failing_its_nth_call(faulty_hub, store: str, method: str, nth: int) -> None:
    hub, faulty = faulty_hub(FunctionModel(script), Extension("t", actions=[count]))
    async with hub:
        other = await send_bounded(hub, CLI, {"user": "bob"}, "hello")
        assert other.state == RunState.COMPLETED
        others = {("cli:session:bob", other.run_id): await snapshot(hub, "cli:session:bob", other.run_id)}
        faulty[store].arm(method, nth)
        try:
            result = await send_bounded(hub, CLI, {"user": "ann"}, "hi")
        except StoreError:
            # the input could not even be recorded: refused at once, nothing else happened
            assert (store, method) in {("inbox", "record"), ("inbox", "seen")}
            assert await faulty["inbox"].inner.pending() == []
            return
        faulty[store].disarm()
        # a store fault fails the run as one (unless the write was tried again and went
        # through: the end of a run tries each of its writes twice); never as something else
        assert result.state in (RunState.COMPLETED, RunState.FAILED), (result.state, result.reason)
        if result.state == RunState.FAILED:
            assert faulty[store].failed and result.reason and result.reason.startswith("store_error: "), result.reason
        await check(hub, result, others=others)
        # nothing was done twice: the counter moved at most once for ann
        ran = [e for e in result.logs if isinstance(e, ActionResultLog) and e.ok]
        assert await faulty["memory"].inner.get("action:counter:cli:session:ann") in (None, len(ran))
        # and the hub still answers
        again = await send_bounded(hub, CLI, {"user": "cy"}, "and now?")
        assert again.state == RunState.COMPLETED


# a run's row is queued by create_soon (create is what the end uses when that failed); a
# run's memory writes go under its generation (set_if_current), begun by begin
WRITES = [
    ("memory", "set_if_current"),  # a run's history and context record, under its generation
    ("memory", "begin"),
    ("runs", "create_soon"),
    ("runs", "append"),
    ("runs", "finish"),
    ("inbox", "take"),
    ("inbox", "done"),
]


@pytest.mark.parametrize(("store", "method"), WRITES, ids=[f"{s}.{m}" for s, m in WRITES])
async def test_a_store_that_stays_down(faulty_hub, store: str, method: str) -> None:
    """Every write of one kind fails: the run still resolves, failed with store_error, and
    its row ends in that state whenever the run store can still write it."""
    hub, faulty = faulty_hub(FunctionModel(script), Extension("t", actions=[count]))
    hub.intake.store_retry, hub.intake.store_retry_attempts = Backoff(first=0.05, most=0.2, jitter=0), 3
    async with hub:
        faulty[store].arm(method, 1, down=True)
        result = await send_bounded(hub, CLI, {"user": "ann"}, "hi")
        assert result.state == RunState.FAILED and (result.reason or "").startswith("store_error: "), result.reason
        assert isinstance(result.store_failure, StoreError)  # the type says it, not only the words
        faulty[store].disarm()
        row = await faulty["runs"].inner.get(result.run_id)
        if store == "runs":
            # the row could not be written (or not finished): the result still resolved, and
            # a run left `running` becomes killed/abnormal_exit at the next start
            assert row is None or row.state in (RunState.RUNNING, RunState.FAILED)
        else:
            assert row is not None and (row.state, row.reason) == (result.state, result.reason)
            assert row.store_failed  # recorded as the store's failure: its input is never parked for it
        again = await send_bounded(hub, CLI, {"user": "bob"}, "and now?")
        assert again.state == RunState.COMPLETED, again.reason
        if store_failed(result):
            # nothing was answered: ann's input stayed in the inbox, and once the store is
            # back a new run answers it (the intake's retry after a backoff)
            async with asyncio.timeout(SEND_BOUND):
                while await faulty["inbox"].inner.pending():
                    await asyncio.sleep(0.02)
            retried = [r for r in await faulty["runs"].inner.list(limit=20) if r.context == "cli:session:ann"]
            assert RunState.COMPLETED in {r.state for r in retried}, [(r.state, r.reason) for r in retried]
        elif (store, method) != ("inbox", "done"):
            assert await faulty["inbox"].inner.pending() == []


async def test_an_input_whose_run_the_store_failed_is_resumed_never_parked(faulty_hub, make_hub, config) -> None:
    """The run that took it failed by the store (its memory could not be read): at the next
    start the input is run again, however low ``dead_letter_after``, because the run's row
    says the store failed it; a run that failed by itself would count towards parking it."""
    config.hub.dead_letter_after = 1
    hub, faulty = faulty_hub(FunctionModel(script), Extension("t", actions=[count]))
    hub.intake.store_retry_attempts = 0  # left in the inbox for the next start
    async with hub:
        faulty["memory"].arm("get", 1, down=True)
        result = await send_bounded(hub, CLI, {"user": "ann"}, "hi")
        assert result.state == RunState.FAILED and isinstance(result.store_failure, StoreError), result.reason
        faulty["memory"].disarm()
        row = await hub.runs.get(result.run_id)
        assert row is not None and row.store_failed
        [pending] = await hub.inbox.pending()
        assert pending.run_id == result.run_id
    again = make_hub(FunctionModel(script), Extension("t", actions=[count]))
    async with again:
        async with asyncio.timeout(SEND_BOUND):
            while await again.inbox.pending():
                await asyncio.sleep(0.02)
        assert await again.inbox.parked() == []
        runs = await again.runs.list(context="cli:session:ann")
        assert [r.state for r in runs] == [RunState.COMPLETED, RunState.FAILED]
