"""X's weighted length against twitter-text's own conformance file (vendored in data/,
see data/NOTICE): every weighted-length case of the v3 counter (emoji sequences counted
once), and the texts the hand-written count got wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twitter_text import parse_tweet

from hub_twitter import MAX_TWEET, split_tweets, weighted_len

_VALIDATE = Path(__file__).parent / "data" / "twitter-text-validate.yml"
# the sections twitter-text's own suites run with the v3 configuration
_V3_SECTIONS = ("WeightedTweetsWithDiscountedEmojiCounterTest", "UnicodeDirectionalMarkerCounterTest")


def _cases() -> list[Any]:
    tests = yaml.safe_load(_VALIDATE.read_text(encoding="utf-8"))["tests"]
    return [
        pytest.param(case["text"], case["expected"]["weightedLength"], id=f"{section}: {case['description']}")
        for section in _V3_SECTIONS
        for case in tests[section]
    ]


def test_the_conformance_file_is_complete() -> None:
    assert len(_cases()) == 24  # 22 + 2 cases at commit 30e2430


@pytest.mark.parametrize(("text", "expected"), _cases())
def test_weighted_length_matches_twitter_text_conformance(text: str, expected: int) -> None:
    assert weighted_len(text) == expected


def test_only_what_twitter_text_links_counts_23() -> None:
    # a private address, an internal host, a bare word: no link, counted character by character
    logs = "http://10.0.0.5:8080/logs/" + "a" * 60
    assert weighted_len(logs) == len(logs)
    internal = "http://api.internal/" + "b" * 40
    assert weighted_len(internal) == len(internal)
    assert weighted_len("see https://example.com/" + "c" * 100) == 4 + 23
    # an emoji sequence weighs 2, not 2 per code point
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
    assert weighted_len(family * 140) == MAX_TWEET
    assert weighted_len("\U0001f1eb\U0001f1f7") == 2  # a flag


def test_a_long_private_link_is_split_so_x_takes_every_part() -> None:
    text = "Deployed. Logs: http://10.0.0.5:8080/logs/" + "/".join(f"step-{i:03d}" for i in range(40))
    assert weighted_len(text) > MAX_TWEET
    parts = split_tweets(text)
    # measured by twitter-text itself, not by the function under test
    assert len(parts) >= 2 and all(parse_tweet(p).weightedLength <= MAX_TWEET for p in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")


def _oracle(post: str) -> int:
    """twitter-text's own count (v3, emoji sequences once), not the function under test."""
    from twitter_text.config import config

    return int(parse_tweet(post, config["version3"]).weightedLength)


def test_a_code_fence_does_not_make_a_post_over_the_limit() -> None:
    # nothing on X renders Markdown: its fences are text, and split as text
    text = "word " * 50 + "```py\nx = 1\n``` " + " ".join(f"more phrase {i}" for i in range(30))
    parts = split_tweets(text)
    assert [p for p in parts if _oracle(p) > MAX_TWEET] == []
    assert "".join(parts).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")


_WORD = st.one_of(
    st.sampled_from(
        ["word", "phrase", "naïve", "日本語", "😀", "👨‍👩‍👧", "https://example.com/a", "http://10.0.0.5/x"]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), max_size=10),
)
_LINE = st.lists(_WORD, max_size=70).map(" ".join)
# a fenced block as Markdown writes it, its info string sometimes running on, its closer
# sometimes followed by more text (then it closes nothing), sometimes missing
_FENCE = st.builds(
    lambda fence, info, body, after: (
        f"{fence}{info}\n" + "\n".join(body) + (f"\n{fence}{after}" if after != "-" else "")
    ),
    st.sampled_from(["```", "~~~", "````", "> ```", "- ```"]),
    st.one_of(st.just(""), st.just("py"), _LINE),
    st.lists(_LINE, max_size=6),
    st.sampled_from(["", " ", " and more words after it", "-"]),
)
_TEXT = st.lists(st.one_of(_LINE, _LINE, _FENCE), min_size=1, max_size=8).map("\n".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_every_post_of_a_thread_is_within_the_limit_as_twitter_text_counts_it(text: str) -> None:
    parts = split_tweets(text)
    assert [_oracle(p) for p in parts if _oracle(p) > MAX_TWEET] == []
    # nothing lost: every character but whitespace, in order
    assert "".join("".join(parts).split()) == "".join(text.split())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_the_count_a_split_measures_with_is_twitter_texts(text: str) -> None:
    # summed over whitespace-separated tokens, each counted once: the same as counting it whole
    from hub_twitter._text import _summed_len

    assert _summed_len(text) == _oracle(text)
