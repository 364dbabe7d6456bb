"""The hub's task group (hub/tasks.py): every background task tracked, errors logged, all
cancelled and awaited on close; one task's failure leaves the others running."""

from __future__ import annotations

import asyncio
import logging

import pytest

from hub.tasks import TaskGroup


async def test_a_failing_task_is_logged_and_leaves_the_others_running(caplog: pytest.LogCaptureFixture) -> None:
    group = TaskGroup()
    running = asyncio.Event()

    async def fails() -> None:
        raise RuntimeError("poller broke")

    async def keeps_going() -> None:
        running.set()
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, logger="hub"):
        other = group.create(keeps_going(), name="ext:other")
        await running.wait()
        failed = group.create(fails(), name="ext:fails")
        await asyncio.gather(failed, return_exceptions=True)
        await asyncio.sleep(0)  # the done callback runs on the next loop turn
    (record,) = [r for r in caplog.records if "ext:fails" in r.getMessage()]
    assert record.exc_info is not None and "poller broke" in str(record.exc_info[1])
    assert not other.done() and len(group) == 1  # the failed one is forgotten, the other goes on
    await group.close()
    assert other.cancelled() and len(group) == 0


async def test_close_waits_for_a_task_to_finish_its_cancellation() -> None:
    group = TaskGroup()
    cleaned = asyncio.Event()
    started = asyncio.Event()

    async def cleans_up() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # its own cleanup awaits: close waits for it
            cleaned.set()

    task = group.create(cleans_up(), name="ext:cleanup")
    await started.wait()
    await group.close()
    assert cleaned.is_set() and task.done()


async def test_a_cancelled_task_is_not_reported_as_failed(caplog: pytest.LogCaptureFixture) -> None:
    group = TaskGroup()
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, logger="hub"):
        task = group.create(waits(), name="ext:waits")
        await started.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
    assert not caplog.records and len(group) == 0
