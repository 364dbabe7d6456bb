"""Who the bot answers: the loop guard for bot-to-bot exchanges, and allow-lists."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["LoopGuard", "AllowList"]


class LoopGuard:
    """Stops bot-to-bot ping-pong: in one chat, at most ``max_turns`` answers to other bots
    within ``window`` seconds; a message from a human resets the count.

    Attributes:
        max_turns: Answers to other bots allowed per chat within ``window``.
        window: Seconds over which answers to bots are counted.
        clock: The clock the window is measured on (a fake one in tests).
    """

    def __init__(
        self, *, max_turns: int = 3, window: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_turns = max_turns
        self.window = window
        self.clock = clock
        # chats with answers to bots in the window, the one answered longest ago first: a
        # chat whose last answer left the window is dropped, so only the window's chats are kept
        self._bot_turns: OrderedDict[Any, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        """The chats whose answers to bots are being counted."""
        return len(self._bot_turns)

    def allow(self, chat: Any, *, from_bot: bool) -> bool:
        """Whether to answer a message in ``chat``: always for a human's (which resets the
        count); for another bot's, while fewer than ``max_turns`` answers to bots fall in ``window``."""
        if not from_bot:
            self._bot_turns.pop(chat, None)
            return True
        now = self.clock()
        self._forget_idle(now)
        turns = self._bot_turns.setdefault(chat, deque())
        while turns and now - turns[0] > self.window:
            turns.popleft()
        if len(turns) >= self.max_turns:
            return False
        turns.append(now)
        self._bot_turns.move_to_end(chat)
        return True

    def _forget_idle(self, now: float) -> None:
        while self._bot_turns:
            chat, turns = next(iter(self._bot_turns.items()))
            if turns and now - turns[-1] <= self.window:
                return
            del self._bot_turns[chat]


class AllowList:
    """Ids allowed (chats, guilds, channels, users). Empty: everything is allowed."""

    def __init__(self, ids: Iterable[Any] = ()) -> None:
        self._ids = {str(i) for i in ids}

    def __bool__(self) -> bool:
        return bool(self._ids)

    def allows(self, *ids: Any) -> bool:
        """True when the list is empty or any of ``ids`` is on it."""
        return not self._ids or any(str(i) in self._ids for i in ids if i is not None)
