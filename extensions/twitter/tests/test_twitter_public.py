"""Posting in public on X: the review queue, the per-account cap and a mention storm, with the
real tweepy client against the loopback fake X API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from test_twitter import bot, inputs, routed, settings_for

from hub import ScriptedModel
from hub.platform import ReviewQueue
from hub.testing.storms import check_capped_storm
from hub.testing.twitter import FakeTwitter
from hub_twitter import TwitterBot

POST = "POST /2/tweets"


async def test_a_held_reply_waits_for_approval_then_posts_once_as_edited(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        mid = tw.push_mention("@hubbot what's new?", author_id="42", author_username="alice")
        async with bot(tw, tmp_path, ScriptedModel(["Draft answer"]), review=True) as b:
            (result,) = await b.runs(1)
            (out,) = result.outputs
            assert out.sent and out.data["in_reply_to"] == mid
            reviews = b.hub.stores.reviews
            (held,) = await reviews.list(platform="twitter")
            assert out.data["held_for_review"] == held.id
            assert (held.state, held.text, held.in_reply_to, held.output) == (
                "pending",
                "Draft answer",
                mid,
                "twitter:reply",
            )
            assert tw.sent == []  # nothing goes out before an operator approves
            assert await reviews.move(held.id, "pending", "approved", text="Checked answer") is not None
            # two workers look for approved posts at once: one claims it, one post goes out
            other = TwitterBot(b.bot.settings, client_factory=routed(tw))
            second = ReviewQueue(reviews, "twitter", expiry=60, poster=other._post_held)
            other.governor, other.hub, other.client = b.bot.governor, b.hub, b.bot.client
            assert b.bot.reviews is not None
            posted = await asyncio.gather(b.bot.reviews.post_approved(), second.post_approved())
            assert sorted(posted) == [0, 1]
            sent = await tw.wait_sent(1)
            assert [(s["text"], s["in_reply_to"]) for s in sent] == [("Checked answer", mid)]
            done = await reviews.get(held.id)
            assert done is not None and done.state == "posted"
            assert json.loads(done.result or "{}")["tweet_ids"] == [sent[0]["id"]]
            assert await b.bot.reviews.post_approved() == 0  # posted means posted: never again
        assert len(tw.calls(POST)) == 1


async def test_a_rejected_or_expired_post_never_goes_out(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        tw.push_mention("@hubbot one", author_id="42", author_username="alice")
        tw.push_mention("@hubbot two", author_id="43", author_username="bob")
        async with bot(tw, tmp_path, review=True, review_expiry=0.001) as b:
            await b.runs(2)
            reviews = b.hub.stores.reviews
            first, second = await reviews.list(platform="twitter")
            assert first.shown_state == "expired"
            assert await reviews.move(first.id, "pending", "approved") is None
            assert b.bot.reviews is not None and await b.bot.reviews.post_approved() == 0
        assert tw.calls(POST) == []


async def test_one_account_gets_at_most_replies_per_account(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        for i in range(4):
            tw.push_mention(f"@hubbot again {i}", author_id="42", author_username="alice")
        tw.push_mention("@hubbot hello", author_id="77", author_username="carol")
        async with bot(tw, tmp_path, replies_per_account=2) as b:
            results = await b.runs(3)
            await tw.wait_sent(3)
            await b.bot.poll()  # a second poll: the capped mentions are behind since_id, not retried
            assert sorted(inputs(r)[-1].user for r in results) == ["@alice", "@alice", "@carol"]
        assert len(tw.calls(POST)) == 3


async def test_a_mention_storm_is_answered_under_the_daily_cap(tmp_path: Path) -> None:
    """500 mentions at once: every one is recorded, no more than max_posts_per_day go out, no
    mention is answered twice, and the ones past the cap are failed outputs, not lost."""
    async with FakeTwitter() as tw:
        ids = [
            tw.push_mention(f"@hubbot storm {i}", author_id=str(1000 + i), author_username=f"s{i}") for i in range(500)
        ]
        async with bot(tw, tmp_path, first_poll=False, max_posts_per_day=40, posts_per_minute=10_000) as b:
            results = await b.runs(500, timeout=60)
        assert len(tw.calls(POST)) == 40
        check_capped_storm(
            results, cap=40, answered=[s["in_reply_to"] for s in tw.sent], mentions={f"twitter:{i}" for i in ids}
        )
    assert settings_for(tw).max_posts_per_day == 100  # the default
