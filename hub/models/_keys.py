"""A model's pool of API keys, used in turn.

A key answered 429 rests until its ``Retry-After`` has passed; a key answered 401/403 rests
until restart (`KeyPool.refuse()`). `KeyPool.ready()` lists the keys that can answer
now, starting one further each call, so no request waits for a resting key while another
can answer. Keys are known here by their position only: no value is kept, logged or shown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["KeyPool"]


class KeyPool:
    """``size`` keys, known by position (0-based here; 1-based in what operators read)."""

    __slots__ = ("size", "clock", "_until", "_next")

    def __init__(self, size: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1:
            raise ValueError("KeyPool: at least one key")
        self.size = size
        self.clock = clock
        self._until = [0.0] * size  # monotonic time each key rests until; inf: until restart
        self._next = 0

    def ready(self) -> list[int]:
        """The keys that can answer now, in the order to try them: the turn moves on by one
        key each call, so load spreads over the pool."""
        now = self.clock()
        start = self._next
        self._next = (start + 1) % self.size
        return [i for i in ((start + k) % self.size for k in range(self.size)) if self._until[i] <= now]

    def rest(self, key: int, seconds: float) -> None:
        """A 429: ``key`` is not tried for ``seconds``."""
        self._until[key] = max(self._until[key], self.clock() + max(0.0, seconds))

    def refuse(self, key: int) -> None:
        """A 401/403: ``key`` is not tried again until restart."""
        self._until[key] = math.inf

    def refused(self) -> list[int]:
        """The keys resting until restart."""
        return [i for i, t in enumerate(self._until) if t == math.inf]

    def ready_in(self) -> float | None:
        """Seconds until a key can answer (0: one can now); None: every key was refused."""
        soonest = min(self._until)
        if soonest == math.inf:
            return None
        return max(0.0, soonest - self.clock())
