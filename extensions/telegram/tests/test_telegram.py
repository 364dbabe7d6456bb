"""The Telegram extension, with the real python-telegram-bot client against a loopback fake.

No mocks: each test runs a Hub with the extension's own polling loop and sender against
``hub.testing.telegram.FakeTelegram``, and a scripted model (or, for the SIGKILL test, a
real ``hub run`` subprocess and the fake OpenAI server).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import telegram

from hub import ConfigError, Extension, Hub, HubConfig, HubError, RunResult, ScriptedModel
from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.engine import Plugin
from hub.models import Model
from hub.platform import AllowList, utf16_len
from hub.testing import FakeOpenAI, temp_config
from hub.testing.telegram import FakeTelegram, TelegramState
from hub_telegram import (
    OFFSET_KEY,
    Ignored,
    Inbound,
    TelegramSettings,
    classify,
    extension,
)
from hub_telegram._intake import PARK_AFTER

pytestmark = [
    # PTB 22.2+ warns inside its own RetryAfter; the extension reads it without the warning
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]

TOKEN = "123456:TEST-secret-token"
MENU_CALLS = frozenset({"setMyCommands", "deleteMyCommands"})
"""The command menus set at start (beside the polling, which the order tests follow)."""
BOT_ID = 123456
ROOT = Path(__file__).resolve().parents[3]


def reply(text: str) -> str:
    return f'<response><output type="telegram:send">{text}</output></response>'


class _Recorder(Plugin):
    def __init__(self, harness: Any) -> None:
        self.harness = harness

    async def after_run(self, result: Any, run: Any) -> None:
        await self.harness._record(result, run)


class Harness:
    """A started hub with the Telegram extension, and the run results it produced."""

    def __init__(self, hub: Hub, model: Any, tg: FakeTelegram) -> None:
        self.hub = hub
        self.model = model
        self.tg = tg
        self.results: list[RunResult] = []
        self._changed = asyncio.Event()

    async def _record(self, result: RunResult, ctx: Any) -> None:
        self.results.append(result)
        self._changed.set()

    async def wait_results(self, n: int, timeout: float = 5) -> list[RunResult]:
        async with asyncio.timeout(timeout):
            while len(self.results) < n:
                self._changed.clear()
                await self._changed.wait()
        return self.results

    async def idle(self, timeout: float = 5) -> None:
        """Until every update pushed so far was taken and every run it started has ended."""
        await self.tg.wait_for(lambda: self.tg.confirmed_offset == self.tg.state.next_update_id, timeout)
        async with asyncio.timeout(timeout):
            while self.hub.runner.running or self.hub.runner.queued:
                await asyncio.sleep(0.01)

    def inputs(self) -> list[Any]:
        return [e for r in self.results for e in r.logs if getattr(e, "kind", "") == "input"]


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    tg: FakeTelegram,
    responses: list[Any] | None = None,
    *,
    default: str | None = "ok",
    delay: float = 0.0,
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    **settings: Any,
) -> AsyncIterator[Harness]:
    """A started hub with the Telegram extension against ``tg``, and ``extensions`` beside it.

    It runs on ``config`` (default: ``temp_config(tmp_path)``), answered by ``model`` (default: a
    ScriptedModel of ``responses``, then ``default``); ``settings`` go to TelegramSettings.
    """
    cfg = config or temp_config(tmp_path)
    cfg.hub.shutdown_grace = 2
    model = model or ScriptedModel(responses or [], default=default, delay=delay)
    settings.setdefault("poll_timeout", 10)
    settings.setdefault("chat_rate", 20)  # pacing is the governor's, tested with the core
    ext = extension(TelegramSettings(token=TOKEN, base_url=f"{tg.base_url}/bot", **settings))
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions])
    harness = Harness(hub, model, tg)
    hub.plugins.add(_Recorder(harness))
    async with hub:
        yield harness


def texts(tg: FakeTelegram) -> list[str]:
    return [s["text"] for s in tg.sent]


# -- in and out --------------------------------------------------------------------------------


async def test_private_message_in_reply_out_and_stop_is_quick(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply("Hello, Ada!")]) as h:
            update_id, message_id = tg.push_message(chat_id=42, text="hi there", first_name="Ada")
            sent = await tg.wait_sent(1)
            assert sent[0]["chat_id"] == 42 and sent[0]["text"] == "Hello, Ada!"
            assert sent[0]["reply_to"] is None  # private chats are not quoted
            assert sent[0]["parse_mode"] is None
            (result,) = await h.wait_results(1)
            assert result.ok and result.context == "telegram:chat:42"
            assert result.outputs[0].sent and result.outputs[0].data["message_ids"] == [sent[0]["message_id"]]
            (entry,) = h.inputs()
            assert entry.content == "hi there" and entry.user == "42" and entry.type == "telegram:message"
            assert entry.platform_id == f"telegram:42:{message_id}"
            assert entry.meta["message_id"] == message_id and entry.meta["chat_type"] == "private"
            assert entry.meta["from"] == {"id": 42, "username": "user42", "name": "Ada", "is_bot": False}
            assert (entry.meta["user_name"], entry.meta["user_handle"]) == ("Ada", "user42")  # who, for the dashboard
            (run,) = await h.hub.runs.page(limit=1)
            assert (run.user_name, run.user_handle, run.message) == ("Ada", "user42", "hi there")
            assert (42, "typing") in tg.chat_actions
            # the offset moves past the update once it is recorded, and is persisted
            await tg.wait_for(lambda: tg.confirmed_offset == update_id + 1)
            assert await h.hub.memory.get(OFFSET_KEY) == update_id + 1
            names = [r.name for r in tg.requests if r.name not in MENU_CALLS]
            assert names[:3] == ["getMe", "deleteWebhook", "getUpdates"]
            assert tg.calls("getUpdates")[0].params["allowed_updates"] == ["message", "callback_query"]
            started = time.monotonic()
        assert time.monotonic() - started < 1.5, "a waiting long poll must not hold up the stop"


async def test_allowed_users_answers_only_them(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", allowed_users=[7, "@ann"]) as h:
            group = dict(chat_type="supergroup")
            tg.push_message(chat_id=-100, text="@test_bot from a stranger", from_id=8, **group)
            tg.push_message(chat_id=-101, text="@test_bot from seven", from_id=7, **group)
            tg.push_message(chat_id=-102, text="@test_bot from ann", from_id=9, username="ann", **group)
            await h.wait_results(2, timeout=30)  # the stranger's message came first: it was passed over
            assert sorted(e.content for e in h.inputs()) == ["@test_bot from ann", "@test_bot from seven"]
            assert len(tg.sent) == 2


async def test_group_answers_mentions_and_replies_only(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok") as h:
            group = dict(chat_id=-100, chat_type="supergroup", from_id=7)
            tg.push_message(text="just chatting among humans", **group)
            _, mention_id = tg.push_message(text="@test_bot what time is it?", **group)
            await tg.wait_sent(1)
            assert tg.sent[0]["chat_id"] == -100
            assert tg.sent[0]["reply_to"] == mention_id  # quotes the message it answers
            bot_message = tg.sent[0]["message_id"]
            _, reply_id = tg.push_message(text="and tomorrow?", reply_to=bot_message, **group)
            await tg.wait_sent(2)
            assert tg.sent[1]["reply_to"] == reply_id
            await h.wait_results(2)
            assert [e.content for e in h.inputs()] == ["@test_bot what time is it?", "and tomorrow?"]
            assert len(h.model.requests) == 2
            assert [e.meta["mentioned"] for e in h.inputs()] == [True, False]


async def test_long_reply_is_split_in_order_with_code_blocks_whole(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 60 + "😀" * 20 for i in range(12)]
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(60)) + "\n```"
    body = "\n\n".join(paragraphs[:9] + [code] + paragraphs[9:])
    assert utf16_len(body) > 5000 and utf16_len("\n\n".join(paragraphs[:9])) < 4096 < utf16_len(
        "\n\n".join(paragraphs[:9] + [code])
    )
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(body)], chat_rate=50) as h:
            tg.push_message(chat_id=42, text="tell me everything")
            (result,) = await h.wait_results(1)
            assert result.outputs[0].sent, result.outputs[0].error
            parts = texts(tg)
            assert len(parts) >= 2
            assert all(utf16_len(p) <= 4096 for p in parts)
            assert re.sub(r"\s+", "", "".join(parts)) == re.sub(r"\s+", "", body)  # nothing lost, in order
            assert sum(code in p for p in parts) == 1  # the code block whole in one message
            assert all(p.count("```") % 2 == 0 for p in parts)
            assert result.outputs[0].data["message_ids"] == [s["message_id"] for s in tg.sent]


# -- failures ---------------------------------------------------------------------------------


async def test_429_waits_retry_after_then_sends_once(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        tg.fail_next("sendMessage", status=429, retry_after=1)
        async with running(tmp_path, tg, [reply("patience")]) as h:
            tg.push_message(chat_id=42, text="hi")
            (result,) = await h.wait_results(1)
            assert result.outputs[0].sent
            calls = tg.calls("sendMessage")
            assert [c.status for c in calls] == [429, 200]
            assert calls[1].at - calls[0].at >= 0.95, "retry_after was not honoured"
            assert texts(tg) == ["patience"]
            metrics = h.hub.metrics.render()[0].decode()  # the governor reports to the hub's metrics
            assert 'hub_platform_rate_limited_total{platform="telegram"} 1.0' in metrics
            assert 'hub_platform_sends_total{platform="telegram",result="ok"} 1.0' in metrics


async def test_a_send_that_finally_fails_is_recorded_as_not_sent(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        tg.fail_next("sendMessage", status=403)  # the user blocked the bot: no retry
        async with running(tmp_path, tg, [reply("first"), reply("second")], send_max_wait=0.5) as h:
            tg.push_message(chat_id=42, text="hi")
            (result,) = await h.wait_results(1)
            out = result.outputs[0]
            assert out.sent is False and "Forbidden" in (out.error or "")
            assert len(tg.calls("sendMessage")) == 1

            # rate limited for longer than send_max_wait: given up, not reported as sent
            tg.fail_next("sendMessage", status=429, retry_after=5)
            tg.push_message(chat_id=43, text="hi")
            results = await h.wait_results(2)
            out = results[1].outputs[0]
            assert out.sent is False and "retry" in (out.error or "").lower()
            assert tg.sent == []


async def test_bad_markup_falls_back_to_plain_text(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        text = "Done. 2+2=4 (really)!"  # unescaped MarkdownV2 reserved characters
        async with running(tmp_path, tg, [reply(text), reply("*bold* works\\.")], parse_mode="MarkdownV2") as h:
            tg.push_message(chat_id=42, text="sum?")
            (result,) = await h.wait_results(1)
            assert result.outputs[0].sent
            assert [c.status for c in tg.calls("sendMessage")] == [400, 200]
            assert tg.sent[0]["text"] == text and tg.sent[0]["parse_mode"] is None
            tg.push_message(chat_id=42, text="bold?")
            await tg.wait_sent(2)
            assert tg.sent[1]["parse_mode"] == "MarkdownV2"  # valid markup keeps its formatting


class MigratedGroup(FakeTelegram):
    """Group -5 was upgraded to supergroup -1005: Telegram refuses sends to the old id."""

    def _m_sendmessage(self, params: dict[str, Any]) -> Any:
        from aiohttp import web

        if int(params["chat_id"]) == -5:
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: group chat was upgraded to a supergroup chat",
                    "parameters": {"migrate_to_chat_id": -1005},
                },
                status=400,
            )
        return super()._m_sendmessage(params)


async def test_a_reply_follows_a_group_upgraded_to_a_supergroup(tmp_path: Path) -> None:
    async with MigratedGroup() as tg:
        async with running(tmp_path, tg, [reply("still here")]) as h:
            tg.push_message(chat_id=-5, chat_type="group", from_id=7, text="@test_bot hi")
            (result,) = await h.wait_results(1)
            assert result.outputs[0].sent
            assert [(s["chat_id"], s["text"]) for s in tg.sent] == [(-1005, "still here")]


# -- who is answered ---------------------------------------------------------------------------


async def test_ignores_itself_and_other_bots(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok") as h:
            tg.push_message(
                chat_id=-100, chat_type="group", from_id=BOT_ID, from_is_bot=True, text="@test_bot echo of myself"
            )
            tg.push_message(
                chat_id=-100, chat_type="group", from_id=999, from_is_bot=True, text="@test_bot hello from another bot"
            )
            tg.push_message(chat_id=999, from_is_bot=True, text="a bot in private")
            last, _ = tg.push_message(chat_id=-100, chat_type="group", from_id=5, text="@test_bot hi")
            await tg.wait_sent(1)
            await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["@test_bot hi"]
            assert len(h.model.requests) == 1
            await tg.wait_for(lambda: tg.confirmed_offset == last + 1)  # ignored ones are confirmed too


async def test_loop_guard_limits_answers_to_bots(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", answer_bots=True, loop_guard_turns=2) as h:
            bot = dict(chat_id=-100, chat_type="group", from_id=999, from_is_bot=True)
            for i in range(4):
                tg.push_message(text=f"@test_bot ping {i}", **bot)
            tg.push_message(chat_id=-100, chat_type="group", from_id=5, text="@test_bot a human")
            tg.push_message(text="@test_bot ping after human", **bot)
            await h.idle()
            assert [e.content for e in h.inputs()] == [
                "@test_bot ping 0",
                "@test_bot ping 1",
                "@test_bot a human",
                "@test_bot ping after human",
            ]


async def test_allow_list_restricts_chats(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", allowed_chats=[42, "@friends"]) as h:
            tg.push_message(chat_id=43, text="a stranger")
            tg.push_message(chat_id=-5, chat_type="supergroup", from_id=43, text="@test_bot in a group")
            tg.push_message(chat_id=42, text="a friend")
            await tg.wait_sent(1)
            await h.wait_results(1)
            assert [(s["chat_id"], s["text"]) for s in tg.sent] == [(42, "ok")]
            assert [e.content for e in h.inputs()] == ["a friend"]


async def test_redelivered_update_is_not_answered_twice(tmp_path: Path) -> None:
    state = TelegramState()
    async with FakeTelegram(state=state) as tg:
        async with running(tmp_path, tg, default="ok"):
            tg.push_message(chat_id=42, text="once")
            await tg.wait_sent(1)
    # Telegram forgets the confirmation and our offset is lost: the update comes again.
    state.confirmed_offset = 0
    async with FakeTelegram(state=state) as tg:
        async with running(tmp_path, tg, default="again") as h:
            await h.hub.memory.delete(OFFSET_KEY)
            tg.push_message(chat_id=42, text="new")
            await tg.wait_sent(2)
            await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["new"]
            assert [g.params.get("offset") for g in tg.calls("getUpdates")][0] is None
            assert texts(tg) == ["ok", "again"]


def poison_on(monkeypatch: pytest.MonkeyPatch, text: str) -> list[int]:
    """Reading an update whose text is ``text`` fails (a bug, or a shape the library does
    not expect): its update ids, one per attempt."""
    import hub_telegram._intake as intake

    real, attempts = intake.classify, []

    def classify(update: telegram.Update, *args: Any, **kw: Any) -> Any:
        if update.effective_message is not None and update.effective_message.text == text:
            attempts.append(update.update_id)
            raise AttributeError("'NoneType' object has no attribute 'id' (injected)")
        return real(update, *args, **kw)

    monkeypatch.setattr(intake, "classify", classify)
    return attempts


async def test_a_poison_update_is_parked_and_intake_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = poison_on(monkeypatch, "poison")
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok") as h:
            tg.push_message(chat_id=42, text="poison")
            tg.push_message(chat_id=42, text="after")
            await tg.wait_sent(1, timeout=15)
            await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["after"]
            assert len(attempts) == PARK_AFTER  # tried, then parked: not retried forever
            (parked,) = await h.hub.inbox.parked()
            assert parked.context == "telegram:chat:42" and parked.entry.content == "poison"
            assert parked.failures == PARK_AFTER and "AttributeError" in parked.error
            await h.idle()  # Telegram was told it may forget both
            assert await h.hub.memory.get(OFFSET_KEY) == tg.state.next_update_id


async def test_an_update_the_library_cannot_parse_is_parked_and_intake_goes_on(tmp_path: Path) -> None:
    # python-telegram-bot fails a whole getUpdates batch on one update it cannot parse: the
    # batch is fetched raw and each update parsed on its own, through the real library
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok") as h:
            now = int(time.time())
            bad = tg.push_update({"message": {"message_id": 7, "date": now, "chat": "not a chat", "text": "broken"}})
            tg.push_message(chat_id=42, text="after")
            await tg.wait_sent(1, timeout=10)
            await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["after"]
            (parked,) = await h.hub.inbox.parked()
            assert parked.entry.platform_id == f"telegram:update:{bad}"
            assert "not a chat" in str(parked.entry.content) and parked.entry.meta["update_id"] == bad
            await h.idle()  # Telegram was told it may forget both
            assert await h.hub.memory.get(OFFSET_KEY) == tg.state.next_update_id


async def test_poll_errors_back_off_and_recover(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        tg.fail_next("getUpdates", status=409, description="Conflict: terminated by other getUpdates request")
        async with running(tmp_path, tg, default="ok"):
            tg.push_message(chat_id=42, text="hi")
            await tg.wait_sent(1, timeout=5)
            polls = tg.calls("getUpdates")
            assert polls[0].status == 409
            assert polls[1].at - polls[0].at >= 0.7, "no backoff after a Conflict"


async def test_api_down_at_start_is_retried_until_it_returns(tmp_path: Path) -> None:
    state = TelegramState()
    tg = FakeTelegram(state=state)
    await tg.start()
    await tg.stop()  # its port is known and nothing listens there now
    async with running(tmp_path, tg, default="ok") as h:
        await asyncio.sleep(0.2)
        assert h.hub.extensions["telegram"]  # the hub started all the same
        async with tg:  # the API comes back on the same port
            tg.push_message(chat_id=42, text="are you there?")
            await tg.wait_sent(1, timeout=8)
            assert [r.name for r in tg.requests if r.name not in MENU_CALLS][:2] == ["getMe", "deleteWebhook"]


async def test_token_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok"):
            tg.push_message(chat_id=42, text="hi")
            await tg.wait_sent(1)
    assert "TEST-secret-token" not in caplog.text
    assert "<token>" in caplog.text  # httpx's request lines were redacted, not dropped


async def test_a_refused_token_fails_the_start_without_showing_it(tmp_path: Path) -> None:
    async with FakeTelegram(token="123456:the-right-one") as tg:
        with pytest.raises(HubError, match="refused the token") as caught:
            async with running(tmp_path, tg):
                pass
        assert "TEST-secret-token" not in str(caught.value)
        assert "TEST-secret-token" not in repr(caught.value.__cause__)


# -- settings ----------------------------------------------------------------------------------


def test_settings_errors_name_the_key_and_the_variable() -> None:
    with pytest.raises(ConfigError) as caught:  # an enabled platform's unset token: at load
        config_from_dict({"extensions": {"telegram": {"token": "${TELEGRAM_BOT_TOKEN}"}}}, env={})
    assert "extensions.telegram.token" in str(caught.value) and "TELEGRAM_BOT_TOKEN" in str(caught.value)
    cfg = config_from_dict({"extensions": {"telegram": {"token": ""}}}, env={})
    with pytest.raises(ConfigError) as caught:
        load_extension("telegram", cfg.extensions["telegram"], cfg)
    assert "extensions.telegram.token" in str(caught.value) and "TELEGRAM_BOT_TOKEN" in str(caught.value)
    with pytest.raises(ConfigError, match=r"extensions\.telegram\.grups: unknown key"):
        load_extension("telegram", {"token": "1:x", "grups": "all"}, cfg)
    with pytest.raises(ConfigError, match=r"extensions\.telegram\.groups"):
        load_extension("telegram", {"token": "1:x", "groups": "sometimes"}, cfg)
    ext = load_extension("telegram", {"token": "1:x", "base_url": "http://127.0.0.1:8081/bot"}, cfg)
    assert [c.type for c in ext.contexts] == ["telegram:chat"]
    assert [o.type for o in ext.outputs] == ["telegram:send", "telegram:photo", "telegram:document"]
    s = TelegramSettings(token="1:x", base_url="http://127.0.0.1:8081/bot")
    assert s.resolved_base_file_url() == "http://127.0.0.1:8081/file/bot"
    assert "1:x" not in repr(s)


# -- the pure filter ---------------------------------------------------------------------------

ME = telegram.User(id=BOT_ID, is_bot=True, first_name="Test Bot", username="test_bot")


def update(
    text: str,
    *,
    chat_id: int = -100,
    chat_type: str = "supergroup",
    from_id: int = 5,
    is_bot: bool = False,
    entities: list[dict[str, Any]] | None = None,
    reply_to_from: int | None = None,
    chat_username: str | None = None,
) -> telegram.Update:
    chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
    if chat_username:
        chat["username"] = chat_username
    message: dict[str, Any] = {
        "message_id": 10,
        "date": 0,
        "chat": chat,
        "text": text,
        "from": {"id": from_id, "is_bot": is_bot, "first_name": "X"},
    }
    if entities is not None:
        message["entities"] = entities
    if reply_to_from is not None:
        message["reply_to_message"] = {
            "message_id": 9,
            "date": 0,
            "chat": chat,
            "text": "earlier",
            "from": {"id": reply_to_from, "is_bot": True, "first_name": "B"},
        }
    return telegram.Update.de_json({"update_id": 1, "message": message}, None)


def verdict(u: telegram.Update, allowed: list[Any] | None = None, **settings: Any) -> Inbound | Ignored:
    s = TelegramSettings(token="1:x", allowed_chats=allowed or [], **settings)
    return classify(u, ME, s, AllowList(s.allowed_chats))


def mention(text: str, at: int = 0, length: int | None = None) -> list[dict[str, Any]]:
    return [{"type": "mention", "offset": at, "length": length or len(text.split()[0])}]


@pytest.mark.parametrize(
    ("u", "settings", "answered"),
    [
        (update("hi", chat_id=5, chat_type="private"), {}, True),
        (update("hi all"), {}, False),
        (update("@test_bot hi", entities=mention("@test_bot")), {}, True),
        (update("@TEST_BOT hi", entities=mention("@TEST_BOT")), {}, True),
        (update("hey @test_bot", entities=[]), {}, True),  # no entities: the text itself
        (update("@test_botty hi", entities=mention("@test_botty")), {}, False),
        (
            update(
                "Bot, hi",
                entities=[
                    {
                        "type": "text_mention",
                        "offset": 0,
                        "length": 3,
                        "user": {"id": BOT_ID, "is_bot": True, "first_name": "B"},
                    }
                ],
            ),
            {},
            True,
        ),
        (update("/help@other_bot", entities=[{"type": "bot_command", "offset": 0, "length": 15}]), {}, False),
        (update("/help@test_bot", entities=[{"type": "bot_command", "offset": 0, "length": 14}]), {}, True),
        (update("/help", entities=[{"type": "bot_command", "offset": 0, "length": 5}]), {}, True),
        (update("sure", reply_to_from=BOT_ID), {}, True),
        (update("sure", reply_to_from=777), {}, False),
        (update("hi all"), {"groups": "all"}, True),
        (update("@test_bot hi", entities=mention("@test_bot")), {"groups": "off"}, False),
        (update("hi", chat_id=5, chat_type="private", from_id=BOT_ID, is_bot=True), {}, False),
        (update("hi", chat_id=5, chat_type="private", is_bot=True), {}, False),
        (update("hi", chat_id=5, chat_type="private", is_bot=True), {"answer_bots": True}, True),
        (update("", chat_id=5, chat_type="private"), {}, False),
        (update("news", chat_type="channel"), {}, False),
    ],
)
def test_classify(u: telegram.Update, settings: dict[str, Any], answered: bool) -> None:
    result = verdict(u, **settings)
    assert isinstance(result, Inbound) is answered, result


def test_classify_allow_list_by_id_or_username() -> None:
    assert isinstance(verdict(update("hi", chat_id=5, chat_type="private"), [5]), Inbound)
    assert isinstance(verdict(update("hi", chat_id=6, chat_type="private"), [5]), Ignored)
    pub = update("@test_bot hi", entities=mention("@test_bot"), chat_username="friends")
    assert isinstance(verdict(pub, ["@friends"]), Inbound)
    assert isinstance(verdict(pub, ["-100"]), Inbound)  # ids may be written as strings
    ignored = verdict(pub, [7])
    assert isinstance(ignored, Ignored) and "allowed_chats" in ignored.reason


# -- a real process killed mid-run ---------------------------------------------------------------


async def _fake_model(latency: float) -> tuple[FakeOpenAI, int]:
    fake = FakeOpenAI(script={"clients": {"hub": [reply("answered")]}}, latency=latency, chunk=8, record=False)
    await fake.start()
    return fake, fake.port


def _start_hub(config: Path, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TELEGRAM_BOT_TOKEN": TOKEN}
    with log_path.open("ab") as log_file:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )


async def test_sigkill_mid_run_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    model, model_port = await _fake_model(latency=1.0)
    state = TelegramState()
    log_path = tmp_path / "hub.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with FakeTelegram(state=state) as tg:
            config = tmp_path / "config.toml"
            config.write_text(
                f"""
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1

