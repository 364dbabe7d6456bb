"""The one backoff: exponential delays with jitter, bounded, for every retry in the hub.

The model client, the platform governor and the extensions' pollers all wait with it, so
a retry never spins in a tight loop and never waits without bound. A server's own
``retry_after`` is a floor (never waited for longer than ``most``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(slots=True)
class Backoff:
    """Delays of ``first * 2**attempt`` seconds, capped at ``most``, with jitter.

    ``jitter`` is the fraction of each delay drawn at random (0.5: between half and all
    of it; 0: none), which keeps clients that failed together from retrying together.
    [`delay()`][hub.platform.Backoff.delay] answers for a given attempt;
    [`next()`][hub.platform.Backoff.next] and [`reset()`][hub.platform.Backoff.reset] count the attempts
    for a loop that retries until it succeeds.
    """

    first: float = 1.0
    """The first delay, in seconds."""
    most: float = 60.0
    """The longest delay, in seconds."""
    jitter: float = 0.5
    """The fraction of each delay drawn at random."""
    _attempt: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.first < 0 or self.most < 0:
            raise ValueError(f"Backoff: first ({self.first}) and most ({self.most}) must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"Backoff: jitter must be between 0 and 1, not {self.jitter}")

    def delay(self, attempt: int, *, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0 for the first retry)."""
        cap = min(self.most, self.first * 2 ** min(attempt, 62))
        d = cap * random.uniform(1.0 - self.jitter, 1.0) if self.jitter else cap
        if retry_after is not None:
            d = max(d, min(max(0.0, retry_after), self.most))
        return d

    def next(self, *, retry_after: float | None = None) -> float:
        """The delay after one more failure in a row."""
        d = self.delay(self._attempt, retry_after=retry_after)
        self._attempt += 1
        return d

    def reset(self) -> None:
        """A success: the next failure waits ``first`` again."""
        self._attempt = 0

    @property
    def failures(self) -> int:
        """Failures in a row since the last [`reset()`][hub.platform.Backoff.reset]."""
        return self._attempt
