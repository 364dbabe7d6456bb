"""Posting in public on Bluesky: a mention storm under the daily cap, an approval over HTTP
that wakes the poster at once, and pictures refused rather than dropped; the real atproto
client against the loopback fake PDS."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import pytest
from test_bluesky import CREATE, bot

from hub import ScriptedModel
from hub.config import HttpSection
from hub.testing.bluesky import FakeBluesky
from hub.testing.storms import check_capped_storm


async def test_a_mention_storm_is_answered_under_the_daily_cap(tmp_path: Path) -> None:
    """500 mentions at once: every one is recorded, exactly max_posts_per_day go out, none
    twice, and the ones past the cap are failed outputs naming the cap, not lost."""
    count = 0

    def numbered(request: object) -> str:
        nonlocal count
        count += 1
        return f"Thanks, answer {count}."

    async with FakeBluesky() as fake:
        notes = [fake.mention(f"storm {i}", handle=f"s{i}.bsky.social") for i in range(500)]
        async with bot(fake, tmp_path, ScriptedModel(numbered), max_posts_per_day=40, posts_per_minute=10_000) as b:
            await b.until_runs(500, timeout=120)
            results = b.results
        assert len(fake.calls(CREATE)) == 40
        check_capped_storm(
            results, cap=40, answered=[s["parent"] for s in fake.sent], mentions={f"bluesky:{n['uri']}" for n in notes}
        )


async def test_an_approval_over_http_wakes_the_poster_at_once(tmp_path: Path) -> None:
    """review_poll is an hour: only the wake-up of POST /reviews/{id} can post it within the test."""
    token = "bluesky-review-token-0123456"
    async with FakeBluesky() as fake:
        note = fake.mention("check me", handle="dee.bsky.social")
        http = HttpSection(port=0, token=token)
        async with bot(fake, tmp_path, ScriptedModel(["Draft"]), review=True, review_poll=3600, http=http) as b:
            await b.until_runs(1)
            held_id = b.results[0].outputs[0].data["held_for_review"]
            url = f"http://127.0.0.1:{b.hub.http.port}/reviews/{held_id}"
            async with (
                aiohttp.ClientSession() as s,
                s.post(
                    url, json={"approve": True, "text": "Checked"}, headers={"Authorization": f"Bearer {token}"}
                ) as r,
            ):
                assert r.status == 200, await r.text()
            (sent,) = await fake.wait_sent(1, timeout=20)
        assert (sent["text"], sent["parent"]) == ("@dee.bsky.social Checked", note["uri"])


@pytest.mark.parametrize("review", [True, False])
async def test_a_reply_naming_pictures_is_refused_not_posted_or_held_without_them(
    tmp_path: Path, review: bool, caplog: pytest.LogCaptureFixture
) -> None:
    answer = '<response><output type="bluesky:reply" media="media:1">Look at this</output></response>'
    async with FakeBluesky() as fake:
        fake.mention("show me", handle="gus.bsky.social")
        with caplog.at_level(logging.WARNING, logger="hub.platform"):
            async with bot(fake, tmp_path, ScriptedModel([answer]), review=review) as b:
                await b.until_runs(1)
                assert await b.hub.stores.reviews.list(platform="bluesky") == []  # nothing held
        (out,) = b.results[0].outputs
        why = "held for review keeps its text only" if review else "Bluesky replies carry text only"
        assert not out.sent and "names 1 picture(s) (media:1)" in (out.error or "") and why in (out.error or "")
        assert any(why in r.getMessage() for r in caplog.records)  # what the operator reads
        assert fake.sent == []
