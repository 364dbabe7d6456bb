"""A wall clock that moves only when a test says so, for what runs on a schedule."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    """A wall clock that moves only when told; ``sleep`` waits for it.

    ``advance`` moves time forward sleeper by sleeper, and after waking each one waits until
    the scheduler is asleep again, so a test sees every fire in order.
    """

    def __init__(self, now: float) -> None:
        self.now = now
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._asleep = asyncio.Event()

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        self._asleep.set()
        await fut

    async def asleep(self, timeout: float = 5.0) -> None:
        """Wait until something sleeps on this clock (the scheduler finished its pass)."""
        await asyncio.wait_for(self._asleep.wait(), timeout)

    async def advance(self, seconds: float) -> None:
        target = self.now + seconds
        await self.asleep()
        while self._sleepers and self._sleepers[0][0] <= target:
            at, _, fut = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            self._asleep.clear()
            fut.set_result(None)
            await self.asleep()
        self.now = target
