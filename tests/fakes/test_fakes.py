"""The fakes, proven against the real clients (python-telegram-bot, discord.py, tweepy).

No mocks: each test runs a real client against a loopback fake, so what passes here is what
the platform extensions can rely on.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
import telegram
import tweepy
from telegram.ext import Application, ContextTypes, MessageHandler, filters
from tweepy.asynchronous import AsyncClient

from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram, MarkupError, TelegramState, check_markup
from tests.fakes.twitter import FakeTwitter, weighted_length

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # discord imports audioop
    import discord

TOKEN = "123456:TEST"


# -- Telegram ----------------------------------------------------------------------------------


def _seconds(value: Any) -> float:
    """RetryAfter.retry_after is an int or a timedelta depending on PTB settings."""
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


@contextlib.asynccontextmanager
async def ptb_app(tg: FakeTelegram, stop_times: list[float] | None = None
                  ) -> AsyncIterator[Application]:
    """A real PTB Application polling the fake; replies "echo: <text>" to each message."""

    async def echo(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        await update.message.reply_text(f"echo: {update.message.text}")

    app = (
        Application.builder().token(TOKEN).base_url(f"{tg.base_url}/bot")
        .base_file_url(f"{tg.base_url}/file/bot").build()
    )
    app.add_handler(MessageHandler(filters.TEXT, echo))
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(timeout=10)
    try:
        yield app
    finally:
        started = time.monotonic()
        await app.updater.stop()
        await app.stop()
        await app.shutdown()
        if stop_times is not None:
            stop_times.append(time.monotonic() - started)


async def test_telegram_message_roundtrip_confirms_offset_and_stops_fast() -> None:
    async with FakeTelegram() as tg:
        stop_times: list[float] = []
        async with ptb_app(tg, stop_times):
            update_id, _ = tg.push_message(chat_id=42, text="hello")
            sent = await tg.wait_sent(1)
            assert sent[0]["chat_id"] == 42 and sent[0]["text"] == "echo: hello"
        # PTB's shutdown poll (timeout 0) confirms what it handled.
        assert tg.confirmed_offset == update_id + 1
        assert tg.pending_updates == []
        assert stop_times[0] < 1.0, "a waiting long poll must not hold up updater.stop()"
        names = [r.name for r in tg.requests]
        assert names[:3] == ["getMe", "deleteWebhook", "getUpdates"]


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_telegram_retry_after_and_bad_requests_reach_the_client() -> None:
    async with FakeTelegram() as tg:
        bot = telegram.Bot(TOKEN, base_url=f"{tg.base_url}/bot")
        async with bot:
            tg.fail_next("sendMessage", status=429, retry_after=3)
            with pytest.raises(telegram.error.RetryAfter) as caught:
                await bot.send_message(chat_id=7, text="first try")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # PTB 22.2+: int now, timedelta later
                assert _seconds(caught.value.retry_after) == 3
            await bot.send_message(chat_id=7, text="second try")
            assert [r.status for r in tg.calls("sendMessage")] == [429, 200]
            assert [s["text"] for s in tg.sent] == ["second try"]

            bad = [
                ("Markdown", "a snake_case name"),
                ("MarkdownV2", "Done."),  # '.' must be escaped in MarkdownV2
                ("MarkdownV2", "*bold"),
                ("HTML", "<b>unclosed"),
                ("HTML", "1 < 2"),
            ]
            for mode, text in bad:
                with pytest.raises(telegram.error.BadRequest, match="(?i)can't parse entities"):
                    await bot.send_message(chat_id=7, text=text, parse_mode=mode)
            # PTB drops the "Bad Request: " prefix and capitalises what follows.
            with pytest.raises(telegram.error.BadRequest, match="Message is too long"):
                await bot.send_message(chat_id=7, text="x" * 4097)
            await bot.send_message(chat_id=7, text="x" * 4096)
            await bot.send_message(chat_id=7, text="*ok* \\. done", parse_mode="MarkdownV2")
            await bot.send_message(chat_id=7, text="<b>1 &lt; 2</b>", parse_mode="HTML")
            assert len(tg.sent) == 4

            tg.fail_next("sendMessage", status=500)
            with pytest.raises(telegram.error.NetworkError):
                await bot.send_message(chat_id=7, text="boom")
            assert tg.failures[-1].served == 1


def test_telegram_markup_rules() -> None:
    assert check_markup("*bold* and _it_", "Markdown") == "bold and it"
    assert check_markup("a\\_b", "Markdown") == "a_b"
    assert check_markup("[link](http://x.y/a_b)", "MarkdownV2") == "link"
    assert check_markup("`a.b`", "MarkdownV2") == "a.b"
    with pytest.raises(MarkupError, match="byte offset 3"):
        check_markup("é *x", "Markdown")  # offsets are UTF-8 bytes, as Telegram's


async def test_telegram_long_poll_honours_timeout_and_offset() -> None:
    async with FakeTelegram() as tg:
        bot = telegram.Bot(TOKEN, base_url=f"{tg.base_url}/bot")
        async with bot:
            started = time.monotonic()
            assert await bot.get_updates(timeout=0.3) == ()
            assert 0.25 < time.monotonic() - started < 2

            first, _ = tg.push_message(chat_id=1, text="a")
            second, _ = tg.push_message(chat_id=-100, text="b @test_bot", from_id=5,
                                        chat_type="supergroup")
            updates = await bot.get_updates(offset=0, timeout=5)
            assert [u.update_id for u in updates] == [first, second]
            group = updates[1].message
            assert group.chat.type == "supergroup" and group.from_user.id == 5
            assert group.entities[0].type == "mention"
            # Not confirmed yet: the same poll again returns them again.
            assert len(await bot.get_updates(offset=first)) == 2
            assert [u.update_id for u in await bot.get_updates(offset=second)] == [second]
            assert tg.confirmed_offset == second
            # A waiting poll is released as soon as an update arrives.
            waiting = asyncio.ensure_future(bot.get_updates(offset=second + 1, timeout=10))
            await tg.wait_calls("getUpdates", 5)
            third, _ = tg.push_message(chat_id=1, text="c", reply_to=updates[0].message.message_id)
            got = await asyncio.wait_for(waiting, 2)
            assert [u.update_id for u in got] == [third]
            assert got[0].message.reply_to_message.text == "a"
            # Two bot instances polling at once: the older poll gets 409, like Telegram.
            # (One Bot cannot: PTB gives getUpdates a connection pool of one.)
            polls = len(tg.calls("getUpdates"))
            older = asyncio.ensure_future(bot.get_updates(offset=third + 1, timeout=10))
            await tg.wait_calls("getUpdates", polls + 1)
            async with telegram.Bot(TOKEN, base_url=f"{tg.base_url}/bot") as other:
                newer = asyncio.ensure_future(other.get_updates(offset=third + 1, timeout=0.1))
                with pytest.raises(telegram.error.Conflict):
                    await asyncio.wait_for(older, 2)
                assert await newer == ()


async def test_telegram_state_survives_a_restart() -> None:
    state = TelegramState()
    async with FakeTelegram(state=state) as tg:
        async with ptb_app(tg):
            tg.push_message(chat_id=42, text="before restart")
            await tg.wait_sent(1)
        # Arrives while no bot is running: stays pending.
        tg.push_message(chat_id=42, text="while down")
    async with FakeTelegram(state=state) as tg2:
        assert len(tg2.pending_updates) == 1
        async with ptb_app(tg2):
            await tg2.wait_sent(2)
        assert [s["text"] for s in tg2.sent] == ["echo: before restart", "echo: while down"]


# -- Discord -----------------------------------------------------------------------------------


class EchoClient(discord.Client):
    """Replies "echo: <content>" to every message not its own."""

    def __init__(self) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.ready = asyncio.Event()
        self.seen: list[discord.Message] = []

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        assert self.user is not None
        if message.author.id == self.user.id:
            return
        self.seen.append(message)
        await message.channel.send(f"echo: {message.content}", reference=message)


@contextlib.asynccontextmanager
async def discord_client(dc: FakeDiscord, monkeypatch: pytest.MonkeyPatch
                         ) -> AsyncIterator[EchoClient]:
    dc.attach(monkeypatch)
    client = EchoClient()
    task = asyncio.ensure_future(client.start("fake-token"))
    try:
        await asyncio.wait_for(client.ready.wait(), 5)
        yield client
    finally:
        await client.close()
        await asyncio.wait_for(task, 2)


async def test_discord_login_message_reply_and_retried_429(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeDiscord() as dc:
        async with discord_client(dc, monkeypatch) as client:
            assert [r.name for r in dc.requests[:2]] == [
                "GET /users/@me", "GET /oauth2/applications/@me"]
            assert dc.identifies[0]["token"] == "fake-token"
            assert client.get_channel(dc.channel_id) is not None

            dc.fail_next("POST /channels/{channel_id}/messages", status=429, retry_after=0.1)
            message_id = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hi")
            sent = await dc.wait_sent(1)
            seen = client.seen[0]
            assert seen.guild is not None and seen.guild.id == dc.guild_id
            assert [m.id for m in seen.mentions] == [dc.bot_id]
            assert sent[0]["content"] == f"echo: <@{dc.bot_id}> hi"
            assert sent[0]["reply_to"] == message_id
            # discord.py retried the 429 itself; the message landed once.
            calls = dc.calls("POST /channels/{channel_id}/messages")
            assert [c.status for c in calls] == [429, 200]
            assert calls[0].headers["Authorization"] == "Bot fake-token"

            dc.push_message(dc.dm_channel_id, "in a DM")
            await dc.wait_sent(2)
            assert client.seen[1].guild is None
            assert isinstance(client.seen[1].channel, discord.DMChannel)

            with pytest.raises(discord.HTTPException) as caught:
                await client.get_channel(dc.channel_id).send("x" * 2001)  # type: ignore[union-attr]
            assert caught.value.code == 50035 and caught.value.status == 400

            started = time.monotonic()
        assert time.monotonic() - started < 1.0


async def test_discord_resumes_and_replays_missed_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeDiscord() as dc:
        async with discord_client(dc, monkeypatch) as client:
            await dc.disconnect(code=4000)
            dc.push_message(dc.channel_id, "sent while disconnected")
            await dc.wait_sent(1)
            assert dc.resumes and dc.resumes[0]["token"] == "fake-token"
            assert dc.connections[-1].startswith("/resume?")
            assert len(dc.identifies) == 1
            assert [m.content for m in client.seen] == ["sent while disconnected"]

            # (FakeDiscord.invalidate_session(resumable=False) works too, but discord.py
            # sleeps 5 s before any non-initial IDENTIFY: too slow for this suite.)


# -- X / Twitter -------------------------------------------------------------------------------


def _twitter_client(tw: FakeTwitter) -> AsyncClient:
    client = AsyncClient(
        bearer_token="app-bearer", consumer_key="ck", consumer_secret="cs",
        access_token=f"{tw.user_id}-at", access_token_secret="ats",
    )
    tw.patch_async_client(client)
    return client


async def test_twitter_mentions_reply_and_rate_limit() -> None:
    async with FakeTwitter() as tw:
        client = _twitter_client(tw)
        me = await client.get_me(user_auth=True)
        assert me.data.id == int(tw.user_id) and me.data.username == "hubbot"

        old = tw.push_mention("@hubbot old", author_id="42", author_username="alice")
        first = await client.get_users_mentions(
            tw.user_id, expansions=["author_id"], user_auth=True)
        assert first.meta["newest_id"] == old
        new = tw.push_mention("@hubbot new", author_id="43", author_username="bob")
        page = await client.get_users_mentions(
            tw.user_id, since_id=first.meta["newest_id"], expansions=["author_id"],
            user_auth=True)
        assert [t.id for t in page.data] == [int(new)]
        assert page.data[0].author_id == 43 and page.data[0].edit_history_tweet_ids
        assert [u.username for u in page.includes["users"]] == ["bob"]
        empty = await client.get_users_mentions(tw.user_id, since_id=new)  # bearer works here
        assert empty.data is None and empty.meta["result_count"] == 0

        reply = await client.create_tweet(text="hi bob", in_reply_to_tweet_id=new)
        assert tw.sent[0]["in_reply_to"] == new and tw.sent[0]["id"] == reply.data["id"]
        assert tw.auth_kinds[:3] == ["oauth1", "oauth1", "oauth1"]
        assert tw.auth_kinds[3] == "bearer" and tw.auth_kinds[4] == "oauth1"

        tw.fail_next("GET /2/users/:id/mentions", status=429, retry_after=60)
        with pytest.raises(tweepy.errors.TooManyRequests) as caught:
            await client.get_users_mentions(tw.user_id, user_auth=True)
        reset = int(caught.value.response.headers["x-rate-limit-reset"])
        assert 55 < reset - time.time() <= 62
        assert caught.value.response.headers["x-rate-limit-remaining"] == "0"

        with pytest.raises(tweepy.errors.Forbidden, match="too long"):
            await client.create_tweet(text="x" * 281)
        with pytest.raises(tweepy.errors.Forbidden, match="duplicate"):
            await client.create_tweet(text="hi bob", in_reply_to_tweet_id=new)
        with pytest.raises(tweepy.errors.Forbidden, match="Application-Only"):
            await client.create_tweet(text="as app", user_auth=False)
        await client.session.close()


async def test_twitter_headers_limits_and_session_replacement() -> None:
    import aiohttp

    async with FakeTwitter(rate_limits={"GET /2/users/:id/mentions": 2}) as tw:
        client = _twitter_client(tw)
        client.return_type = aiohttp.ClientResponse  # to read the headers tweepy returns
        response = await client.get_users_mentions(tw.user_id)
        assert response.headers["x-rate-limit-limit"] == "2"
        assert response.headers["x-rate-limit-remaining"] == "1"
        await client.get_users_mentions(tw.user_id)
        with pytest.raises(tweepy.errors.TooManyRequests):
            await client.get_users_mentions(tw.user_id)  # the window is spent
        # The hub (or tweepy) may install its own session: it is wrapped, not bypassed.
        await client.session.close()
        client.session = aiohttp.ClientSession()
        response = await client.get_me()
        assert response.status == 200
        await client.session.close()
    assert weighted_length("a" * 280) == 280
    assert weighted_length("日本") == 4
    assert weighted_length("see https://example.com/a/very/long/path/indeed") == 27
