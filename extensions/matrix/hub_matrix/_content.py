"""What the bot sends, as Matrix event content: a message with its plain ``body`` and, from
its Markdown, an ``org.matrix.custom.html`` body; a reply (``m.in_reply_to``); an edit
(``m.replace``); and the sizes that keep an event under the homeserver's 64 KiB.
"""

from __future__ import annotations

import json
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["MAX_LENGTH", "MAX_EVENT_BYTES", "wire_len", "message_content", "edit_content", "to_html"]

MAX_EVENT_BYTES = 60_000
"""An event's content as sent, at most: a homeserver refuses events over 65,536 bytes, and
the envelope (ids, signatures, the sender) takes the rest."""
MAX_LENGTH = 16_000
"""A message's text at most, in JSON-escaped units (`wire_len()`): its edit carries it
three times (the fallback ``body``, the new ``body``, the HTML), and stays under
`MAX_EVENT_BYTES` (an HTML body that would not is left out: the plain one stands)."""

# CommonMark with tables and strikethrough; raw HTML off, so what the model writes is escaped
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def wire_len(text: str) -> int:
    """The length of ``text`` in a JSON body as the client library writes it (non-ASCII as
    ``\\uXXXX``, quotes and control characters escaped)."""
    return len(json.dumps(text)) - 2


def to_html(text: str) -> str | None:
    """``text``'s Markdown as HTML; None when it has no formatting (a plain paragraph)."""
    html = _MARKDOWN.render(text).strip()
    plain = _MARKDOWN.render(_escape_all(text)).strip()
    return None if html == plain else html


def _escape_all(text: str) -> str:
    # every punctuation character escaped: the same text, rendered with no formatting
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|~<>&" else c for c in text)


def message_content(
    text: str,
    *,
    markdown: bool = True,
    notice: bool = False,
    reply_to: str | None = None,
    mention: str | None = None,
) -> dict[str, Any]:
    """A message event's content. ``m.mentions`` names only ``mention`` (the author of the
    message replied to): the model's text never pings a room (``@room``) or anyone else."""
    content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": text}
    html = to_html(text) if markdown else None
    if html is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = html
    content["m.mentions"] = {"user_ids": [mention]} if mention else {}
    if reply_to:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return _fit(content)


def edit_content(event_id: str, text: str, *, markdown: bool = True, notice: bool = False) -> dict[str, Any]:
    """The content of an edit (``m.replace``) showing ``text`` in the message ``event_id``.
    Clients without edits show the fallback ``body``, ``* text``."""
    new = message_content(text, markdown=markdown, notice=notice)
    new.pop("m.mentions", None)  # an edit pings nobody again
    content: dict[str, Any] = {
        "msgtype": new["msgtype"],
        "body": "* " + text,
        "m.new_content": new,
        "m.mentions": {},
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }
    if len(json.dumps(content)) > MAX_EVENT_BYTES:
        _plain(new)
    return content


def _fit(content: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(content)) > MAX_EVENT_BYTES:
        _plain(content)
    return content


def _plain(content: dict[str, Any]) -> None:
    content.pop("format", None)
    content.pop("formatted_body", None)
