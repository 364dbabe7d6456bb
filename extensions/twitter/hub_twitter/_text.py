"""How X measures a post, and splitting long text into a thread.

X counts "weighted" characters (twitter-text v3): most Latin, Greek, Cyrillic and
punctuation code points weigh 1, everything else (CJK, emoji) 2, and every URL 23
whatever its length. The limit is 280. We count so that our figure is never below X's:
emoji sequences are counted per code point, and a bare ``name.tld`` that X may or may not
link counts as at least 23. Splitting earlier than needed is harmless; a 403 is not.
"""

from __future__ import annotations

import re
import unicodedata

from hub.platform import split_message

__all__ = ["MAX_TWEET", "URL_WEIGHT", "weighted_len", "split_tweets"]

MAX_TWEET = 280
URL_WEIGHT = 23

# twitter-text v3: these code point ranges weigh 1, everything else 2.
_LIGHT = ((0, 4351), (8192, 8205), (8208, 8223), (8242, 8247))
_URL = re.compile(
    r"https?://\S+"
    r"|(?<![\w@.-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}(?::\d+)?(?:/\S*)?",
    re.IGNORECASE,
)
# X does not count closing punctuation after a URL as part of it.
_TRAILING = re.compile(r"[)\].,;:!?'\"]+$")


def _chars(text: str) -> int:
    total = 0
    for ch in text:
        cp = ord(ch)
        total += 1 if any(lo <= cp <= hi for lo, hi in _LIGHT) else 2
    return total


def weighted_len(text: str) -> int:
    """The length X gives ``text`` (never less than X's own count)."""
    text = unicodedata.normalize("NFC", text)
    total, pos = 0, 0
    for m in _URL.finditer(text):
        url = m.group(0)
        tail = _TRAILING.search(url)
        if tail:
            url = url[: tail.start()]
        total += _chars(text[pos : m.start()])
        explicit = url.lower().startswith(("http://", "https://"))
        total += URL_WEIGHT if explicit else max(URL_WEIGHT, _chars(url))
        pos = m.start() + len(url)
    return total + _chars(text[pos:])


def split_tweets(text: str, limit: int = MAX_TWEET) -> list[str]:
    """``text`` as posts of at most ``limit`` weighted characters, in order, never truncated.

    Splits prefer paragraph, line, sentence and word boundaries, and keep code blocks whole
    when they fit (:func:`hub.platform.split_message`). Each post is stripped of the
    whitespace at its edges, which X would drop anyway.
    """
    parts = split_message(text.strip(), limit, length=weighted_len)
    return [p.strip() for p in parts if p.strip()]
