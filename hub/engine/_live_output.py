"""Live output, as the engine holds it: an open ``<output>`` delivered while the model
writes it (`LiveOutput`), and its content as the handler reads it ([`LiveText`][hub.LiveText]).

An output declared with ``live=True`` (``@output(type=..., live=True)``) is handed to its
handler as soon as its content begins, as a [`LiveText`][hub.LiveText], instead of the whole
content once it closes. The engine appends what the model writes inside the open
``<output>`` and finishes the text when the closing tag arrives, or when the stream ends
inside it (then ``cut_off`` is True and the final text carries the cut-off mark, as for any
output). The handler still returns its result once it has delivered the final text.
The engine's output dispatch decides which outputs go live and sends them in order; a
platform's side (a message edited in place) is [`hub.platform`][hub.platform]'s ``LiveMessage``.

What a reader sees while the model writes (``text``) is masked by the redactor, as the final
text is, and leaves out an end that could be the first part of a known secret (the redactor
only recognises one whole): such a secret is shown masked once it is complete, never in
part before. It also stops at a word boundary when one is near the end, so that words do not
appear letter by letter (text without spaces, such as Chinese, is shown as it comes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..definitions import Output
    from ..logs import OutputLog

__all__ = ["LiveOutput", "LiveText"]

_WORD = 24
"""A word longer than this (or text without spaces) is shown as it arrives, not held whole."""
PUBLISH_EVERY = 0.05
"""Seconds over which what arrives is gathered into one ``on_delta`` call (one event): a
model streaming a token at a time must not cost an event per token."""


class LiveText:
    """The text of a live output as it arrives; iterate it for each newer version.

    ``async for text in live`` yields the newest text each time it changed since the last
    one yielded (versions that came meanwhile are skipped, not queued), and last the final
    text; then the loop ends. ``await live.final()`` waits for the whole text.
    """

    __slots__ = (
        "_chunks",
        "_size",
        "_redact",
        "_hold",
        "_on_delta",
        "_unpublished",
        "_final",
        "_cut",
        "_changed",
        "_version",
        "first_at",
        "_timer",
    )

    def __init__(
        self,
        *,
        redact: Callable[[str], str] | None = None,
        hold: Callable[[str], int] | None = None,
        on_delta: Callable[[str], None] | None = None,
    ) -> None:
        self._chunks: list[str] = []
        self._size = 0
        self._redact = redact
        self._hold = hold
        """How many characters at the end of a text to keep back (a secret's possible start)."""
        self._on_delta = on_delta
        """Called with each newly arrived piece, masked, whole words at a time (events)."""
        self._unpublished = ""
        self._timer: asyncio.TimerHandle | None = None
        self._final: str | None = None
        self._cut = False
        self._changed = asyncio.Event()
        self._version = 0
        self.first_at: float | None = None
        """When the first content arrived (``time.monotonic()``), for latency measurements."""

    @classmethod
    def whole(cls, text: str) -> LiveText:
        """A text known whole from the start (a live output sent by code, not by the model)."""
        live = cls()
        live.finish(text)
        return live

    # --- the engine's side ---------------------------------------------------------------

    def append(self, delta: str) -> None:
        """More content from the model (ignored once finished)."""
        if self._final is not None or not delta:
            return
        if self.first_at is None:
            self.first_at = time.monotonic()
        self._chunks.append(delta)
        self._size += len(delta)
        self._version += 1
        self._changed.set()
        if self._on_delta is not None:
            self._unpublished += delta
            if self._timer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop (a test feeding it by hand): at once
                    self._flush()
                else:
                    self._timer = loop.call_later(PUBLISH_EVERY, self._flush)

    def _flush(self) -> None:
        """Publish what arrived, but for an end that could begin a secret: it waits for the
        rest, so that the secret is masked whole."""
        self._timer = None
        if self._final is not None:
            return
        pending = self._unpublished
        cut = len(pending) - (self._hold(pending) if self._hold is not None else 0)
        self._unpublished = pending[cut:]
        if cut:
            self._publish(pending[:cut])

    def _publish(self, piece: str) -> None:
        assert self._on_delta is not None
        self._on_delta(self._redact(piece) if self._redact is not None else piece)

    def finish(self, text: str, *, cut_off: bool = False) -> None:
        """The output closed (or was cut off): ``text`` is what it delivers, whole."""
        if self._final is not None:
            return
        self._final = text
        self._cut = cut_off
        self._version += 1
        self._changed.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._on_delta is not None and self._unpublished:
            self._publish(self._unpublished)
            self._unpublished = ""

    # --- the handler's side --------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True once the final text is known."""
        return self._final is not None

    @property
    def cut_off(self) -> bool:
        """True when the stream ended inside the output (its final text is marked as cut)."""
        return self._cut

    @property
    def raw(self) -> str:
        """Everything the model wrote inside the output so far, unmasked and untrimmed."""
        if len(self._chunks) > 1:
            self._chunks[:] = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    @property
    def text(self) -> str:
        """The final text once done; before that, what can be shown of the content so far."""
        if self._final is not None:
            return self._final
        raw = self.raw
        end = len(raw) - (self._hold(raw) if self._hold is not None else 0)
        space = max(raw.rfind(" ", 0, end), raw.rfind("\n", 0, end), raw.rfind("\t", 0, end), 0)
        if end - space <= _WORD:
            end = space  # the word being written appears whole
        shown = raw[:end]
        if self._redact is not None and shown:
            shown = self._redact(shown)
        return shown.strip()

    @property
    def version(self) -> int:
        """Grows with every change (content appended, the text finished)."""
        return self._version

    async def changed(self, since: int) -> None:
        """Wait until the version is past ``since`` (returns at once if it already is)."""
        while self._version <= since:
            self._changed.clear()
            await self._changed.wait()

    async def wait_done(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the final text; True if it is there."""
        if self._final is None and timeout > 0:
            deadline = asyncio.get_running_loop().time() + timeout
            while self._final is None:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    break
        return self._final is not None

    async def final(self) -> str:
        """The whole text, once the output closed."""
        while self._final is None:
            await self.changed(self._version)
        return self._final

    def __aiter__(self) -> AsyncIterator[str]:
        return self._versions()

    async def _versions(self) -> AsyncIterator[str]:
        seen = -1
        last = ""
        while True:
            await self.changed(seen)
            seen = self._version
            done = self._final is not None
            text = self.text
            if text != last or done:
                last = text
                yield text
            if done:
                return


class LiveOutput:
    """The open ``<output>`` of a stream, delivered live: its definition, its log entry (its
    final text is written there when it closes) and the text its handler reads."""

    __slots__ = ("out", "entry", "text")

    def __init__(self, out: Output, entry: OutputLog, text: LiveText) -> None:
        self.out = out
        self.entry = entry
        self.text = text
