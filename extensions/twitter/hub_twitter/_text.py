"""How X measures a post, and splitting long text into a thread.

X counts "weighted" characters by twitter-text v3: most Latin, Greek, Cyrillic and
punctuation code points weigh 1, everything else (CJK) 2, an emoji sequence (a family,
a flag, a skin tone) 2 however many code points it has, and a URL 23 whatever its
length, but only what twitter-text's own extractor sees as a link: ``http://10.0.0.5/...``
or ``http://api.internal/...`` count character by character. The count is the
twitter-text Python port's (``twitter-text-parser``), which passes twitter-text's own
conformance file (tests/data/twitter-text-validate.yml); X refuses a post over 280.

The count costs about 7 µs a character (twitter-text's emoji pattern), so a split that
measured every candidate cut held the event loop for seconds. A split measures candidates
by the sum of their whitespace-separated tokens' counts, each counted once and kept
(nothing twitter-text counts, a link or an emoji sequence, spans whitespace), and then
every post by twitter-text itself before it is returned.
"""

from __future__ import annotations

import functools
import re

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


_SPACES = re.compile(r"(\s+)")


@functools.lru_cache(maxsize=65_536)
def _token_len(token: str) -> int:
    return weighted_len(token)


def _summed_len(text: str) -> int:
    """`weighted_len()` as the sum of its tokens' and whitespace runs' counts, each
    counted once per process: what the split measures its candidate cuts with."""
    return sum(_token_len(t) for t in _SPACES.split(text) if t)


def split_tweets(text: str, limit: int = MAX_TWEET) -> list[str]:
    """``text`` as posts of at most ``limit`` weighted characters, in order, never truncated.

    Splits prefer paragraph, line, sentence and word boundaries
    ([`hub.platform.split_message()`][hub.platform.split_message], as plain text), and every post is measured as X
    measures it before it is returned. Each post is stripped of the
    whitespace at its edges, which X would drop anyway.
    """
    posts: list[str] = []
    for part in split_message(text.strip(), limit, length=_summed_len, markdown=MARKDOWN):
        part = part.strip()
        if weighted_len(part) <= limit:
            posts.append(part)
        elif part:  # the summed count missed (never seen): split by twitter-text's own
            posts.extend(p.strip() for p in split_message(part, limit, length=weighted_len, markdown=MARKDOWN))
    return [p for p in posts if p]
