"""Outbound rate limits shared by every worker: the [`Governor`][hub.platform.Governor] of each
``hub run`` asks one limiter in Redis (``[store] redis_url``) before each send, so a chat's
rate and a bot token's global rate hold across workers, not only within one.

The windows are the ``limits`` library's moving windows on Redis (one atomic script per
hit), keyed by platform, bot and chat. Without ``redis_url`` each worker paces on its own
(the in-process governor, the default; right for one worker on SQLite).
"""

from __future__ import annotations

import logging
import math
import time
from abc import ABC, abstractmethod
from typing import Any, Protocol


class RateLimit(Protocol):
    """What a limit is here ([`hub.platform.RateLimit`][hub.platform.RateLimit]): ``count`` sends per
    ``per`` seconds."""

    @property
    def count(self) -> int: ...

    @property
    def per(self) -> float: ...


__all__ = ["OutboundLimiter", "RedisLimiter", "window_item"]

log = logging.getLogger("hub.platform")


def window_item(limit: RateLimit) -> Any:
    """``limit`` as a ``limits`` moving window. Its windows are whole seconds: a window of
    ``per`` seconds is widened to the next whole second with the count scaled down (never
    up), so the shared limit is never looser than the configured one."""
    from limits import RateLimitItemPerSecond

    seconds = max(1, math.ceil(limit.per))
    count = max(1, math.floor(limit.count * seconds / limit.per + 1e-9))
    return RateLimitItemPerSecond(count, seconds)


class OutboundLimiter(ABC):
    """A rate limiter that several workers share."""

    @abstractmethod
    async def hit(self, limit: RateLimit, *key: str) -> float:
        """Count one send against ``limit`` for ``key`` if the window has room, and return
        0; else count nothing and return the seconds to wait before asking again."""

    async def close(self) -> None:  # noqa: B027 - limiters without connections have nothing to close
        """Release the limiter's connections when the hub stops; idempotent."""


class RedisLimiter(OutboundLimiter):
    """Moving windows in Redis at ``url`` (``redis://host:6379/0``), through ``limits``.
    ``namespace`` keeps hubs that share one Redis apart (keys ``hub:<namespace>:...``).

    Attributes:
        url: The Redis server (``redis://host:6379/0``).
        namespace: What keeps this hub's keys apart from others' on the same Redis.
    """

    def __init__(self, url: str, *, namespace: str = "hub") -> None:
        self.url = url
        self.namespace = namespace
        self._limiter: Any = None
        self._items: dict[tuple[int, float], Any] = {}

    def _strategy(self) -> Any:
        if self._limiter is None:
            from limits.aio.strategies import MovingWindowRateLimiter
            from limits.storage import storage_from_string

            self._limiter = MovingWindowRateLimiter(storage_from_string(f"async+{self.url}", wrap_exceptions=True))
        return self._limiter

    async def hit(self, limit: RateLimit, *key: str) -> float:
        item = self._items.get((limit.count, limit.per))
        if item is None:
            item = self._items[(limit.count, limit.per)] = window_item(limit)
        strategy = self._strategy()
        ids = (self.namespace, *key)
        if await strategy.hit(item, *ids):
            return 0.0
        stats = await strategy.get_window_stats(item, *ids)
        return max(0.01, float(stats.reset_time) - time.time())

    async def close(self) -> None:
        if self._limiter is not None:
            storage = self._limiter.storage
            self._limiter = None
            reset = getattr(storage, "close", None)
            if reset is not None:
                try:
                    await reset()
                except Exception as e:  # closing a connection that is gone: nothing to give back
                    log.debug("outbound limiter: closing %s: %s", self.url, e)
