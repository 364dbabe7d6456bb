"""The fake Telegram, proven against the real client (python-telegram-bot).

No mocks: the test runs a real client against the loopback fake, so what passes here is what
the extension can rely on.
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
from telegram.ext import Application, ContextTypes, MessageHandler, filters

from hub.testing.telegram import FakeTelegram, MarkupError, TelegramState, check_markup

TOKEN = "123456:TEST"

# -- Telegram ----------------------------------------------------------------------------------


def _seconds(value: Any) -> float:
    """RetryAfter.retry_after is an int or a timedelta depending on PTB settings."""
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


@contextlib.asynccontextmanager
async def ptb_app(tg: FakeTelegram, stop_times: list[float] | None = None) -> AsyncIterator[Application]:
    """A real PTB Application polling the fake; replies "echo: <text>" to each message."""

    async def echo(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        await update.message.reply_text(f"echo: {update.message.text}")

    app = (
        Application.builder()
        .token(TOKEN)
        .base_url(f"{tg.base_url}/bot")
        .base_file_url(f"{tg.base_url}/file/bot")
        .build()
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
            second, _ = tg.push_message(chat_id=-100, text="b @test_bot", from_id=5, chat_type="supergroup")
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
