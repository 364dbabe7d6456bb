"""A reply edited in place while the model writes it: the platform-neutral part of live replies.

[`LiveMessage`][hub.platform.LiveMessage] reads a [`LiveText`][hub.LiveText] and keeps one platform message (or,
past the platform's length limit, several, in order) showing it. A platform gives it only
its primitives, ``send(text) -> message id`` and ``edit(message id, text)``, which raise
[`SendFailed`][hub.platform.SendFailed] when given up on; every request goes through the
platform's [`Governor`][hub.platform.Governor], so edits are paced per chat and a 429's
``retry_after`` is honoured like a send's.

- The first message is sent once there is something worth showing (``first_chars``
  characters, or the whole text if it is shorter); it is then edited at most once per
  ``interval`` seconds, and once more, promptly, when the output closes.
- A message is filled up to ``limit`` (as ``length`` counts: UTF-16 units on Telegram), then
  sealed, and the text goes on in a new message. A cut inside a fenced code block closes the
  fence in that message and reopens it (same language line) in the next, so every state
  shown has balanced fences.
- Each message id is recorded through ``on_part`` (``ctx.part_sent``: the outbound ledger)
  as soon as the message exists, before its first edit, so that a restart after a crash
  edits it (``adopt``) instead of sending a second copy.
- When an edit fails (a message too old, deleted, or any error given up on), that message is
  left as it is, no further edits are tried, and once the output closes the remainder (what
  no message shows yet) is sent once, as new message(s).
- The final state shows exactly the output's final text, split as above.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine import LiveText
from ..logs import OutputLog
from ._fences import fenced_blocks, open_fence
from ._send import SendFailed

if TYPE_CHECKING:
    from ..definitions import RunContext

__all__ = ["LiveMessage", "LiveResult", "balance_fences", "live_drafts"]

log = logging.getLogger("hub.platform")


def _open_fence(text: str) -> str | None:
    """The opening line of a fenced code block left open at the end of ``text``, if any."""
    block = open_fence(text)
    return None if block is None else block.opener


def balance_fences(text: str) -> str:
    """``text`` with a fenced code block left open at its end closed (by the fence that
    closes it: the same character, as many, at the opener's indentation)."""
    block = open_fence(text)
    if block is None:
        return text
    closer = " " * block.indent + block.closer
    return text + (closer if text.endswith("\n") else "\n" + closer)


_UNSENT: Any = object()  # a continuation that could not be sent now


@dataclass(slots=True)
class _Shown:
    """One platform message: the span of the text it holds, and what it shows now."""

    id: Any
    start: int
    end: int  # of the span it shows now
    reopen: str  # a fence opener it begins with (the span continues a code block)
    text: str | None  # what it shows (None: not known, an adopted message)
    sealed: bool = False  # full: its span no longer grows


@dataclass(slots=True)
class LiveResult:
    """What a live reply did: its message ids in order, how many edits, and whether an edit
    failed (the remainder was then sent as new messages)."""

    message_ids: list[Any]
    """The ids of the messages that show the text, in order."""
    edits: int
    """How many edits were made."""
    sends: int
    """How many messages were sent."""
    fell_back: bool
    """Whether an edit failed, so the remainder was sent as new messages."""


class LiveMessage:
    """Shows a [`LiveText`][hub.LiveText] as messages edited in place, for an output declared
    ``live=True``: a platform gives it its ``send`` and ``edit`` and awaits
    [`deliver`][hub.platform.LiveMessage.deliver].

    - The first message is sent once there is something worth showing (``first_chars``
      characters, or the whole text if it is shorter); it is then edited at most once per
      ``interval`` seconds, and once more, promptly, when the output closes.
    - A message is filled up to ``limit`` (as ``length`` counts), then sealed, and the text
      goes on in a new message; a fenced code block cut there is closed and reopened, so
      every state shown has balanced fences.
    - Each message id is recorded through ``on_part`` as soon as the message exists, so a
      restart after a crash edits it (``adopt``) instead of sending a second copy.
    - When an edit fails, that message is left as it is, and once the output closes the
      remainder is sent once, as new message(s).

    Args:
        send: ``await send(text)``: posts a message and returns its id; raises
            [`SendFailed`][hub.platform.SendFailed] when given up on (send through the
            platform's [`Governor`][hub.platform.Governor]).
        edit: ``await edit(message_id, text)``: replaces a message's text; raises as ``send``.
        limit: The most a message may hold, as ``length`` counts.
        length: How the platform counts a text's length ([`utf16_len`][hub.platform.utf16_len] on Telegram).
        interval: The least seconds between two edits of a message.
        first_chars: How much text the first message waits for.
        on_part: ``await on_part(index, message_id)`` as each message exists
            (``ctx.part_sent``: the outbound ledger).
        adopt: Message ids a run that was cut off already sent (from
            [`live_drafts`][hub.platform.live_drafts]), edited in place of new ones.
        delete: ``await delete(message_id)``: removes an adopted message the final text no longer needs.
        clock: The clock intervals are measured on (a fake one in tests).
        final_attempts: Tries of the final edit or send before giving up.
        retry_delay: Seconds between those tries.

    Attributes:
        limit: The most a message may hold.
        length: How a text's length is counted.
        interval: The least seconds between two edits of a message.
        first_chars: How much text the first message waits for.
        final_attempts: Tries of the final edit or send.
        retry_delay: Seconds between those tries.
        unsent: Continuation sends that failed and were tried again.
        edits: Edits made so far.
        sends: Messages sent so far.
    """

    def __init__(
        self,
        *,
        send: Callable[[str], Awaitable[Any]],
        edit: Callable[[Any, str], Awaitable[None]],
        limit: int,
        length: Callable[[str], int] = len,
        interval: float = 1.0,
        first_chars: int = 20,
        on_part: Callable[[int, Any], Awaitable[None]] | None = None,
        adopt: Sequence[Any] = (),
        delete: Callable[[Any], Awaitable[None]] | None = None,
        clock: Callable[[], float] | None = None,
        final_attempts: int = 5,
        retry_delay: float = 1.0,
    ) -> None:
        if limit < 32:
            raise ValueError("limit must be at least 32")
        self._send = send
        self._edit = edit
        self.limit = limit
        self.length = length
        self.interval = interval
        self.first_chars = first_chars
        self._on_part = on_part
        self._adopt = list(adopt)
        self._delete = delete
        self._clock = clock
        self._messages: list[_Shown] = []
        self._broken = False  # an edit failed: no more edits, the remainder goes out new
        # a continuation that could not be sent is sent again with the next text; the final
        # text tries this often, waiting from retry_delay up (the platform may be back)
        self.final_attempts = max(1, final_attempts)
        self.retry_delay = retry_delay
        self.unsent = 0  # continuation sends that failed and were tried again
        self.edits = 0
        self.sends = 0

    # --- the loop ------------------------------------------------------------------------

    async def deliver(self, live: LiveText) -> LiveResult:
        """Show ``live`` until it is done; returns once the final text is shown.

        Raises:
            SendFailed: the first message could not be sent (nothing was shown), or the
                remainder after a failed edit could not be.
        """
        loop = asyncio.get_running_loop()
        now = self._clock or loop.time
        seen = 0
        next_at = 0.0
        while True:
            await live.changed(seen)
            if not live.done and (wait := next_at - now()) > 0:
                await live.wait_done(wait)  # pace edits; the final text is shown at once
            seen = live.version
            text = live.text
            if live.done:
                await self._show(text, final=True)
                break
            if self._broken or not text:
                continue
            if not self._messages and len(text) < self.first_chars:
                continue  # nothing worth showing yet
            await self._show(text, final=False)
            next_at = now() + self.interval
        return LiveResult([m.id for m in self._messages], self.edits, self.sends, self._broken)

    # --- showing one version of the text -------------------------------------------------

    async def _show(self, text: str, *, final: bool) -> None:
        if self._broken:
            if final:
                await self._remainder(text)
            return
        # sealed messages keep their spans; the rest of the text fills the last message and
        # new ones as needed
        i = 0
        while i < len(self._messages) and self._messages[i].sealed:
            i += 1
        pos = self._messages[i - 1].end if i else 0
        reopen = self._after(text, self._messages[i - 1]) if i else ""
        while True:
            pos = _skip_newlines(text, pos)
            if pos >= len(text):
                break
            body, end, full = self._fill(text, pos, reopen)
            if not await self._put(i, body, pos, end, reopen, final=final):
                if final and self._broken:
                    await self._remainder(text)
                return
            self._messages[i].sealed = full
            if not full:
                break
            reopen = self._after(text, self._messages[i])
            pos = end
            i += 1
        if final:
            await self._drop_adopted()

    def _fill(self, text: str, pos: int, reopen: str) -> tuple[str, int, bool]:
        """What the message starting at ``pos`` shows: as much as fits, cut at the best
        boundary when not all does. Returns (shown text, end of its span, full)."""
        rest = text[pos:]
        whole = balance_fences(reopen + rest)
        if self.length(whole) <= self.limit:
            return whole.rstrip(), len(text), False
        # room for the reopened fence and a closing one (as long as the longest fence here)
        fences = [b.indent + len(b.closer) for b in fenced_blocks(reopen + rest)]
        room = self.limit - self.length(reopen) - 1 - max([3, *fences])
        fit = _fitting(rest, room, self.length)
        cut = _boundary(rest, fit)
        piece = rest[:cut]
        return balance_fences((reopen + piece).rstrip("\n")).rstrip(), pos + cut, True

    def _after(self, text: str, m: _Shown) -> str:
        """The fence opener a message continuing after ``m`` begins with ("" if none)."""
        opener = _open_fence(m.reopen + text[m.start : m.end])
        return (opener + "\n") if opener is not None else ""

    async def _put(self, i: int, shown: str, start: int, end: int, reopen: str, *, final: bool = False) -> bool:
        """Message ``i`` shows ``shown`` (span ``start``..``end``): sent, edited, or as it is.
        False when an edit failed (the reply falls back to sending the remainder)."""
        if i < len(self._messages):
            m = self._messages[i]
            if m.text != shown:
                try:
                    await self._edit(m.id, shown)
                except SendFailed as e:
                    log.warning("%s; the rest of the reply goes out as a new message", e)
                    self._broken = True
                    return False
                self.edits += 1
                m.text = shown
            m.start, m.end, m.reopen = start, end, reopen
            return True
        if self._adopt:  # a message a crashed run left half-written: this reply completes it
            mid = self._adopt.pop(0)
            self._messages.append(_Shown(mid, start, start, reopen, None))
            if self._on_part is not None:
                await self._on_part(i, mid)  # this run's ledger holds it too, should it crash
            return await self._put(i, shown, start, end, reopen, final=final)
        mid = await self._send_new(shown, final=final)
        if mid is _UNSENT:
            return False  # tried again with the next text, from this point
        self.sends += 1
        self._messages.append(_Shown(mid, start, end, reopen, shown))
        if self._on_part is not None:
            await self._on_part(i, mid)  # in the ledger before its first edit
        return True

    async def _remainder(self, text: str) -> None:
        """After a failed edit: what no message shows yet, sent once as new message(s)."""
        pos = 0
        reopen = ""
        if self._messages:
            last = self._messages[-1]
            pos, reopen = last.end, self._after(text, last)
        index = len(self._messages)
        while True:
            pos = _skip_newlines(text, pos)
            if pos >= len(text):
                return
            body, end, _ = self._fill(text, pos, reopen)
            mid = await self._send_new(body, final=True)
            self.sends += 1
            self._messages.append(_Shown(mid, pos, end, reopen, body, sealed=True))
            if self._on_part is not None:
                await self._on_part(index, mid)
            index += 1
            reopen = self._after(text, self._messages[-1])
            pos = end

    async def _send_new(self, shown: str, *, final: bool) -> Any:
        """Send a new message. The first message's failure is raised (nothing was shown).
        A continuation that fails mid-stream returns `_UNSENT`: the next version of the text
        sends it again from the same point; with the final text it is tried
        ``final_attempts`` times before SendFailed is raised, naming what went out.

        Raises:
            SendFailed: as above.
        """
        attempts = self.final_attempts if final else 1
        delay = self.retry_delay
        for attempt in range(1, attempts + 1):
            try:
                return await self._send(shown)
            except SendFailed as e:
                if not self._messages:
                    raise  # nothing shown: the reply failed as a whole
                self.unsent += 1
                if attempt == attempts and final:
                    raise SendFailed(
                        e.platform,
                        e.chat,
                        f"{e.reason}; the first {len(self._messages)} message(s) of the reply went out, "
                        f"the rest could not be sent after {attempts} attempts",
                    ) from e
                if not final:
                    log.warning("%s; the rest of the reply is sent with the next text", e)
                    return _UNSENT
                log.warning("%s; the rest of the reply is sent again in %.1fs", e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _drop_adopted(self) -> None:
        """Messages a crashed run left that the final text does not need (its draft was
        longer): deleted where the platform can, else emptied to an ellipsis."""
        for mid in self._adopt:
            try:
                if self._delete is not None:
                    await self._delete(mid)
                else:
                    await self._edit(mid, "…")
            except SendFailed as e:
                log.warning("%s (a draft left by an interrupted reply)", e)
        self._adopt.clear()


def live_drafts(ctx: RunContext, output_type: str) -> list[Any]:
    """The messages (the ``data`` of each part, in order) that an interrupted run left
    half-written for this run's inputs with ``output_type``: pass them as ``adopt`` so the
    reply completes them. Only the run's first live output of that type adopts them."""
    me = ctx.output
    for e in ctx.logs:
        if isinstance(e, OutputLog) and e is not me and e.type == output_type and e.live and e.parts:
            return []
    found: list[Any] = []
    for entry in ctx.inputs:
        for draft in entry.drafts:
            if draft.get("type") == output_type:
                parts = sorted(draft.get("parts") or [], key=lambda p: p.get("index", 0))
                found.extend(p.get("data") for p in parts if p.get("data") is not None)
    return found


def _skip_newlines(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in "\n ":
        pos += 1
    return pos


def _fitting(rest: str, room: int, length: Callable[[str], int]) -> int:
    """The longest prefix of ``rest`` (in characters) whose ``length`` is at most ``room``."""
    if length is len:
        return min(len(rest), room)
    lo, hi = 0, min(len(rest), room)
    while lo < hi:  # length is monotone in the prefix
        mid = (lo + hi + 1) // 2
        if length(rest[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _boundary(rest: str, fit: int) -> int:
    """Where to cut ``rest`` at or before ``fit``: a paragraph, a line, a sentence, a word,
    in that order, if one is in the second half; else at ``fit``."""
    window = rest[:fit]
    floor = fit // 2
    for sep in ("\n\n", "\n", ". ", " "):
        j = window.rfind(sep)
        if j >= floor:
            return j + len(sep)
    return max(fit, 1)
