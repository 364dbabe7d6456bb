"""Fenced code blocks as CommonMark sees them (markdown-it-py): backtick and tilde fences of
any length, indented up to three spaces, and nested in list items and block quotes.

Splitting a reply into messages and showing a half-written one both need to know where
each block starts and ends, and which fence closes it; a regex on lines of three
backticks missed every other form and split such blocks as prose, unbalanced."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["FencedBlock", "fenced_blocks", "open_fence"]


@dataclass(frozen=True, slots=True)
class FencedBlock:
    """One fenced code block of a text.

    ``start``/``end`` are character offsets: from the fence's first backtick or tilde
    (any list marker or quote before it is not part of the block) to the end of its last
    line (the closing fence, or the text's end when it was never closed).
    """

    start: int
    end: int
    opener: str  # the opening line from its fence on: "```python", "~~~~"
    closer: str  # a line that closes it: the same character, as many of them
    indent: int  # the column of the opening fence: its content lines are indented so
    closed: bool  # its closing fence is in the text
    body: list[str]  # its content lines as written (with their indentation)


@functools.cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt  # on the first fence: not at start (memory)

    return MarkdownIt("commonmark")


def fenced_blocks(text: str) -> list[FencedBlock]:
    """The fenced code blocks of ``text``, in order (nested ones included)."""
    if "```" not in text and "~~~" not in text:
        return []  # no fence at all: skip the parse
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    blocks: list[FencedBlock] = []
    for token in _parser().parse(text):
        if token.type != "fence" or token.map is None:
            continue
        first, after = token.map
        head = lines[first]
        col = _fence_column(head, token.markup)
        last = min(after, len(lines)) - 1
        closed = last > first and _closes(lines[last], token.markup, col)
        body_end = last if closed else last + 1
        blocks.append(
            FencedBlock(
                start=offsets[first] + col,
                end=offsets[last] + len(lines[last]),
                opener=head[col:],
                closer=token.markup,
                indent=col,
                closed=closed,
                body=lines[first + 1 : body_end],
            )
        )
    return blocks


def _closes(line: str, markup: str, col: int) -> bool:
    """Whether ``line`` is a closing fence for ``markup`` opened at column ``col``: as many
    of its character or more, nothing after but spaces, indented at most three columns
    more than the container's content (which ``col`` approximates from above)."""
    m = re.fullmatch(rf"((?:[ \t]*>)*)( *){re.escape(markup[0])}{{{len(markup)},}}[ \t]*", line)
    if m is None:
        return False
    if m.group(1):  # in a block quote: one space after the ">", then up to three
        return len(m.group(2)) <= 4
    return len(m.group(2)) <= (3 if col < 4 else col + 3)


def _fence_column(line: str, markup: str) -> int:
    """Where the fence starts in its opening line (after list markers and quotes)."""
    m = re.match(r"(?:[ \t]*(?:>|[-+*]|\d{1,9}[.)])(?=[ \t]|$))*[ \t]*", line)
    col = m.end() if m else 0
    found = line.find(markup, col)
    return found if found >= 0 else col


def open_fence(text: str) -> FencedBlock | None:
    """The fenced code block left open at the end of ``text`` (a half-written reply), if any."""
    blocks = fenced_blocks(text)
    if blocks and not blocks[-1].closed and blocks[-1].end == len(text.rstrip("\n")):
        return blocks[-1]
    return None
