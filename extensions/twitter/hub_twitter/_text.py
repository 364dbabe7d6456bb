"""How X measures a post, and splitting long text into a thread.

X counts "weighted" characters by twitter-text v3: most Latin, Greek, Cyrillic and
punctuation code points weigh 1, everything else (CJK) 2, an emoji sequence (a family,
a flag, a skin tone) 2 however many code points it has, and a URL 23 whatever its
length, but only what twitter-text's own extractor sees as a link: ``http://10.0.0.5/...``
or ``http://api.internal/...`` count character by character. The count is the
twitter-text Python port's (``twitter-text-parser``), which passes twitter-text's own
conformance file (tests/data/twitter-text-validate.yml); X refuses a post over 280.
"""

from __future__ import annotations

from twitter_text import parse_tweet
from twitter_text.config import config as _configs

from hub.platform import split_message

__all__ = ["MAX_TWEET", "MARKDOWN", "URL_WEIGHT", "weighted_len", "split_tweets"]

MAX_TWEET = 280
URL_WEIGHT = 23

# the configuration X counts posts with today: version 3, emoji sequences counted once
_V3 = _configs["version3"]


def weighted_len(text: str) -> int:
    """The weighted length X gives ``text`` (twitter-text v3)."""
    return int(parse_tweet(text, _V3).weightedLength)


MARKDOWN = False
"""X renders no Markdown: a code fence is text there, split as text (never reopened in the
next post, which would only lengthen the posts)."""


def split_tweets(text: str, limit: int = MAX_TWEET) -> list[str]:
    """``text`` as posts of at most ``limit`` weighted characters, in order, never truncated.

    Splits prefer paragraph, line, sentence and word boundaries
    (:func:`hub.platform.split_message`, as plain text), and every post is measured as X
    measures it before it is returned. Each post is stripped of the
    whitespace at its edges, which X would drop anyway.
    """
    parts = split_message(text.strip(), limit, length=weighted_len, markdown=MARKDOWN)
    return [p.strip() for p in parts if p.strip()]
