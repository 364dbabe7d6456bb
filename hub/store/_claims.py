"""A worker's claims on the shared inbox: renewed while it lives, and a dead worker's
claims taken over once their lease expires (``[store] url`` on PostgreSQL only).

Every third of ``[store] lease`` :class:`InboxClaims` renews this worker's leases, marks
the runs that died with their worker ``killed``/``abnormal_exit`` (those whose
conversation's advisory lock is free, see :class:`hub.store.sql.PostgresRunStore`), then claims
the inputs no live worker holds and hands them to the runner, exactly as at start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import StoreError
from ..tasks import cancel_and_wait
from ._inbox import InboxStore
from ._run_records import RunStore

__all__ = ["InboxClaims"]

log = logging.getLogger("hub.store")


class InboxClaims:
    """The hub's component that keeps this worker's claims and takes over a dead worker's.
    ``requeue`` resumes claimed inputs (the hub's own start-up path), given the runs just
    found cut off."""

    def __init__(
        self,
        inbox: InboxStore,
        runs: RunStore,
        *,
        requeue: Callable[[set[str]], Awaitable[None]],
        interval: float,
    ) -> None:
        self.inbox = inbox
        self.runs = runs
        self.requeue = requeue
        self.interval = interval
        self.sweeps = 0  # completed rounds (tests wait on this, not on time)
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Any) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="inbox-claims")

    async def sweep(self) -> None:
        """One round: renew, recover the dead's runs, claim and resume their inputs."""
        held = await self.inbox.renew()
        killed = await self.runs.recover()
        for run in killed:
            log.warning("run %s of %s died with its worker: killed (abnormal_exit)", run.id[:8], run.context)
        await self.requeue({r.id for r in killed})
        self.sweeps += 1
        log.debug("inbox claims: %d held by this worker", held)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except StoreError as e:  # reported by the store's health; the leases are renewed next time
                log.error("inbox claims: %s", e)
            except Exception:  # a task that dies would let this worker's leases lapse
                log.exception("inbox claims failed")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
