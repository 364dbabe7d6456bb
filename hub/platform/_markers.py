"""Markers a platform keeps in the hub's memory store (a thread the bot follows, a post it
sent), each with the time it was last set, and their pruning: a marker nobody refreshed for
``max_age`` seconds goes, so that markers do not pile up for ever."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["marker", "prune_markers"]


def marker(now: float | None = None) -> dict[str, float]:
    """A marker's value: when it was set (``{"ts": ...}``); truthy, as a bare ``True`` was."""
    return {"ts": time.time() if now is None else now}


async def prune_markers(memory: Any, prefix: str, *, max_age: float, now: float | None = None) -> int:
    """Delete the markers under ``prefix`` in ``memory`` (the hub's memory store) last set more
    than ``max_age`` seconds ago; how many. A marker written before it had a time (``True``)
    is given one now, so it ages from today rather than going at once."""
    now = time.time() if now is None else now
    gone = 0
    for key in await memory.keys(prefix):
        value = await memory.get(key)
        ts = value.get("ts") if isinstance(value, dict) else None
        if not isinstance(ts, (int, float)):
            await memory.set(key, marker(now))
        elif now - ts > max_age:
            await memory.delete(key)
            gone += 1
    return gone
