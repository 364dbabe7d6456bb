"""A store outage that outlasts the intake's retries loses nothing and waits for no restart:
the inputs stay in the inbox and are tried again, one run at a time, until the store is back;
each is then answered once."""

from __future__ import annotations

import asyncio

import pytest

from hub import Extension
from hub.backoff import Backoff
from hub.store import RunState
from hub.store.sql import Database

from .faults import SEND_BOUND, FunctionModel, faulty_sqlite_stores, send_bounded
from .test_stores import CLI, count, script


@pytest.mark.parametrize("attempts", [0, 2])
async def test_inputs_left_by_a_long_outage_are_answered_once_the_store_is_back(
    make_hub, config, attempts: int
) -> None:
    db = Database(config.data_dir / "hub.db")
    faulty = faulty_sqlite_stores(db)
    hub = make_hub(FunctionModel(script), Extension("t", actions=[count]), **faulty)
    hub.intake.store_retry, hub.intake.store_retry_attempts = Backoff(first=0.01, most=0.02, jitter=0), attempts
    hub.intake.stranded_every = 0.05
    try:
        async with hub:
            faulty["memory"].arm("get", 1, down=True)  # every run of the conversation fails by the store
            result = await send_bounded(hub, CLI, {"user": "ann"}, "hi")
            assert result.state == RunState.FAILED and result.store_failure is not None
            # the outage goes on past the retries: the input waits in the inbox, tried again
            async with asyncio.timeout(SEND_BOUND):
                while len(await faulty["runs"].inner.list(context="cli:session:ann")) < attempts + 3:
                    await asyncio.sleep(0.01)
            assert len(await faulty["inbox"].inner.pending()) == 1
            faulty["memory"].disarm()  # the store is back: answered without a restart
            async with asyncio.timeout(SEND_BOUND):
                while await faulty["inbox"].inner.pending():
                    await asyncio.sleep(0.01)
            runs = await faulty["runs"].inner.list(context="cli:session:ann", limit=100)
            states = [r.state for r in runs]
            assert states.count(RunState.COMPLETED) == 1, states  # answered once
            assert set(states) == {RunState.COMPLETED, RunState.FAILED}
            assert all(r.store_failed for r in runs if r.state == RunState.FAILED)
            assert await faulty["inbox"].inner.parked() == []
    finally:
        await db.close()
