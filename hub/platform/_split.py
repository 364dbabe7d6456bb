"""Splitting long text into messages: never truncated, every part within the limit, and code
fences kept balanced where the platform renders Markdown. A platform whose text is not
Markdown (X) declares it (``markdown=False``): there a fence is text like any other, and
reopening it in the next part would only lengthen the parts past the limit."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from ._fences import FencedBlock, fenced_blocks

__all__ = ["split_message", "split_off_loop", "utf16_len", "LONG_SPLIT"]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts its 4096 limit."""
    return len(text.encode("utf-16-le")) // 2


def _pieces(text: str, limit: int, length: Callable[[str], int], markdown: bool) -> list[str | FencedBlock]:
    """Cut text into pieces: fenced code blocks whole when they fit, else left whole for
    `split_message` to split by lines with their fence reopened; the prose between them as
    it is, cut finer (`_finer()`) only where a piece does not fit alone. Pieces
    concatenate back to the text."""
    out: list[str | FencedBlock] = []
    pos = 0
    for block in fenced_blocks(text) if markdown else []:
        if block.start > pos:
            out.append(text[pos : block.start])
        whole = text[block.start : block.end]
        out.append(whole if length(whole) <= limit else block)  # split by split_message
        pos = block.end
    if pos < len(text):
        out.append(text[pos:])
    return out


_SEPARATORS = (r"(?<=\n\n)", r"(?<=\n)", r"(?<=[.!?]\s)|(?<=[。！？])", r"(?<= )")
"""Where prose is cut, best first: after a paragraph, a line, a sentence, a word."""


def _finer(text: str, limit: int, length: Callable[[str], int]) -> list[str]:
    """``text`` (too long for a message) cut at its best kind of boundary; hard cuts when it
    has none."""
    for sep in _SEPARATORS:
        parts = [p for p in re.split(sep, text) if p]
        if len(parts) > 1:
            return parts
    return _hard(text, limit, length)


def _hard(text: str, limit: int, length: Callable[[str], int]) -> list[str]:
    """``text`` cut where it must be: each part the longest prefix that fits, found by
    bisection (a measure may cost milliseconds: never one per character)."""
    out, pos = [], 0
    while pos < len(text):
        rest = text[pos:]

        def fits(n: int, rest: str = rest) -> bool:
            return length(rest[:n]) <= limit

        fit = _longest(len(rest), fits)
        fit = max(fit, 1)  # one character over the limit alone: it goes on its own
        out.append(rest[:fit])
        pos += fit
    return out


def _longest(n: int, fits: Callable[[int], bool]) -> int:
    """The largest ``k`` in 0..n for which ``fits(k)`` holds (``fits(0)`` is taken to),
    assuming it holds up to some point and not after: galloping, then bisecting, so that
    about 2·log2(k) measures are taken and none of much more than twice what fits."""
    lo, hi = 0, 1
    while hi <= n and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, n + 1)  # fits(hi) is false, or hi is past n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


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


def _pack(cur: str, pieces: list[str], messages: list[str], limit: int, length: Callable[[str], int]) -> str:
    """Fill messages with ``pieces`` in order, from ``cur`` (the message being filled): each
    takes as many pieces as fit, found by bisection over the number of pieces, as the live
    message finds its cut; a full one goes to ``messages``. A piece too long for a message
    alone is cut finer where it stands (it begins a message), so only what is packed is
    ever measured. Returns the message left open."""
    pieces = list(pieces)
    i = 0
    while i < len(pieces):

        def fits(k: int, cur: str = cur, i: int = i) -> bool:
            return length(cur + "".join(pieces[i : i + k])) <= limit

        k = _longest(len(pieces) - i, fits)
        if k == 0 and cur:  # the next piece does not fit beside what is there
            messages.append(cur)
            cur = ""
            continue
        if k == 0:  # too long for a message alone: cut finer where it stands
            finer = _finer(pieces[i], limit, length)
            if len(finer) > 1:
                pieces[i : i + 1] = finer
                continue
            k = 1  # one character over the limit: it goes on its own (measured at the end)
        cur += "".join(pieces[i : i + k])
        i += k
        if i < len(pieces):  # the next piece did not fit: this message is full
            messages.append(cur)
            cur = ""
    return cur


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
    run: list[str] = []  # pieces of text waiting to be packed
    for piece in [*_pieces(text, limit, length, markdown), None]:
        if isinstance(piece, str):
            run.append(piece)
            continue
        cur = _pack(cur, run, messages, limit, length)
        run = []
        if piece is None:
            break
        room = limit - length(cur) if cur.strip() else 0
        attached, chunks = _split_code(piece, limit, length, room)
        if not attached and cur:  # its first part begins a message
            messages.append(cur)
            cur = ""
        cur = _pack(cur, chunks, messages, limit, length)
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


LONG_SPLIT = 2_000
"""Characters past which [`split_off_loop()`][hub.platform.split_off_loop] splits in a worker thread."""


async def split_off_loop(split: Callable[[str], list[str]], text: str) -> list[str]:
    """``split(text)``, in a worker thread when ``text`` is longer than [`LONG_SPLIT`][hub.platform.LONG_SPLIT]
    characters: a platform whose measure is costly (mrkdwn rendered, twitter-text's count)
    must not hold the event loop every platform shares while it splits a long reply."""
    if len(text) <= LONG_SPLIT:
        return split(text)
    return await asyncio.to_thread(split, text)