[model]
provider = "openai"
base_url = "http://127.0.0.1:{model_port}/v1"
api_key = "x"
name = "hub"
max_retries = 0

[extensions.telegram]
token = "${{TELEGRAM_BOT_TOKEN}}"
base_url = "{tg.base_url}/bot"
poll_timeout = 5
""",
                encoding="utf-8",
            )
            procs.append(_start_hub(config, log_path))
            tg.push_message(chat_id=1, text="answered before the crash")
            await tg.wait_sent(1, timeout=15)
            u2, _ = tg.push_message(chat_id=2, text="in flight 1")
            u3, _ = tg.push_message(chat_id=3, text="in flight 2")
            # both recorded and their runs waiting on the slow model: kill the process now
            async with asyncio.timeout(5):  # the model's fake has no waiters: poll it
                while len(model.stats) < 3:
                    await asyncio.sleep(0.01)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(5)
            assert len(tg.sent) == 1

            # what was confirmed to Telegram had been recorded first
            db = sqlite3.connect(tmp_path / "data" / "hub.db")
            recorded = {r[0] for r in db.execute("SELECT platform_id FROM inbox")}
            stored = db.execute("SELECT value FROM kv WHERE key = ?", (OFFSET_KEY,)).fetchone()
            db.close()
            for upd in state.updates:
                m = upd["message"]
                if upd["update_id"] < tg.confirmed_offset:
                    assert f"telegram:{m['chat']['id']}:{m['message_id']}" in recorded
            assert stored is not None and json.loads(stored[0]) <= tg.confirmed_offset

            tg.push_message(chat_id=4, text="sent while the hub was down")
            procs.append(_start_hub(config, log_path))
            await tg.wait_for(lambda: {s["chat_id"] for s in tg.sent} >= {1, 2, 3, 4}, timeout=15)
            tg.push_message(chat_id=5, text="a last one")  # everything before it is done by now
            await tg.wait_for(lambda: any(s["chat_id"] == 5 for s in tg.sent), timeout=10)
            procs[1].send_signal(signal.SIGTERM)
            assert procs[1].wait(10) == 0
            by_chat = sorted(s["chat_id"] for s in tg.sent)
            assert by_chat == [1, 2, 3, 4, 5], f"{by_chat}\n{log_path.read_text()[-3000:]}"
            assert u3 + 1 <= tg.confirmed_offset
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        await model.stop()
