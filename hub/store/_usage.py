"""Usage, in tokens and in money: the `UsageStore` seam the daily budgets count in
(hub/features/_budgets.py).

The backends: `hub.store.InMemoryUsageStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlUsageStore` (hub/store/sql/_stores.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["UsageStore"]


class UsageStore(ABC):
    """Tokens and money used per scope (``conversation:ID``, ``user:PLATFORM:ID``, ``bot``) and UTC day."""

    @abstractmethod
    def add(self, scope: str, day: str, tokens: int) -> None:
        """Count tokens (without waiting; committed within milliseconds)."""

    @abstractmethod
    async def get(self, scope: str, day: str) -> int: ...

    @abstractmethod
    def add_cost(self, scope: str, day: str, cost: float) -> None:
        """Count money, at the model's prices (without waiting; committed within milliseconds)."""

    @abstractmethod
    async def cost(self, scope: str, day: str) -> float: ...

    @abstractmethod
    async def reserve(self, scope: str, day: str, amount: float, limit: float) -> bool:
        """Add ``amount`` of money to the scope's day, atomically, only if the total is under
        ``limit`` and stays within it: True if added. One conditional statement in the
        database, so workers sharing it never admit together more than ``limit`` allows
        (the background spend, hub/features/_background.py). Given back with
        ``add_cost(scope, day, -amount)``."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass
