"""What every platform extension needs, and the API it lives on beside ``hub`` itself.

Splitting long text (:func:`split_message`), an outbound :class:`Governor` (pacing,
``retry_after``, retries), the one :class:`Backoff`, a :class:`TypingIndicator`, the
:func:`reply_target` lookup, a :class:`LoopGuard` for bot-to-bot exchanges,
:class:`AllowList`, the base of every platform's settings (:class:`PlatformSettings`) and
:func:`quiet_loggers` for a client library's chatter.

The core never names a platform; extensions map their client's errors onto
:class:`RateLimited`, :class:`TransientSendError` and :class:`PermanentSendError` and send
through a :class:`Governor`, which honours ``retry_after``, spaces messages per chat and
globally, and gives up with :class:`SendFailed` after a bounded number of attempts, so a
send that finally fails is a failed output in the run's log, never reported as sent.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .backoff import Backoff
from .errors import HubError
from .logconf import quiet_loggers
from .logs import OutputLog

if TYPE_CHECKING:
    from .engine import RunContext

__all__ = [
    "Backoff",
    "split_message",
    "utf16_len",
    "RateLimited",
    "TransientSendError",
    "PermanentSendError",
    "SendFailed",
    "Governor",
    "RateLimit",
    "LoopGuard",
    "AllowList",
    "TypingIndicator",
    "reply_target",
    "PlatformSettings",
    "quiet_loggers",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

# --- splitting ------------------------------------------------------------------------------

_FENCE = re.compile(r"(^|\n)(```[^\n]*\n.*?\n```)(?=\n|$)", re.S)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts its 4096 limit."""
    return len(text.encode("utf-16-le")) // 2


def _pieces(text: str, limit: int, length: Callable[[str], int]) -> list[str]:
    """Cut text into atomic pieces no longer than ``limit``: fenced code blocks whole when
    they fit, else split by lines with their fence reopened; prose by paragraph, line,
    sentence, word, and as a last resort hard cuts. Pieces concatenate back to the text
    (apart from the fences added to split code blocks)."""
    out: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        start = m.start(2)
        if start > pos:
            out.extend(_prose(text[pos:start], limit, length))
        block = m.group(2)
        if length(block) <= limit:
            out.append(block)
        else:
            out.extend(_split_code(block, limit, length))
        pos = m.end(2)
    if pos < len(text):
        out.extend(_prose(text[pos:], limit, length))
    return out


def _prose(text: str, limit: int, length: Callable[[str], int]) -> list[str]:
    if length(text) <= limit:
        return [text]
    for sep in (r"(?<=\n\n)", r"(?<=\n)", r"(?<=[.!?]\s)|(?<=[。！？])", r"(?<= )"):
        parts = [p for p in re.split(sep, text) if p]
        if len(parts) > 1:
            out: list[str] = []
            for p in parts:
                out.extend(_prose(p, limit, length) if length(p) > limit else [p])
            return out
    return _hard(text, limit, length)


def _hard(text: str, limit: int, length: Callable[[str], int]) -> list[str]:
    out, cur = [], ""
    for ch in text:
        if cur and length(cur + ch) > limit:
            out.append(cur)
            cur = ""
        cur += ch
    if cur:
        out.append(cur)
    return out


def _split_code(block: str, limit: int, length: Callable[[str], int]) -> list[str]:
    first_nl = block.index("\n")
    opener, body = block[:first_nl], block[first_nl + 1 : -3].rstrip("\n")
    closer = "```"
    overhead = length(opener) + length(closer) + 2
    room = max(1, limit - overhead)
    lines = body.split("\n")
    chunks: list[str] = []
    cur: list[str] = []
    cur_len = 0
    for line in lines:
        pieces = _hard(line, room, length) if length(line) > room else [line]
        for piece in pieces:
            add = length(piece) + (1 if cur else 0)
            if cur and cur_len + add > room:
                chunks.append("\n".join(cur))
                cur, cur_len = [], 0
                add = length(piece)
            cur.append(piece)
            cur_len += add
    if cur:
        chunks.append("\n".join(cur))
    return [f"{opener}\n{c}\n{closer}" for c in chunks]


def split_message(text: str, limit: int, *, length: Callable[[str], int] = len) -> list[str]:
    """Split ``text`` into messages of at most ``limit`` (as measured by ``length``).

    Never truncates: every character is in some message. Splits prefer paragraph, then
    line, sentence and word boundaries; fenced code blocks stay whole when they fit, and a
    longer one is split with its fence closed and reopened so every message is balanced.
    Leading and trailing blank lines of each message are dropped; empty messages are not
    produced.
    """
    if limit < 16:
        raise ValueError("limit must be at least 16")
    if length(text) <= limit:
        return [text] if text.strip() else []
    messages: list[str] = []
    cur = ""
    for piece in _pieces(text, limit, length):
        if cur and length(cur + piece) > limit:
            messages.append(cur)
            cur = ""
        cur += piece
    if cur:
        messages.append(cur)
    return [m.strip("\n") for m in messages if m.strip()]


# --- sending --------------------------------------------------------------------------------


class RateLimited(Exception):
    """The platform asked us to wait ``retry_after`` seconds (HTTP 429, flood control)."""

    def __init__(self, retry_after: float, *, scope: str = "chat", message: str = "") -> None:
        self.retry_after = max(0.0, float(retry_after))
        self.scope = scope  # "chat" or "global"
        super().__init__(message or f"rate limited: retry after {self.retry_after:g}s")


class TransientSendError(Exception):
    """A failure worth retrying: 5xx, a reset connection, a timeout."""


class PermanentSendError(Exception):
    """A failure that another attempt will not fix: 4xx other than 429, a forbidden chat."""


class SendFailed(HubError):
    """A send given up on; the output is recorded as not sent, with this reason."""

    def __init__(self, platform: str, chat: Any, reason: str) -> None:
        self.platform = platform
        self.chat = chat
        self.reason = reason
        super().__init__(f"{platform}: sending to {chat} failed: {reason}")


@dataclass(slots=True)
class RateLimit:
    """At most ``count`` sends per ``per`` seconds (a sliding window)."""

    count: int
    per: float


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
    chat, 30 a second overall). A :class:`RateLimited` from the platform pauses that chat
    (or every chat, for a global limit) for ``retry_after`` and retries; transient errors
    are retried with exponential backoff and jitter; everything is bounded by
    ``max_attempts`` and ``max_wait``. Messages to one chat are sent in order.
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
        self._global = _Window(global_) if global_ else None
        self._chats: dict[Any, _Window] = {}
        self._chat_locks: dict[Any, asyncio.Lock] = {}
        self._paused_until: dict[Any, float] = {}
        self._global_paused_until = 0.0
        self.sent = 0
        self.failed = 0
        self.rate_limited = 0

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
        now = self.clock()
        if cw is not None:
            cw.times.append(now)
        if self._global is not None:
            self._global.times.append(now)

    async def send(self, chat: Any, fn: Callable[[], Awaitable[T]]) -> T:
        """Call ``fn`` (one platform request) for ``chat``, paced and retried. Raises SendFailed."""
        lock = self._chat_locks.get(chat)
        if lock is None:
            lock = self._chat_locks[chat] = asyncio.Lock()
        async with lock:
            try:
                return await self._send(chat, fn)
            finally:
                if not lock._waiters:  # type: ignore[attr-defined]  # drop idle locks
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
                log.warning("%s: rate limited sending to %s; retrying in %.2fs (attempt %d)", self.platform, chat, delay, attempt)
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


# --- guarding -------------------------------------------------------------------------------


