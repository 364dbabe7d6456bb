"""Where the reader is in its folder, kept in the hub's memory store (shared by every worker
and kept across restarts): the highest UID taken, under the folder's UIDVALIDITY.

The cursor only moves forward, in the order (UIDVALIDITY, UID): a server gives a folder
whose UIDs changed a greater UIDVALIDITY (RFC 3501 2.3.1.1), so a newer one always wins.
Each move is one [`update()`][hub.MemoryStore.update] (a compare-and-set, applied again if
another writer came first): a worker that lost the lease and still finishes a mail, or a
late write after a restart, never moves it back, which would read mail again (the inbox
would refuse it, but the work would be done twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hub import MemoryStore

__all__ = ["Cursor", "Cursors", "CURSOR_KEY"]

CURSOR_KEY = "email:cursor:"
"""The memory key prefix of a kept cursor; ``<address>:<folder>`` follows."""


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """The highest UID taken, under the folder's UIDVALIDITY (ordered by both, in that order)."""

    uidvalidity: int
    uid: int

    @classmethod
    def of(cls, value: Any) -> Cursor | None:
        if isinstance(value, dict) and isinstance(value.get("uidvalidity"), int) and isinstance(value.get("uid"), int):
            return cls(value["uidvalidity"], value["uid"])
        return None

    def to_dict(self) -> dict[str, int]:
        return {"uidvalidity": self.uidvalidity, "uid": self.uid}


class Cursors:
    """The cursors of one memory store."""

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory

    async def get(self, key: str) -> Cursor | None:
        return Cursor.of(await self.memory.get(key))

    async def advance(self, key: str, to: Cursor) -> Cursor:
        """Move the cursor at ``key`` to ``to`` unless it is there or beyond already; where it is now."""

        def forward(value: Any) -> dict[str, int]:
            current = Cursor.of(value)
            return (to if current is None or current < to else current).to_dict()

        stored = Cursor.of(await self.memory.update(key, forward))
        assert stored is not None
        return stored
