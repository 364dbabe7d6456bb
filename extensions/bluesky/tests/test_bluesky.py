"""The Bluesky extension with the real atproto AsyncClient against the loopback fake PDS."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grapheme
import pytest

from hub import Hub, RunResult, ScriptedModel
from hub.engine import Plugin
from hub.testing import temp_config
from hub.testing.bluesky import APP_PASSWORD, BOT_HANDLE, FakeBluesky
from hub_bluesky import CURSOR_KEY, BlueskyBot, BlueskySettings, SessionRevoked, build_text, extension, split_post

CREATE = "com.atproto.repo.createRecord"


def settings_for(fake: FakeBluesky, **kw: Any) -> BlueskySettings:
    values: dict[str, Any] = {
        "handle": BOT_HANDLE,
        "app_password": APP_PASSWORD,
        "base_url": fake.base_url,  # the SDK's /xrpc path is added
        "dry_run": False,
        "post_interval": 0,
        "posts_per_minute": 1000,
        "poll_interval": 5,
    }
    values.update(kw)
    return BlueskySettings(**values)


async def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


class Bot:
    def __init__(self, hub: Hub, bot: BlueskyBot) -> None:
        self.hub, self.bot = hub, bot
        self.results: list[RunResult] = []

    async def until_runs(self, n: int, timeout: float = 10) -> None:
        await until(lambda: len(self.results) >= n, timeout)


@asynccontextmanager
async def bot(fake: FakeBluesky, data: Path, model: ScriptedModel | None = None, **kw: Any) -> AsyncIterator[Bot]:
    http = kw.pop("http", None)
    settings = settings_for(fake, **kw)
    bluesky = BlueskyBot(settings)
    cfg = temp_config(data)
    cfg.http = http
    cfg.hub.shutdown_grace = 2
    hub = Hub(
        cfg,
        model=model or ScriptedModel(lambda r: "Thanks!"),
        load_extensions=False,
        extensions=[extension(settings, bot=bluesky)],
    )
    b = Bot(hub, bluesky)

    class Collect(Plugin):
        async def after_run(self, result: RunResult, ctx: Any) -> None:
            b.results.append(result)

    hub.plugins.add(Collect())
    async with hub:
        await until(lambda: bluesky.polls >= 1)
        yield b


async def test_a_mention_gets_a_reply_with_root_and_parent_and_a_mention_facet(tmp_path: Path) -> None:
    async with FakeBluesky() as fake:
        note = fake.mention("hi @hub.bsky.social", handle="alice.bsky.social")
        async with bot(fake, tmp_path, ScriptedModel(["Hello back, see https://example.org/x"])) as b:
            (sent,) = await fake.wait_sent(1)
            await until(lambda: len(b.results) == 1)
            assert b.results[0].context == f"bluesky:thread:{note['uri']}"
            assert await b.hub.memory.get(CURSOR_KEY) == {"at": note["indexedAt"], "uri": note["uri"]}
        assert sent["text"] == "@alice.bsky.social Hello back, see https://example.org/x"
        assert sent["root"] == sent["parent"] == note["uri"]
        kinds = sorted(f["features"][0]["$type"] for f in sent["facets"])
        assert kinds == ["app.bsky.richtext.facet#link", "app.bsky.richtext.facet#mention"]
        mention = next(f for f in sent["facets"] if f["features"][0]["$type"].endswith("#mention"))
        start, end = mention["index"]["byteStart"], mention["index"]["byteEnd"]
        assert sent["text"].encode()[start:end] == b"@alice.bsky.social"


async def test_a_reply_in_a_thread_keeps_its_root_and_a_long_answer_is_a_thread(tmp_path: Path) -> None:
    long = " ".join(f"Part {i}: naïve café ☕ sentences." for i in range(40))
    async with FakeBluesky() as fake:
        root = "at://did:plc:root/app.bsky.feed.post/3kroot"
        note = fake.mention(
            "go on", handle="bob.bsky.social", reply_to=(root, "at://did:plc:x/app.bsky.feed.post/3kparent")
        )
        async with bot(fake, tmp_path, ScriptedModel([long])) as b:
            await until(lambda: len(b.results) == 1)
            assert b.results[0].context == f"bluesky:thread:{root}"
        sent = fake.sent
        assert len(sent) > 1 and all(grapheme.length(s["text"]) <= 300 for s in sent)
        assert all(s["root"] == root for s in sent)
        assert sent[0]["parent"] == note["uri"] and [s["parent"] for s in sent[1:]] == [s["uri"] for s in sent[:-1]]


async def test_a_restart_answers_no_mention_twice(tmp_path: Path) -> None:
    async with FakeBluesky() as fake:
        fake.mention("one", handle="a1.bsky.social")
        async with bot(fake, tmp_path):
            await fake.wait_sent(1)
        fake.mention("two while down", handle="a2.bsky.social")
        async with bot(fake, tmp_path) as b:
            await fake.wait_sent(2)
            await b.bot.poll()
        assert [s["parent"] for s in fake.sent] == [n["uri"] for n in fake.state.notifications]


async def test_an_expiring_session_refreshes_and_a_revoked_one_stops_with_a_clear_error(tmp_path: Path) -> None:
    import aiohttp

    from hub.config import HttpSection

    token = "bluesky-health-token-0123456"
    async with FakeBluesky(access_ttl=600) as fake:  # inside the SDK's 15 minutes: it refreshes first
        async with bot(fake, tmp_path, http=HttpSection(port=0, token=token)) as b:
            assert fake.state.refreshes >= 1
            fake.revoke()
            with pytest.raises(SessionRevoked, match="app password was revoked"):
                await b.bot.poll()
            url = f"http://127.0.0.1:{b.hub.http.port}/healthz"
            async with aiohttp.ClientSession() as s, s.get(url, headers={"Authorization": f"Bearer {token}"}) as r:
                body = await r.json()
            assert r.status == 503 and body["status"] == "degraded"
            assert "BLUESKY_APP_PASSWORD" in body["platforms"]["bluesky"]


async def test_429_and_500_are_retried_and_posted_once(tmp_path: Path) -> None:
    async with FakeBluesky() as fake:
        fake.fail_next(CREATE, status=500)
        fake.fail_next(CREATE, status=429, retry_after=0.1)
        fake.mention("answer please", handle="c.bsky.social")
        async with bot(fake, tmp_path) as b:
            await fake.wait_sent(1)
            await until(lambda: len(b.results) == 1)
            assert b.results[0].outputs[0].sent
        assert len(fake.sent) == 1 and len(fake.calls(CREATE)) == 3


def test_text_is_split_in_graphemes_and_facets_count_utf8_bytes() -> None:
    family = "👩‍👩‍👧"  # one grapheme, 18 bytes
    parts = split_post(family * 700, prefix="@x ")
    assert all(grapheme.length(p) <= 300 for p in parts) and parts[0].startswith("@x ")
    tb = build_text(f"{family} see https://a.example and @bo.bsky.social", {"bo.bsky.social": "did:plc:bo"})
    text, facets = tb.build_text(), tb.build_facets()
    link = facets[0]
    assert text.encode()[link.index.byte_start : link.index.byte_end] == b"https://a.example"


async def test_a_held_reply_is_posted_once_when_approved_in_its_thread(tmp_path: Path) -> None:
    async with FakeBluesky() as fake:
        note = fake.mention("check me", handle="dee.bsky.social")
        async with bot(fake, tmp_path, ScriptedModel(["Draft"]), review=True) as b:
            await until(lambda: len(b.results) == 1)
            held_id = b.results[0].outputs[0].data["held_for_review"]
            assert fake.sent == []
            await b.hub.stores.reviews.decide(held_id, approve=True, text="Checked")
            assert b.bot.timeline.reviews is not None
            assert sorted(
                await asyncio.gather(b.bot.timeline.reviews.post_approved(), b.bot.timeline.reviews.post_approved())
            ) == [0, 1]
            (sent,) = await fake.wait_sent(1)
        assert (sent["text"], sent["root"], sent["parent"]) == ("@dee.bsky.social Checked", note["uri"], note["uri"])