class LoopGuard:
    """Stops bot-to-bot ping-pong: in one chat, at most ``max_turns`` answers to other bots
    within ``window`` seconds; a message from a human resets the count."""

    def __init__(self, *, max_turns: int = 3, window: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
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


# --- typing ---------------------------------------------------------------------------------


class TypingIndicator:
    """Keeps a platform's "typing..." on in a chat while any run for it is in progress.

    ``show(chat)`` is one request that shows the indicator; it is repeated every
    ``interval`` seconds (platforms clear it after a few seconds) until every future
    watched for the chat is done. One task per chat, made with ``create_task`` (pass
    :meth:`Hub.create_task <hub.Hub.create_task>`); an error from ``show`` ends that chat's
    indicator (logged), never the run.
    """

    def __init__(
        self,
        platform: str,
        show: Callable[[Any], Awaitable[Any]],
        *,
        create_task: Callable[..., asyncio.Task[Any]],
        interval: float = 4.5,
    ) -> None:
        self.platform = platform
        self.show = show
        self.create_task = create_task
        self.interval = interval
        self._pending: dict[Any, set[asyncio.Future[Any]]] = {}
        self._tasks: dict[Any, asyncio.Task[Any]] = {}

    def watch(self, chat: Any, until: asyncio.Future[Any]) -> None:
        """Show typing in ``chat`` until ``until`` (and every other future watched there) is done."""
        self._pending.setdefault(chat, set()).add(until)
        if chat not in self._tasks:
            self._tasks[chat] = self.create_task(self._keep(chat), name=f"{self.platform}:typing:{chat}")

    @property
    def chats(self) -> list[Any]:
        """Chats that show typing now."""
        return list(self._tasks)

    async def _keep(self, chat: Any) -> None:
        try:
            while True:
                waiting = {f for f in self._pending.get(chat, ()) if not f.done()}
                if not waiting:
                    return
                self._pending[chat] = waiting
                try:
                    await self.show(chat)
                except Exception as e:  # best effort: no permission, a dropped connection
                    log.info("%s: no typing indicator in %s: %s", self.platform, chat, e)
                    return
                await asyncio.wait(waiting, timeout=self.interval)
        finally:
            self._tasks.pop(chat, None)
            self._pending.pop(chat, None)

    async def stop(self) -> None:
        """Cancel every chat's indicator (a task cancelled before it ran has no finally to clean up)."""
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._pending.clear()


# --- replying -------------------------------------------------------------------------------


def reply_target(
    ctx: RunContext, key: str, *, where: dict[str, Any] | None = None, once_for: str | None = None
) -> dict[str, Any] | None:
    """The metadata of the newest input of this run that carries ``key`` (a message id).

    ``where`` narrows it to inputs whose metadata has those values (compared as strings:
    ids arrive as ints or strings). With ``once_for`` (an output type), a message that a
    sent output of that type already answered (its data's ``reply_to``) is not a target
    again: only the first reply of a run quotes the message it answers.
    """
    found = None
    for entry in reversed(ctx.inputs):
        meta = entry.meta or {}
        if meta.get(key) is None:
            continue
        if where and any(str(meta.get(k)) != str(v) for k, v in where.items()):
            continue
        found = meta
        break
    if found is None:
        return None
    if once_for is not None:
        target = str(found[key])
        for e in ctx.logs:
            if isinstance(e, OutputLog) and e.type == once_for and e.sent and isinstance(e.data, dict):
                if str(e.data.get("reply_to")) == target:
                    return None
    return found


# --- settings -------------------------------------------------------------------------------


class PlatformSettings(BaseModel):
    """The settings every platform shares, declared once with one set of defaults.

    A platform's ``[extensions.NAME]`` model subclasses it and adds its own keys (the token,
    its allow-lists by chat or channel). Unknown keys are errors.
    """

    model_config = ConfigDict(extra="forbid")

    allowed_users: list[int | str] = Field(default_factory=list)
    """Users the bot answers (ids, or usernames where the platform has them); empty: everyone."""
    loop_guard_turns: int = Field(3, ge=0)
    """Answers to other bots per chat within ``loop_guard_window`` before the bot stops (0: no guard)."""
    loop_guard_window: float = Field(600.0, gt=0)
    """Seconds; a message from a human in the chat resets the count."""
    send_attempts: int = Field(5, ge=1, le=20)
    """Attempts per message (429s and network errors are retried)."""
    send_max_wait: float = Field(120.0, ge=0)
    """Seconds of retry_after and backoff one message may wait in all before it is given up."""

    def loop_guard(self, *, clock: Callable[[], float] = time.monotonic) -> LoopGuard | None:
        """The loop guard these settings ask for (None when ``loop_guard_turns`` is 0)."""
        if not self.loop_guard_turns:
            return None
        return LoopGuard(max_turns=self.loop_guard_turns, window=self.loop_guard_window, clock=clock)
