"""Sending through a platform: pacing, ``retry_after``, bounded retries, and the errors that steer them."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..backoff import Backoff
from ..errors import HubError
from ._shared import OutboundLimiter

__all__ = ["RateLimited", "TransientSendError", "PermanentSendError", "SendFailed", "RateLimit", "Governor"]

log = logging.getLogger("hub.platform")
T = TypeVar("T")


class RateLimited(Exception):
    """The platform asked us to wait ``retry_after`` seconds (HTTP 429, flood control).

    Attributes:
        retry_after: Seconds to wait before the next send (at least 0).
        scope: ``chat``: this chat is paused; ``global``: every chat of the bot is.
    """

    def __init__(self, retry_after: float, *, scope: str = "chat", message: str = "") -> None:
        self.retry_after = max(0.0, float(retry_after))
        self.scope = scope  # "chat" or "global"
        super().__init__(message or f"rate limited: retry after {self.retry_after:g}s")


class TransientSendError(Exception):
    """A failure worth retrying: 5xx, a reset connection, a timeout."""


class PermanentSendError(Exception):
    """A failure that another attempt will not fix: 4xx other than 429, a forbidden chat."""


class SendFailed(HubError):
    """A send given up on; the output is recorded as not sent, with this reason.

    Attributes:
        platform: The platform's name.
        chat: Where the message was going.
        reason: Why it was given up on, as the run's log shows it.
    """

    def __init__(self, platform: str, chat: Any, reason: str) -> None:
        self.platform = platform
        self.chat = chat
        self.reason = reason
        super().__init__(f"{platform}: sending to {chat} failed: {reason}")


@dataclass(frozen=True, slots=True)  # frozen: Governor's defaults are one shared instance
class RateLimit:
    """At most ``count`` sends per ``per`` seconds (a sliding window)."""

    count: int
    """Sends allowed in a window."""
    per: float
    """The window, in seconds."""


@dataclass(slots=True)
class _Window:
    limit: RateLimit
    times: deque[float] = field(default_factory=deque)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def wait_time(self, now: float) -> float:
        while self.times and now - self.times[0] >= self.limit.per:
            self.times.popleft()
        if len(self.times) < self.limit.count:
            return 0.0
        return self.times[0] + self.limit.per - now


class Governor:
    """Outbound pacing and retries for one platform.

    ``per_chat`` and ``global_`` are sliding windows (Telegram: about 1 message a second per
    chat, 30 a second overall). A [`RateLimited`][hub.platform.RateLimited] from the platform pauses that chat
    (or every chat, for a global limit) for ``retry_after`` and retries; transient errors
    are retried with exponential backoff and jitter; everything is bounded by
    ``max_attempts`` and ``max_wait``. Messages to one chat are sent in order.

    A platform makes one when it starts, calls [`report_to`][hub.platform.Governor.report_to]
    with the hub, and sends every message with ``await governor.send(chat, lambda: post(...))``.

    Args:
        platform: The platform's name, as metrics and errors name it.
        per_chat: The limit per chat; None: none.
        global_: The limit for the whole bot; None: none.
        max_attempts: Tries per message before [`SendFailed`][hub.platform.SendFailed].
        max_wait: Seconds a message may wait in all (pauses and backoff) before it fails.
        base_delay: The first backoff after a transient error, in seconds (then doubled, with jitter).
        clock: The clock the windows are measured on (a fake one in tests).
        sleep: How to wait (a fake one in tests).
        on_send: Called with (platform, ok) after each message; [`report_to`][hub.platform.Governor.report_to] sets it.
        on_rate_limited: Called with the platform at each 429; [`report_to`][hub.platform.Governor.report_to] sets it.
        shared: Limits shared with other workers ([`OutboundLimiter`][hub.platform.OutboundLimiter]);
            [`report_to`][hub.platform.Governor.report_to] sets the hub's.
        bot: Whose global limit this is (the bot token's identity), when one platform runs several bots.

    Attributes:
        platform: The platform's name.
        per_chat: The limit per chat, or None.
        max_attempts: Tries per message.
        max_wait: Seconds a message may wait in all.
        base_delay: The first backoff after a transient error.
        clock: The clock the windows are measured on.
        sleep: How it waits.
        on_send: Called with (platform, ok) after each message.
        on_rate_limited: Called with the platform at each 429.
        shared: The limits shared with other workers, or None.
        bot: Whose global limit this is.
        sent: Messages sent so far.
        failed: Messages that failed for good so far.
        rate_limited: 429s received so far.
    """

    def __init__(
        self,
        platform: str,
        *,
        per_chat: RateLimit | None = RateLimit(1, 1.0),
        global_: RateLimit | None = RateLimit(30, 1.0),
        max_attempts: int = 5,
        max_wait: float = 120.0,
        base_delay: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        on_send: Callable[[str, bool], None] | None = None,
        on_rate_limited: Callable[[str], None] | None = None,
        shared: OutboundLimiter | None = None,
        bot: str = "",
    ) -> None:
        self.platform = platform
        self.per_chat = per_chat
        self.max_attempts = max_attempts
        self.max_wait = max_wait
        self.base_delay = base_delay
        self.clock = clock
        self.sleep = sleep
        self.on_send = on_send
        self.on_rate_limited = on_rate_limited
        self.shared = shared  # with workers: the same limits held across them (report_to)
        self.bot = bot  # whose global limit: the bot token's identity, when one platform runs several
        self._global_limit = global_
        self._shared_warned = False
        self._global = _Window(global_) if global_ else None
        self._chats: dict[Any, _Window] = {}
        self._chat_locks: dict[Any, asyncio.Lock] = {}
        self._paused_until: dict[Any, float] = {}
        self._global_paused_until = 0.0
        self.sent = 0
        self.failed = 0
        self.rate_limited = 0

    def report_to(self, hub: Any) -> None:
        """Count this governor's sends and 429s in the hub's metrics (``/metrics``), the one
        way a platform wires them; a hub without metrics is fine."""
        metrics = getattr(hub, "metrics", None)
        if metrics is not None:
            self.on_send = metrics.platform_send
            self.on_rate_limited = metrics.platform_429
            declare = getattr(metrics, "declare_platform", None)
            if declare is not None:  # its series exist at 0 before the first send
                declare(self.platform)
        shared = getattr(hub, "outbound_limiter", None)
        if shared is not None and self.shared is None:
            self.shared = shared

    def _chat_window(self, chat: Any) -> _Window | None:
        if self.per_chat is None:
            return None
        w = self._chats.get(chat)
        if w is None:
            if len(self._chats) > 10_000:  # bound memory: drop idle windows
                now = self.clock()
                for k in [k for k, v in self._chats.items() if not v.times or now - v.times[-1] > v.limit.per]:
                    del self._chats[k]
            w = self._chats[chat] = _Window(self.per_chat)
        return w

    async def _pace(self, chat: Any) -> None:
        while True:
            now = self.clock()
            wait = max(self._global_paused_until - now, self._paused_until.get(chat, 0.0) - now, 0.0)
            cw = self._chat_window(chat)
            if cw is not None:
                wait = max(wait, cw.wait_time(now))
            if self._global is not None:
                wait = max(wait, self._global.wait_time(now))
            if wait <= 0:
                break
            await self.sleep(wait)
        if self.shared is not None:
            await self._pace_shared(chat)
        now = self.clock()
        if cw is not None:
            cw.times.append(now)
        if self._global is not None:
            self._global.times.append(now)

    async def _pace_shared(self, chat: Any) -> None:
        """Wait until the limiter every worker shares has room for this chat, then for the
        bot's global limit. A limiter that fails is logged and the send goes on, paced by
        this worker's own windows: a message is never lost to the limiter."""
        assert self.shared is not None
        checks: list[tuple[RateLimit, tuple[str, ...]]] = []
        if self.per_chat is not None:
            checks.append((self.per_chat, (self.platform, self.bot, "chat", str(chat))))
        if self._global_limit is not None:
            checks.append((self._global_limit, (self.platform, self.bot, "global")))
        for limit, key in checks:
            while True:
                try:
                    wait = await self.shared.hit(limit, *key)
                except Exception as e:
                    if not self._shared_warned:
                        log.warning(
                            "%s: the shared rate limiter failed (%s); pacing this worker alone", self.platform, e
                        )
                        self._shared_warned = True
                    return
                self._shared_warned = False
                if wait <= 0:
                    break
                await self.sleep(wait)

    async def send(self, chat: Any, fn: Callable[[], Awaitable[T]]) -> T:
        """Call ``fn`` (one platform request) for ``chat``, paced and retried. Raises SendFailed."""
        lock = self._chat_locks.get(chat)
        if lock is None:
            lock = self._chat_locks[chat] = asyncio.Lock()
        async with lock:
            try:
                return await self._send(chat, fn)
            finally:
                if not lock._waiters:  # drop idle locks
                    self._chat_locks.pop(chat, None)

    async def _send(self, chat: Any, fn: Callable[[], Awaitable[T]]) -> T:
        waited = 0.0
        last = "no attempt"
        for attempt in range(1, self.max_attempts + 1):
            await self._pace(chat)
            try:
                result = await fn()
            except RateLimited as e:
                self.rate_limited += 1
                if self.on_rate_limited:
                    self.on_rate_limited(self.platform)
                last = str(e)
                delay = e.retry_after + random.uniform(0, 0.1)
                if waited + delay > self.max_wait:
                    break
                until = self.clock() + delay
                if e.scope == "global":
                    self._global_paused_until = max(self._global_paused_until, until)
                else:
                    self._paused_until[chat] = max(self._paused_until.get(chat, 0.0), until)
                log.warning(
                    "%s: rate limited sending to %s; retrying in %.2fs (attempt %d)",
                    self.platform,
                    chat,
                    delay,
                    attempt,
                )
                waited += delay
                continue
            except TransientSendError as e:
                last = str(e) or type(e).__name__
                delay = Backoff(self.base_delay, self.max_wait).delay(attempt - 1)
                if waited + delay > self.max_wait:
                    break
                log.warning("%s: sending to %s failed (%s); retrying in %.2fs", self.platform, chat, last, delay)
                await self.sleep(delay)
                waited += delay
                continue
            except PermanentSendError as e:
                self._count(False)
                raise SendFailed(self.platform, chat, str(e)) from e
            self._paused_until.pop(chat, None)
            self._count(True)
            return result
        self._count(False)
        raise SendFailed(self.platform, chat, f"gave up after {attempt} attempts: {last}")

    def _count(self, ok: bool) -> None:
        if ok:
            self.sent += 1
        else:
            self.failed += 1
        if self.on_send:
            self.on_send(self.platform, ok)
