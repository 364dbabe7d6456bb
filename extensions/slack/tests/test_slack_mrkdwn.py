"""Markdown as Slack's mrkdwn, and the plain fallback: pure functions."""

from __future__ import annotations

import pytest

from hub.platform import split_message
from hub_slack import to_mrkdwn, to_plain
from hub_slack._client import MAX_LENGTH, mrkdwn_len


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __also__", "*bold* and *also*"),
        ("*it* and _it_", "_it_ and _it_"),
        ("~~gone~~", "~gone~"),
        ("[the docs](https://example.org/a?b=1&c=2)", "<https://example.org/a?b=1&amp;c=2|the docs>"),
        ("# Title\n## Sub", "*Title*\n*Sub*"),
        ("- one\n* two", "• one\n• two"),
        ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
        ("ping <@U123ABC> in <#C0456>", "ping <@U123ABC> in <#C0456>"),
        ("<!channel> <!here> <!everyone>", "&lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt;"),
        ("`**not bold** <x>`", "`**not bold** &lt;x&gt;`"),
        ("```python\nif a < b:\n    x = a**2\n```", "```\nif a &lt; b:\n    x = a**2\n```"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("snake_case_name", "snake_case_name"),
    ],
)
def test_to_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_to_plain_drops_the_markup_and_keeps_the_words() -> None:
    text = "# Plan\n**Do** [this](https://x.org) ~~not~~ `that` <!here>\n```\ncode < here\n```"
    assert to_plain(text) == "Plan\nDo this (https://x.org) not that &lt;!here&gt;\ncode &lt; here"


def test_a_split_by_mrkdwn_length_keeps_every_part_within_the_block_limit() -> None:
    text = "\n\n".join(f"A & B < C {'&' * 40} paragraph {i} **bold**" for i in range(400))
    parts = split_message(text, MAX_LENGTH, length=mrkdwn_len)
    assert len(parts) > 3 and all(len(to_mrkdwn(p)) <= MAX_LENGTH for p in parts)
    assert "".join(p.replace("\n", "") for p in parts) == text.replace("\n", "")
