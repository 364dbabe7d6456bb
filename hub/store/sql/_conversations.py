"""Retention of conversations on SQL: each idle conversation's row and all its keys go
together (hub/store/_conversations.py says why it is judged by its last activity)."""

from __future__ import annotations

import asyncio

from .._conversations import CONVERSATION_PREFIXES, conversation_keys
from ._sqlite import SqlDatabase

__all__ = ["prune_conversations"]

_IDLE = "keep = 0 AND active < ?"


async def prune_conversations(db: SqlDatabase, before: float, *, batch: int, dry_run: bool = False) -> int:
    """Delete the conversations not marked ``keep`` whose last activity is before ``before``,
    ``batch`` at a time, each row first and then its keys; how many conversations.

    The row's delete says which conversations were still idle at that instant (one that a
    run began meanwhile stays, keys and all); a run that begins after it starts a new life
    (a new generation), so nothing a pruned run held can be written back under the old one.
    """
    if dry_run:
        rows = await db.fetchall(f"SELECT COUNT(*) FROM conversations WHERE {_IDLE}", (before,))
        return int(rows[0][0]) if rows else 0
    total = 0
    while True:
        ids = [r[0] for r in await db.fetchall(f"SELECT id FROM conversations WHERE {_IDLE} LIMIT ?", (before, batch))]
        if ids:
            marks = ",".join("?" * len(ids))
            gone = [
                r[0]
                for r in await db.fetchall(
                    f"DELETE FROM conversations WHERE id IN ({marks}) AND {_IDLE} RETURNING id", (*ids, before)
                )
            ]
            keys = [k for c in gone for k in conversation_keys(c, CONVERSATION_PREFIXES)]
            if keys:
                await db.write_apart(f"DELETE FROM kv WHERE key IN ({','.join('?' * len(keys))})", keys)
            total += len(gone)
        if len(ids) < batch:
            return total
        await asyncio.sleep(0)  # let runs write between batches
