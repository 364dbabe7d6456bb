"""Counting and splitting a reply the way Mastodon counts it: graphemes, every URL as the
instance's ``characters_reserved_per_url``, a remote mention (``@user@domain``) as its local part."""

from __future__ import annotations

import re

import grapheme

from hub.platform import split_message

__all__ = ["status_length", "split_status"]

_URL = re.compile(r"https?://\S+")
_REMOTE_MENTION = re.compile(r"(^|[^/\w])@(([a-z0-9_]+)@[a-z0-9\.\-]+[a-z0-9]+)", re.IGNORECASE)


def status_length(text: str, *, per_url: int = 23) -> int:
    """Characters of ``text`` as the instance counts them against its limit."""
    counted = _REMOTE_MENTION.sub(r"\1@\3", _URL.sub("x" * per_url, text))
    return int(grapheme.length(counted))


def split_status(text: str, *, limit: int, per_url: int, prefix: str = "") -> list[str]:
    """``text`` as a thread of statuses, each (with ``prefix``, the mention of the person
    answered) within ``limit``; Mastodon's text is plain, not Markdown."""
    room = limit - status_length(prefix, per_url=per_url)
    parts = split_message(text, room, length=lambda s: status_length(s, per_url=per_url), markdown=False)
    return [prefix + p for p in parts]
