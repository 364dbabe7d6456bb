"""Splitting long text into messages: never truncated, every part within the limit, and code
fences kept balanced where the platform renders Markdown. A platform whose text is not
Markdown (X) declares it (``markdown=False``): there a fence is text like any other, and
reopening it in the next part would only lengthen the parts past the limit."""

from __future__ import annotations

import re
from collections.abc import Callable

from ._fences import FencedBlock, fenced_blocks

__all__ = ["split_message", "utf16_len"]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts its 4096 limit."""
    return len(text.encode("utf-16-le")) // 2


def _pieces(text: str, limit: int, length: Callable[[str], int], markdown: bool) -> list[str | FencedBlock]:
    """Cut text into atomic pieces no longer than ``limit``: fenced code blocks whole when
    they fit, else split by lines with their fence reopened; prose by paragraph, line,
    sentence, word, and as a last resort hard cuts. Pieces concatenate back to the text
    (apart from the fences added to split code blocks); a block too long for a message is
    left whole, for `split_message` to split where it falls."""
    out: list[str | FencedBlock] = []
    pos = 0
    for block in fenced_blocks(text) if markdown else []:
        if block.start > pos:
            out.extend(_prose(text[pos : block.start], limit, length))
        whole = text[block.start : block.end]
        out.append(whole if length(whole) <= limit else block)  # split by split_message
        pos = block.end
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


def _split_code(
    block: FencedBlock, limit: int, length: Callable[[str], int], first_room: int
) -> tuple[bool, list[str]]:
    """A code block too long for one message, as blocks that fit, split by lines. The
    first goes on the message being filled when ``first_room`` holds its fences and a line:
    it keeps the text's indentation (it follows its list item). The others begin a
    message, so their fence starts the line and their lines lose the indentation the list
    item gave them (CommonMark's rule for a fence's content). Returns whether the first
    is to be attached, and the blocks."""
    attached_closer = " " * block.indent + block.closer
    opener, closer = block.opener.lstrip(), block.closer
    attached_room = first_room - length(block.opener) - length(attached_closer) - 2
    room = max(1, limit - length(opener) - length(closer) - 2)
    lines = block.body
    chunks: list[str] = []
    attached = bool(lines) and attached_room >= length(lines[0])
    if attached:
        taken: list[str] = []
        used = 0
        while lines and used + length(lines[0]) + (1 if taken else 0) <= attached_room:
            used += length(lines[0]) + (1 if taken else 0)
            taken.append(lines[0])
            lines = lines[1:]
        chunks.append("\n".join([block.opener, *taken, attached_closer]))
    current: list[str] = []
    cur_len = 0
    for line in (_dedent(line, block.indent) for line in lines):
        for piece in _hard(line, room, length) if length(line) > room else [line]:
            add = length(piece) + (1 if current else 0)
            if current and cur_len + add > room:
                chunks.append("\n".join([opener, *current, closer]))
                current, cur_len, add = [], 0, length(piece)
            current.append(piece)
            cur_len += add
    if current or not chunks:
        chunks.append("\n".join([opener, *current, closer]))
    return attached, chunks


def _dedent(line: str, indent: int) -> str:
    """``line`` without up to ``indent`` leading spaces."""
    strip = min(indent, len(line) - len(line.lstrip(" ")))
    return line[strip:]


def split_message(text: str, limit: int, *, length: Callable[[str], int] = len, markdown: bool = True) -> list[str]:
    """Split ``text`` into messages of at most ``limit`` (as measured by ``length``).

    Never truncates: every character is in some message. Splits prefer paragraph, then
    line, sentence and word boundaries. With ``markdown`` (the platform renders it), fenced
    code blocks stay whole when they fit, and a longer one is split with its fence closed
    and reopened so every message is balanced; without, fences are plain text. Every
    message is measured before it is returned: one still over ``limit`` (a fence line
    longer than the limit) is split again as plain text. Leading and trailing blank lines
    of each message are dropped; empty messages are not produced.
    """
    if limit < 16:
        raise ValueError("limit must be at least 16")
    if length(text) <= limit:
        return [text] if text.strip() else []
    messages: list[str] = []
    cur = ""
    for piece in _pieces(text, limit, length, markdown):
        if isinstance(piece, FencedBlock):
            room = limit - length(cur) if cur.strip() else 0
            attached, chunks = _split_code(piece, limit, length, room)
            if not attached and cur:  # its first part begins a message
                messages.append(cur)
                cur = ""
        else:
            chunks = [piece]
        for chunk in chunks:
            if cur and length(cur + chunk) > limit:
                messages.append(cur)
                cur = ""
            cur += chunk
    if cur:
        messages.append(cur)
    out: list[str] = []
    for m in (m.rstrip().strip("\n") for m in messages if m.strip()):
        if length(m) <= limit:
            out.append(m)
        elif markdown:  # past the limit through its fences (a fence line longer than it): as text
            out.extend(split_message(m, limit, length=length, markdown=False))
        else:  # a length that is not monotone in the text: cut where it fits
            out.extend(_hard(m, limit, length))
    return out
