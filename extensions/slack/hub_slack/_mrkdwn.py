"""The model writes Markdown; Slack renders mrkdwn, its own dialect. `to_mrkdwn()` rewrites
one into the other (``**b**`` to ``*b*``, ``[t](u)`` to ``<u|t>``, headings bold), leaves code
as it is, escapes ``& < >`` as Slack asks and keeps only user and channel mentions (never
``@channel``, ``@here`` or ``@everyone``). `to_plain()` is the same text without markup:
the message's ``text`` beside its mrkdwn block (notifications, screen readers), and what is
sent alone when Slack refuses the block.
"""

from __future__ import annotations

import re

__all__ = ["to_mrkdwn", "to_plain", "escape"]

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.S)
_INLINE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_BULLET = re.compile(r"^(\s*)[-*+]\s+", re.M)
# a mention the model may write: a user (<@U123>) or a channel (<#C123>), not <!here> and the like
_SAFE_REF = re.compile(r"&lt;([@#][UWC][A-Z0-9]+(?:\|[^&]*)?)&gt;")


def escape(text: str) -> str:
    """Slack's three escapes, with the user and channel mentions put back."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SAFE_REF.sub(r"<\1>", text)


def _segments(text: str) -> list[tuple[bool, str]]:
    """``text`` as (is_code, piece) pairs: fenced blocks and inline spans are code."""
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _FENCE.finditer(text):
        out.extend(_inline_segments(text[pos : m.start()]))
        out.append((True, "```\n" + m.group(1).strip("\n") + "\n```"))
        pos = m.end()
    out.extend(_inline_segments(text[pos:]))
    return out


def _inline_segments(text: str) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append((False, text[pos : m.start()]))
        out.append((True, m.group(0)))
        pos = m.end()
    out.append((False, text[pos:]))
    return [s for s in out if s[1]]


def _prose_to_mrkdwn(text: str) -> str:
    text = escape(text)
    links: list[str] = []

    def link(m: re.Match[str]) -> str:
        links.append(f"<{m.group(2)}|{m.group(1)}>")
        return f"\x00{len(links) - 1}\x00"

    text = _LINK.sub(link, text)
    text = _HEADING.sub(lambda m: f"\x01{m.group(1)}\x01", text)
    text = _BOLD.sub(lambda m: f"\x01{m.group(1) or m.group(2)}\x01", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = _BULLET.sub(r"\1• ", text)
    text = text.replace("\x01", "*")
    return re.sub("\x00(\\d+)\x00", lambda m: links[int(m.group(1))], text)


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` as Slack's mrkdwn (code kept as written, escaped)."""
    return "".join(escape(piece) if code else _prose_to_mrkdwn(piece) for code, piece in _segments(markdown))


def _prose_to_plain(text: str) -> str:
    text = _LINK.sub(r"\1 (\2)", text)
    text = _HEADING.sub(r"\1", text)
    text = _BOLD.sub(lambda m: m.group(1) or m.group(2), text)
    text = _ITALIC.sub(r"\1", text)
    text = _STRIKE.sub(r"\1", text)
    return escape(_BULLET.sub(r"\1• ", text))


def to_plain(markdown: str) -> str:
    """``markdown`` without its markup, escaped for Slack (shown as it is with ``mrkdwn: false``)."""
    out = []
    for code, piece in _segments(markdown):
        if code:
            out.append(escape(piece.strip("`").strip("\n") if piece.startswith("```") else piece.strip("`")))
        else:
            out.append(_prose_to_plain(piece))
    return "".join(out)
