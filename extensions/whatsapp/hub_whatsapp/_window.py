"""WhatsApp's 24-hour customer-service window: a free-form message reaches a user only
within 24 hours of their last message; after that only an approved template does (Meta
accepts a free-form one, then fails it with error 131047).

Each user's window is kept in the hub's memory store, so every worker sees it:
``whatsapp:window:<wa_id>`` is the time (Meta's, seconds) of their newest message, and
``whatsapp:closed:<wa_id>`` when Meta last refused a message for the window (a ``failed``
status with 131047). The window is open while the newest message is newer than the
refusal and younger than 24 hours less `MARGIN`. Writers only ever move a time
forward, by the store's compare-and-set (``memory.update``): two workers taking two messages
of one user at once keep the newer time, whichever writes last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["Windows", "WINDOW", "MARGIN"]

WINDOW = 24 * 3600.0
MARGIN = 300.0
"""Seconds before the window's end at which a message is no longer sent free-form: a long
reply's last part must not arrive after it."""


class Windows:
    """The users' windows, in ``memory`` (``hub.memory``)."""

    def __init__(self, memory: Any, *, clock: Callable[[], float] = time.time) -> None:
        self.memory = memory
        self.clock = clock

    async def _advance(self, key: str, at: float) -> None:
        def later(current: Any) -> float:
            return max(float(current), at) if isinstance(current, int | float) else at

        await self.memory.update(key, later)

    async def opened(self, wa_id: str, at: float) -> None:
        """``wa_id`` wrote at ``at`` (their message's timestamp; now when it has none): a
        refusal of the same second or before is over (Meta's times are whole seconds)."""
        at = at or self.clock()
        await self._advance(f"whatsapp:window:{wa_id}", at)

        key = f"whatsapp:closed:{wa_id}"
        closed = await self.memory.get(key)
        if isinstance(closed, int | float) and 0 < closed <= at:

            def reopened(current: Any) -> float:  # 0: no refusal (the store keeps no None)
                return 0.0 if not isinstance(current, int | float) or current <= at else float(current)

            await self.memory.update(key, reopened)

    async def closed(self, wa_id: str, at: float | None = None) -> None:
        """Meta refused a free-form message to ``wa_id`` for the window, at ``at``."""
        await self._advance(f"whatsapp:closed:{wa_id}", at or self.clock())

    async def remaining(self, wa_id: str) -> float:
        """Seconds left in ``wa_id``'s window (0: closed, or never opened)."""
        last = await self.memory.get(f"whatsapp:window:{wa_id}")
        if not isinstance(last, int | float):
            return 0.0
        closed = await self.memory.get(f"whatsapp:closed:{wa_id}")
        if isinstance(closed, int | float) and closed > 0 and closed >= last:
            return 0.0
        return max(0.0, last + WINDOW - MARGIN - self.clock())

    async def is_open(self, wa_id: str) -> bool:
        return await self.remaining(wa_id) > 0
