"""X's weighted length against twitter-text's own conformance file (vendored in data/,
see data/NOTICE): every weighted-length case of the v3 counter (emoji sequences counted
once), and the texts the hand-written count got wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
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
