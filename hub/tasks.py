"""The hub's background tasks: one owner that tracks them (`TaskGroup`), and a helper
for a component's own task (`cancel_and_wait()`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["TaskGroup", "cancel_and_wait"]

log = logging.getLogger("hub")
T = TypeVar("T")


class TaskGroup:
    """Every background task of one hub (runs, listeners, pollers, retries), as PTB's
    ``Application`` keeps its tasks: an error a task raises is logged when it ends, and
    `close()` cancels the ones still going and waits for them.

    Unlike `asyncio.TaskGroup`, one task's failure does not cancel the others: a
    poller that dies must not take the conversations' runs with it.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def create(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Run ``coro`` as a tracked task named ``name``."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s failed", task.get_name(), exc_info=task.exception())

    async def close(self) -> None:
        """Cancel every task still going and wait until all have ended."""
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait until it has ended; its cancellation is not an error."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
