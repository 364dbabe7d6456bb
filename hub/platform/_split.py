"""Splitting long text into messages: never truncated, code fences kept balanced."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["split_message", "utf16_len"]

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
