"""Posting in public on Mastodon: a mention storm under the daily cap, an approval that wakes
the poster at once, and pictures refused rather than dropped; the real Mastodon.py client
against the loopback fake instance."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import pytest
from test_mastodon import POST, bot, numbered

from hub import ScriptedModel
from hub.testing.mastodon import FakeMastodon
from hub.testing.postgres import temporary_schema
from hub.testing.processes import SOURCE_ROOT
from hub.testing.storms import check_capped_storm


async def test_a_mention_storm_is_answered_under_the_daily_cap(tmp_path: Path) -> None:
    """500 mentions at once: every one is recorded, exactly max_posts_per_day go out, none
    twice, and the ones past the cap are failed outputs naming the cap, not lost."""
    async with FakeMastodon() as fake:
        notes = [fake.mention(f"storm {i}", username=f"s{i}", account_id=str(1000 + i)) for i in range(500)]
        async with bot(fake, tmp_path, numbered(), max_posts_per_day=40, posts_per_minute=10_000) as b:
            results = await b.runs(500, timeout=120)
        assert len(fake.calls(POST)) == 40
        check_capped_storm(
            results,
            cap=40,
            answered=[s["in_reply_to"] for s in fake.sent],
            mentions={f"mastodon:{n['status']['id']}" for n in notes},
        )


async def test_an_approval_in_the_process_wakes_the_poster_at_once(tmp_path: Path) -> None:
    """review_poll is an hour: only the wake-up of the approval can post it within the test."""
    async with FakeMastodon() as fake:
        note = fake.mention("check me", username="fay", account_id="11")
        async with bot(fake, tmp_path, ScriptedModel(["Draft"]), review=True, review_poll=3600) as b:
            (result,) = await b.runs(1)
            held_id = result.outputs[0].data["held_for_review"]
            assert b.bot.timeline.reviews is not None and b.bot.timeline.reviews.poll == 3600
            await b.hub.stores.reviews.decide(held_id, approve=True, text="Checked")  # as the dashboard does
            (sent,) = await fake.wait_sent(1, timeout=20)
        assert (sent["text"], sent["in_reply_to"]) == ("@fay Checked", note["status"]["id"])


async def test_hub_review_approve_in_another_process_wakes_the_poster_on_postgresql(tmp_path: Path) -> None:
    """`hub review approve` run as its own process beside the hub, both on one PostgreSQL
    store: its NOTIFY wakes the poster (review_poll is an hour)."""
    async with temporary_schema() as url, FakeMastodon() as fake:
        note = fake.mention("check me", username="hal", account_id="13")
        kw = {"review": True, "review_poll": 3600, "store_url": url}
        async with bot(fake, tmp_path / "hub", ScriptedModel(["Draft"]), **kw) as b:
            (result,) = await b.runs(1)
            held_id = result.outputs[0].data["held_for_review"]
            config = tmp_path / "cli.toml"
            config.write_text(f'[hub]\ndata_dir = "{tmp_path / "cli"}"\n\n[store]\nurl = "{url}"\n')
            cli = await asyncio.create_subprocess_exec(
                sys.executable,
                *("-m", "hub.cli", "review", "approve", held_id, "--text", "Checked", "--config", str(config)),
                env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(cli.communicate(), 60)
            assert cli.returncode == 0 and f"approved: {held_id}" in out.decode(), out.decode()
            (sent,) = await fake.wait_sent(1, timeout=20)
        assert (sent["text"], sent["in_reply_to"]) == ("@hal Checked", note["status"]["id"])


@pytest.mark.parametrize("review", [True, False])
async def test_a_reply_naming_pictures_is_refused_not_posted_or_held_without_them(
    tmp_path: Path, review: bool, caplog: pytest.LogCaptureFixture
) -> None:
    answer = '<response><output type="mastodon:reply" media="media:1">Look at this</output></response>'
    async with FakeMastodon() as fake:
        fake.mention("show me", username="gus", account_id="12")
        with caplog.at_level(logging.WARNING, logger="hub.platform"):
            async with bot(fake, tmp_path, ScriptedModel([answer]), review=review) as b:
                (result,) = await b.runs(1)
                assert await b.hub.stores.reviews.list(platform="mastodon") == []  # nothing held
        (out,) = result.outputs
        why = "held for review keeps its text only" if review else "Mastodon replies carry text only"
        assert not out.sent and "names 1 picture(s) (media:1)" in (out.error or "") and why in (out.error or "")
        assert any(why in r.getMessage() for r in caplog.records)  # what the operator reads
        assert fake.sent == []
