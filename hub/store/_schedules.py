"""Schedule ticks: the `ScheduleStore` seam the scheduler keeps its last fires in
(hub/features/_schedules.py), so schedules survive restarts and a tick fires once across
workers (each tick is claimed by a compare-and-set of the last fire time).

The backends: `hub.store.InMemoryScheduleStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlScheduleStore` (hub/store/sql/_stores.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

__all__ = ["ScheduleStore", "Tick"]


@dataclass(frozen=True, slots=True)
class Tick:
    """A schedule's last claimed (nominal) fire time, and whether its input is recorded."""

    last: float
    done: bool


class ScheduleStore(ABC):
    """The last (nominal) fire time of each schedule, by name; shared by every worker."""

    @abstractmethod
    async def tick(self, name: str) -> Tick | None:
        """The last claimed fire of ``name`` (None: never seen)."""

    async def last(self, name: str) -> float | None:
        t = await self.tick(name)
        return t.last if t is not None else None

    @abstractmethod
    async def record(self, name: str, fired: float) -> None:
        """Set the last fire time, done (a new schedule's start, a finished fire). Durable when it returns."""

    @abstractmethod
    async def start(self, name: str, now: float) -> Tick:
        """A schedule seen for the first time counts from ``now`` (done): stored unless a row
        exists already (another worker's start); returns the stored tick."""

    @abstractmethod
    async def finish(self, name: str, fired: float) -> None:
        """Mark the claim of ``fired`` done (its input is recorded), if it is still the last."""

    @abstractmethod
    async def claim(self, name: str, expected: float | None, fired: float) -> bool:
        """Atomically move the last fire time from ``expected`` (None: never seen) to
        ``fired``, not yet done; False, changing nothing, when it is not ``expected`` any
        more (another worker claimed that tick). Durable when it returns."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass
