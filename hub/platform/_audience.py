"""Who the bot answers: the loop guard for bot-to-bot exchanges, and allow-lists."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["LoopGuard", "AllowList"]


class LoopGuard:
    """Stops bot-to-bot ping-pong: in one chat, at most ``max_turns`` answers to other bots
    within ``window`` seconds; a message from a human resets the count."""

    def __init__(
        self, *, max_turns: int = 3, window: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_turns = max_turns
        self.window = window
        self.clock = clock
        self._bot_turns: dict[Any, deque[float]] = {}

    def allow(self, chat: Any, *, from_bot: bool) -> bool:
        if not from_bot:
            self._bot_turns.pop(chat, None)
            return True
        now = self.clock()
        turns = self._bot_turns.setdefault(chat, deque())
        while turns and now - turns[0] > self.window:
            turns.popleft()
        if len(turns) >= self.max_turns:
            return False
        turns.append(now)
        return True


class AllowList:
    """Ids allowed (chats, guilds, channels, users). Empty: everything is allowed."""

    def __init__(self, ids: Iterable[Any] = ()) -> None:
        self._ids = {str(i) for i in ids}

    def __bool__(self) -> bool:
        return bool(self._ids)

    def allows(self, *ids: Any) -> bool:
        """True when the list is empty or any of ``ids`` is on it."""
        return not self._ids or any(str(i) in self._ids for i in ids if i is not None)
