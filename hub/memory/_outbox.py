"""Episodes waiting for the vector store: the outbox of episodic memory.

An episode whose store cannot take it (a Chroma server that is down, restarting, or not
up yet) is kept here instead of being lost, in the hub's memory store (SQLite or
PostgreSQL, as durable as the runs) under ``episodes:outbox:<run id>``, and written when
the store takes writes again, in the order the runs ended; a restart of the hub drains
what the last one left. Without a memory store (a bare `EpisodicMemory`) the outbox is
in memory, for the life of the process.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._episode_store import Episode

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["EpisodeOutbox", "OUTBOX_PREFIX", "OUTBOX_CAP"]

log = logging.getLogger("hub.memory")

OUTBOX_PREFIX = "episodes:outbox:"
#: Episodes kept at most; past it the oldest is given up (logged), so a store that never
#: comes back cannot fill the database.
OUTBOX_CAP = 10_000


class EpisodeOutbox:
    """Episodes waiting for the store, oldest first, durable in ``marks`` when given."""

    def __init__(self, marks: MemoryStore | None, *, cap: int = OUTBOX_CAP) -> None:
        self._marks = marks
        self._local: dict[str, dict[str, Any]] = {}
        self.cap = cap

    async def add(self, episode: Episode) -> None:
        """Keep ``episode`` until :meth:`remove`. Raises StoreError (the memory store failed)."""
        record = episode.to_record()
        value = {"id": record.id, "text": record.text, "metadata": dict(record.metadata), "time": episode.time}
        key = f"{OUTBOX_PREFIX}{episode.time:017.6f}:{record.id}"  # sorts by the run's end
        keys = await self.keys()
        if len(keys) >= self.cap:
            log.error(
                "episodic memory: %d episodes wait for the store already; the oldest (%s) is given up",
                len(keys),
                keys[0][len(OUTBOX_PREFIX) :],
            )
            await self.remove(keys[0])
        if self._marks is None:
            self._local[key] = value
        else:
            await self._marks.set(key, value)

    async def keys(self) -> list[str]:
        """The waiting episodes' keys, oldest first."""
        if self._marks is None:
            return sorted(self._local)
        return sorted(await self._marks.keys(OUTBOX_PREFIX))

    async def get(self, key: str) -> Episode | None:
        value = self._local.get(key) if self._marks is None else await self._marks.get(key)
        if not isinstance(value, dict):
            return None
        from ._vector import VectorRecord  # numpy: imported when an episode waited

        return Episode.from_record(VectorRecord(value["id"], value["text"], dict(value["metadata"])))

    async def remove(self, key: str) -> None:
        if self._marks is None:
            self._local.pop(key, None)
        else:
            await self._marks.delete(key)
