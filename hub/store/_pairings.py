"""Pairings: the `PairingStore` seam, who was given a code to talk to the bot in private
and who was approved (``dm_policy = "pairing"``, hub/features/_access.py decides with it).

The backends: `hub.store.InMemoryPairingStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlPairingStore` (hub/store/sql/_stores.py).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

__all__ = ["Pairing", "PairingStore"]


@dataclass(frozen=True, slots=True)
class Pairing:
    """One user of one platform: ``pending`` with a code until ``expires``, or ``approved``."""

    platform: str
    user: str
    state: Literal["pending", "approved"]
    code: str | None
    created: float
    expires: float | None = None
    approved: float | None = None
    user_name: str | None = None
    """The user's display name when the code was given, as the platform had it (redacted)."""
    user_handle: str | None = None
    """The user's @username then, without the ``@`` (redacted)."""

    def expired(self, now: float | None = None) -> bool:
        return self.state == "pending" and self.expires is not None and self.expires <= (now or time.time())


class PairingStore(ABC):
    """Pairings, kept so that they survive restarts."""

    async def open(self) -> None:  # noqa: B027 - stores without a connection need nothing
        pass

    async def close(self) -> None:  # noqa: B027
        pass

    @abstractmethod
    async def get(self, platform: str, user: str) -> Pairing | None: ...

    @abstractmethod
    async def put(self, pairing: Pairing) -> None:
        """Insert or replace the pairing of ``(platform, user)``."""

    @abstractmethod
    async def by_code(self, code: str) -> Pairing | None: ...

    @abstractmethod
    async def delete(self, user: str, *, platform: str | None = None) -> int:
        """Forget ``user`` (on ``platform``, or on every platform); how many were removed."""

    @abstractmethod
    async def list(self) -> list[Pairing]: ...

    async def prune_pending(self, before: float) -> int:
        """Forget the pending pairings that expired before ``before`` (strangers who were given
        a code and never approved); approved ones stay. How many went."""
        gone = 0
        for p in await self.list():
            if p.state == "pending" and p.expires is not None and p.expires < before:
                gone += await self.delete(p.user, platform=p.platform)
        return gone
