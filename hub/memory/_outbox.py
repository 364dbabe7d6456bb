"""Episodes waiting for the vector store: the outbox of episodic memory.

An episode whose store cannot take it (a Chroma server that is down, restarting, or not
up yet) is kept here instead of being lost, in the hub's memory store (SQLite or
PostgreSQL, as durable as the runs) under ``episodes:outbox:<run id>``, and written when
the store takes writes again, in the order the runs ended; a restart of the hub drains
what the last one left. Without a memory store (a bare `EpisodicMemory`) the outbox is
in memory, for the life of the process.

An episode the store itself refuses (its store works, this episode fails) is counted; after
``OUTBOX_PARK_AFTER`` refusals it is *parked* under ``episodes:parked:`` (kept, with its
last error, never lost) so that the episodes behind it go on. The next start of the hub
puts parked episodes back in the outbox, for one more round of tries.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._episode_store import Episode

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["EpisodeOutbox", "OUTBOX_PREFIX", "OUTBOX_CAP", "OUTBOX_PARK_AFTER", "PARKED_PREFIX"]

log = logging.getLogger("hub.memory")

OUTBOX_PREFIX = "episodes:outbox:"
#: Episodes kept at most; past it the oldest is given up (logged), so a store that never
#: comes back cannot fill the database.
OUTBOX_CAP = 10_000
PARKED_PREFIX = "episodes:parked:"
#: Refusals of one episode by a store that works, after which it is parked.
OUTBOX_PARK_AFTER = 5


class EpisodeOutbox:
    """Episodes waiting for the store, oldest first, durable in ``marks`` when given.
    ``waiting`` and ``parked`` are the counts as last read (for health and metrics)."""

    def __init__(
        self, marks: MemoryStore | None, *, cap: int = OUTBOX_CAP, park_after: int = OUTBOX_PARK_AFTER
    ) -> None:
        self._marks = marks
        self._local: dict[str, dict[str, Any]] = {}
        self.cap = cap
        self.park_after = park_after
        self.waiting = 0
        self.parked = 0

    async def add(self, episode: Episode) -> None:
        """Keep ``episode`` until `remove()`. Raises StoreError (the memory store failed)."""
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
        await self._set(key, value)
        self.waiting += 1

    async def keys(self) -> list[str]:
        """The waiting episodes' keys, oldest first."""
        keys = await self._keys(OUTBOX_PREFIX)
        self.waiting = len(keys)
        return keys

    async def parked_keys(self) -> list[str]:
        """The parked episodes' keys, oldest first."""
        keys = await self._keys(PARKED_PREFIX)
        self.parked = len(keys)
        return keys

    async def get(self, key: str) -> Episode | None:
        value = await self._get(key)
        if not isinstance(value, dict):
            return None
        from ._vector import VectorRecord  # numpy: imported when an episode waited

        return Episode.from_record(VectorRecord(value["id"], value["text"], dict(value["metadata"])))

    async def remove(self, key: str) -> None:
        if self._marks is None:
            self._local.pop(key, None)
        else:
            await self._marks.delete(key)
        self.waiting = max(0, self.waiting - 1)

    async def refused(self, key: str, error: str) -> bool:
        """Count one refusal of the episode at ``key`` by a store that works; True when this
        one parked it (moved aside with its error: the others go on)."""
        value = await self._get(key)
        if not isinstance(value, dict):
            return False
        value = {**value, "attempts": int(value.get("attempts", 0)) + 1, "error": error}
        if value["attempts"] < self.park_after:
            await self._set(key, value)
            return False
        await self._set(PARKED_PREFIX + key[len(OUTBOX_PREFIX) :], value)  # first: never in neither
        await self.remove(key)
        self.parked += 1
        return True

    async def unpark(self) -> int:
        """Put every parked episode back in the outbox, its count of refusals cleared (at
        start: the store may have been fixed); how many."""
        keys = await self.parked_keys()
        for key in keys:
            value = await self._get(key)
            if isinstance(value, dict):
                value = {k: v for k, v in value.items() if k not in ("attempts", "error")}
                await self._set(OUTBOX_PREFIX + key[len(PARKED_PREFIX) :], value)
            await self._delete(key)
        self.parked = 0
        return len(keys)

    async def _keys(self, prefix: str) -> list[str]:
        if self._marks is None:
            return sorted(k for k in self._local if k.startswith(prefix))
        return sorted(await self._marks.keys(prefix))

    async def _get(self, key: str) -> Any:
        return self._local.get(key) if self._marks is None else await self._marks.get(key)

    async def _set(self, key: str, value: dict[str, Any]) -> None:
        if self._marks is None:
            self._local[key] = value
        else:
            await self._marks.set(key, value)

    async def _delete(self, key: str) -> None:
        if self._marks is None:
            self._local.pop(key, None)
        else:
            await self._marks.delete(key)
