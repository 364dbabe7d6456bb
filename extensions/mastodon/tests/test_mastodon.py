"""The Mastodon extension with the real Mastodon.py client against the loopback fake instance."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, RunResult, ScriptedModel
from hub.engine import Plugin
from hub.testing import temp_config
from hub.testing.mastodon import FakeMastodon, mastodon_length
from hub_mastodon import SINCE_ID_KEY, MastodonBot, MastodonSettings, extension, split_status, status_length

POST = "POST /api/v1/statuses"
TOKEN = "test-token"


def settings_for(fake: FakeMastodon, **kw: Any) -> MastodonSettings:
    values: dict[str, Any] = {
        "base_url": fake.base_url,
        "access_token": TOKEN,
        "dry_run": False,
        "post_interval": 0,
        "posts_per_minute": 1000,
    }
    values.update(kw)
    return MastodonSettings(**values)


class Bot:
    def __init__(self, hub: Hub, bot: MastodonBot) -> None:
        self.hub, self.bot = hub, bot
        self.results: list[RunResult] = []

    async def runs(self, n: int, timeout: float = 10) -> list[RunResult]:
        await until(lambda: len(self.results) >= n, timeout)
        return self.results


async def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def numbered(prefix: str = "Thanks") -> ScriptedModel:
    count = 0

    def answer(request: Any) -> str:
        nonlocal count
        count += 1
        return f"{prefix}, answer {count}."

    return ScriptedModel(answer)


@asynccontextmanager
async def bot(fake: FakeMastodon, data: Path, model: ScriptedModel | None = None, **kw: Any) -> AsyncIterator[Bot]:
    store_url = kw.pop("store_url", "")
    settings = settings_for(fake, **kw)
    mastodon = MastodonBot(settings)
    cfg = temp_config(data)
    cfg.hub.shutdown_grace = 2
    cfg.store.url = store_url  # "" SQLite in data; a postgresql:// URL (hub.testing.postgres)
    hub = Hub(cfg, model=model or numbered(), load_extensions=False, extensions=[extension(settings, bot=mastodon)])
    b = Bot(hub, mastodon)

    class Collect(Plugin):
        async def after_run(self, result: RunResult, ctx: Any) -> None:
            b.results.append(result)

    hub.plugins.add(Collect())
    async with hub:
        await until(lambda: mastodon.polls >= 1)
        yield b


async def test_a_streamed_mention_gets_a_reply_in_its_thread(tmp_path: Path) -> None:
    async with FakeMastodon() as fake:
        async with bot(fake, tmp_path, ScriptedModel(["Hello back!"])) as b:
            await fake.wait_for(lambda: fake.streams == 1)
            note = fake.mention("hi bot", username="alice", spoiler_text="long thread", visibility="public")
            sid = note["status"]["id"]
            (sent,) = await fake.wait_sent(1)
            assert sent["text"] == "@alice Hello back!" and sent["in_reply_to"] == sid
            assert sent["visibility"] == "unlisted" and sent["spoiler_text"] == "long thread"
            (result,) = await b.runs(1)
            assert result.context == f"mastodon:thread:{sid}"
            assert result.outputs[0].sent and result.outputs[0].data["status_ids"] == [sent["id"]]
            assert await b.hub.memory.get(SINCE_ID_KEY) == note["id"]
            # a reply to the bot's status joins the same thread
            fake.mention("and again", username="alice", in_reply_to=sent["id"])
            await fake.wait_sent(2)
            results = await b.runs(2)
            assert results[1].context == f"mastodon:thread:{sid}"


async def test_a_direct_mention_is_never_answered_more_publicly(tmp_path: Path) -> None:
    async with FakeMastodon() as fake:
        fake.mention("a private word", username="bob", visibility="direct")
        async with bot(fake, tmp_path, visibility="public"):
            (sent,) = await fake.wait_sent(1)
            assert sent["visibility"] == "direct"


async def test_a_restart_answers_no_mention_twice_and_misses_none(tmp_path: Path) -> None:
    async with FakeMastodon() as fake:
        fake.mention("one", username="a1", account_id="1")
        async with bot(fake, tmp_path):
            await fake.wait_sent(1)
        fake.mention("two while down", username="a2", account_id="2")  # no stream to carry it
        async with bot(fake, tmp_path):
            await fake.wait_sent(2)
            await asyncio.sleep(0)
        answered = [s["in_reply_to"] for s in fake.sent]
        assert len(answered) == len(set(answered)) == 2


async def test_the_stream_drops_and_polling_catches_up(tmp_path: Path) -> None:
    async with FakeMastodon() as fake:
        async with bot(fake, tmp_path, poll_interval=5) as b:
            await fake.wait_for(lambda: fake.streams == 1)
            fake.drop_streams()
            await fake.wait_for(lambda: fake.streams == 0)
            fake.mention("while the stream was down", username="carol", account_id="7")
            await fake.wait_sent(1, timeout=20)
            await until(lambda: b.bot.streams >= 2, 20)  # and the stream is back


async def test_429_and_503_are_retried_with_the_same_idempotency_key(tmp_path: Path) -> None:
    async with FakeMastodon() as fake:
        fake.fail_next(POST, status=503)
        fake.fail_next(POST, status=429, retry_after=0.2)
        fake.mention("please answer", username="dave", account_id="8")
        async with bot(fake, tmp_path) as b:
            (sent,) = await fake.wait_sent(1)
            (result,) = await b.runs(1)
            assert result.outputs[0].sent
        keys = [r.headers.get("Idempotency-Key") for r in fake.calls(POST)]
        assert len(keys) == 3 and len(set(keys)) == 1 and keys[0] == sent["idempotency_key"]
        assert len(fake.sent) == 1


async def test_a_long_reply_is_a_thread_within_the_instances_limit(tmp_path: Path) -> None:
    text = " ".join(f"Sentence {i} links https://example.org/{'x' * 80}/{i}." for i in range(12))
    async with FakeMastodon(max_characters=200, per_url=30) as fake:
        fake.mention("tell me everything", username="erin", account_id="9")
        async with bot(fake, tmp_path, ScriptedModel([text])) as b:
            (result,) = await b.runs(1)
            ids = result.outputs[0].data["status_ids"]
        sent = fake.sent
        assert len(sent) == len(ids) > 1
        assert all(mastodon_length(s["text"], per_url=30) <= 200 for s in sent)
        assert all(s["text"].startswith("@erin ") for s in sent)
        assert [s["in_reply_to"] for s in sent[1:]] == [s["id"] for s in sent[:-1]]  # each replies to the last


def test_length_counts_urls_at_the_reserved_width_and_remote_mentions_locally() -> None:
    assert status_length("see https://example.org/" + "a" * 100, per_url=23) == 4 + 23
    assert status_length("hi @bob@remote.example", per_url=23) == len("hi @bob")
    assert status_length("👩‍👩‍👧", per_url=23) == 1
    parts = split_status("word " * 300, limit=100, per_url=23, prefix="@x ")
    assert all(status_length(p) <= 100 and p.startswith("@x ") for p in parts)


def test_missing_settings_are_named() -> None:
    from hub import ConfigError

    with pytest.raises(ConfigError, match="access_token"):
        extension(MastodonSettings(base_url="https://mastodon.example"))
    with pytest.raises(ValueError, match="pairing"):
        MastodonSettings(base_url="https://m.example", access_token="x", dm_policy="pairing")


async def test_a_held_reply_is_posted_once_when_approved_with_its_thread_details(tmp_path: Path) -> None:
    async with FakeMastodon() as fake:
        note = fake.mention("check me", username="fay", account_id="11", spoiler_text="cw", visibility="private")
        async with bot(fake, tmp_path, ScriptedModel(["Draft"]), review=True) as b:
            (result,) = await b.runs(1)
            held_id = result.outputs[0].data["held_for_review"]
            assert fake.sent == []
            reviews = b.hub.stores.reviews
            await reviews.decide(held_id, approve=True, text="Checked")
            assert b.bot.timeline.reviews is not None
            posted = await asyncio.gather(
                b.bot.timeline.reviews.post_approved(), b.bot.timeline.reviews.post_approved()
            )
            assert sorted(posted) == [0, 1]
            (sent,) = await fake.wait_sent(1)
            assert (sent["text"], sent["in_reply_to"], sent["visibility"], sent["spoiler_text"]) == (
                "@fay Checked",
                note["status"]["id"],
                "private",
                "cw",
            )
            done = await reviews.get(held_id)
            assert done is not None and done.state == "posted"
