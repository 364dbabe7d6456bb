"""Upkeep of what no conversation owns, pruned apart from `hub.store._retention` (which
prunes runs, inputs and conversations): pending pairings of strangers who never came back, and
held posts done with (posted, rejected, failed, expired) a while ago.

Each rule is a small function; `Upkeep` runs them every ``[hub.retention] interval``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ..config import RetentionSection
from ._pairings import PairingStore
from ._reviews import ReviewStore

__all__ = ["PAIRING_GRACE", "REVIEW_KEEP", "Upkeep", "prune_pairings"]

log = logging.getLogger("hub.store")

PAIRING_GRACE = 7 * 86_400.0
"""Seconds a pending pairing is kept past its code's expiry (``hub pairing list`` shows it),
then forgotten: a stranger who writes again gets a new code, as after the expiry."""


REVIEW_KEEP = 30 * 86_400.0
"""Seconds a held post that is done with stays listed (``hub review list --all``), then goes."""


async def prune_pairings(pairings: PairingStore, *, now: float | None = None, grace: float = PAIRING_GRACE) -> int:
    """Forget pending pairings whose code expired more than ``grace`` seconds ago."""
    return await pairings.prune_pending((now if now is not None else time.time()) - grace)


class Upkeep:
    """A hub component: the rules above, at start and every ``policy.interval`` seconds."""

    def __init__(self, pairings: PairingStore, policy: RetentionSection, *, reviews: ReviewStore | None = None) -> None:
        self.pairings = pairings
        self.reviews = reviews
        self.policy = policy
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Any = None) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="upkeep")

    async def _loop(self) -> None:
        while True:
            try:
                if gone := await prune_pairings(self.pairings):
                    log.info("upkeep: %d pending pairings of strangers forgotten", gone)
                if self.reviews is not None and (gone := await self.reviews.prune(time.time() - REVIEW_KEEP)):
                    log.info("upkeep: %d held posts done with over %d days ago forgotten", gone, REVIEW_KEEP // 86_400)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the store's health reports a failing store; the next round tries again
                log.warning("upkeep: pruning pairings failed: %s", e)
            await asyncio.sleep(self.policy.interval)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
