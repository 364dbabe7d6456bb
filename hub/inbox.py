"""The inbox: every input is recorded before it is acknowledged, and marked done when handled.

This is what makes "no message lost, none answered twice" hold across a SIGKILL: a platform
extension records a message (with its platform id) before it confirms it to the platform;
a redelivered platform id is refused; at boot, inputs of runs that died before answering
are taken again.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass


from .db import Database, dumps
from .logs import InputLog, from_dict, to_dict

__all__ = ["InboxStore", "InMemoryInbox", "SQLiteInbox", "Pending"]


@dataclass(slots=True)
class Pending:
    """An input recorded but not yet handled, and the run that took it (if any)."""

    context: str
    entry: InputLog
    run_id: str | None


class InboxStore(ABC):
    @abstractmethod
    async def record(self, context: str, entry: InputLog) -> bool:
        """Record an input durably. False if its ``platform_id`` was recorded before (a redelivery)."""

    @abstractmethod
    def take(self, ids: list[str], run_id: str) -> None:
        """Mark inputs as taken by a run (not yet done)."""

    @abstractmethod
    async def done(self, ids: list[str]) -> None:
        """Mark inputs handled; durable when it returns."""

    @abstractmethod
    async def pending(self) -> list[Pending]:
        """Inputs recorded but not done, oldest first."""

    @abstractmethod
    async def seen(self, platform_id: str) -> bool: ...

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


class InMemoryInbox(InboxStore):
    def __init__(self) -> None:
        self._items: dict[str, tuple[str, InputLog, str | None, bool]] = {}
        self._platform_ids: set[str] = set()

    async def record(self, context: str, entry: InputLog) -> bool:
        if entry.platform_id is not None:
            if entry.platform_id in self._platform_ids:
                return False
            self._platform_ids.add(entry.platform_id)
        self._items[entry.id] = (context, entry, None, False)
        return True

    def take(self, ids: list[str], run_id: str) -> None:
        for i in ids:
            if i in self._items:
                c, e, _, d = self._items[i]
                self._items[i] = (c, e, run_id, d)

    async def done(self, ids: list[str]) -> None:
        for i in ids:
            self._items.pop(i, None)

    async def pending(self) -> list[Pending]:
        return [Pending(c, e, r) for c, e, r, _ in self._items.values()]

    async def seen(self, platform_id: str) -> bool:
        return platform_id in self._platform_ids


_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    id TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    platform_id TEXT UNIQUE,
    data TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    received REAL NOT NULL,
    handled REAL
);
CREATE INDEX IF NOT EXISTS inbox_state ON inbox (state, received);
"""


class SQLiteInbox(InboxStore):
    """Handled rows are kept (platform ids must stay known); ``prune`` drops old handled rows."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()
        await self.db.ensure_schema("inbox", _SCHEMA)

    async def record(self, context: str, entry: InputLog) -> bool:
        if entry.platform_id is not None and await self.seen(entry.platform_id):
            return False
        await self.db.write(
            "INSERT OR IGNORE INTO inbox (id, context, platform_id, data, state, received) VALUES (?,?,?,?,?,?)",
            (entry.id, context, entry.platform_id, dumps(to_dict(entry)), "received", entry.ts),
        )
        if entry.platform_id is None:
            return True
        row = await self.db.fetchone("SELECT id FROM inbox WHERE platform_id = ?", (entry.platform_id,))
        return row is not None and row[0] == entry.id

    def take(self, ids: list[str], run_id: str) -> None:
        for i in ids:
            self.db.write_soon("UPDATE inbox SET state = 'taken', run_id = ? WHERE id = ?", (run_id, i))

    async def done(self, ids: list[str]) -> None:
        now = time.time()
        for i in ids:
            self.db.write_soon("UPDATE inbox SET state = 'done', handled = ? WHERE id = ?", (now, i))
        await self.db.flush()

    async def pending(self) -> list[Pending]:
        rows = await self.db.fetchall(
            "SELECT context, data, run_id FROM inbox WHERE state != 'done' ORDER BY received"
        )
        out = []
        for context, data, run_id in rows:
            entry = from_dict(json.loads(data))
            assert isinstance(entry, InputLog)
            out.append(Pending(context, entry, run_id))
        return out

    async def seen(self, platform_id: str) -> bool:
        return await self.db.fetchone("SELECT 1 FROM inbox WHERE platform_id = ?", (platform_id,)) is not None

    async def prune(self, older_than: float) -> int:
        rows = await self.db.fetchall(
            "SELECT COUNT(*) FROM inbox WHERE state = 'done' AND handled < ?", (time.time() - older_than,)
        )
        await self.db.write("DELETE FROM inbox WHERE state = 'done' AND handled < ?", (time.time() - older_than,))
        return int(rows[0][0]) if rows else 0


