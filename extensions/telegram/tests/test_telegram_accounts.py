"""Several Telegram bots in one hub (``[extensions.telegram.accounts.NAME]``), each a real
python-telegram-bot client against a fake Bot API of its own."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hub import ConfigError, Hub, ScriptedModel
from hub.config import HttpSection, config_from_dict
from hub.definitions import load_extension
from hub.testing import temp_config
from hub.testing.postgres import temporary_schema
from hub.testing.telegram import FakeTelegram
from hub_telegram import OFFSET_KEY, TelegramSettings, extension

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

MAIN_TOKEN = "111:main-token"
SUPPORT_TOKEN = "222:support-token"


def reply(text: str) -> str:
    return f'<response><output type="telegram:send">{text}</output></response>'


def settings(main: FakeTelegram, support: FakeTelegram, **more: Any) -> TelegramSettings:
    return TelegramSettings.model_validate(
        {
            "token": MAIN_TOKEN,
            "base_url": f"{main.base_url}/bot",
            "poll_timeout": 10,
            "chat_rate": 20,
            "typing": False,
            "accounts": {"support": {"token": SUPPORT_TOKEN, "base_url": f"{support.base_url}/bot"}},
            **more,
        }
    )


@contextlib.asynccontextmanager
async def two_bots(
    tmp_path: Path, model: ScriptedModel, *, store: str = "sqlite", **more: Any
) -> AsyncIterator[tuple[Hub, FakeTelegram, FakeTelegram]]:
    """A hub with two Telegram accounts, each against a fake bot of its own, on ``store``
    ("sqlite", or "postgres": a schema of its own)."""
    async with contextlib.AsyncExitStack() as stack:
        main = await stack.enter_async_context(FakeTelegram(bot_id=111, bot_username="main_bot", token=MAIN_TOKEN))
        support = await stack.enter_async_context(
            FakeTelegram(bot_id=222, bot_username="support_bot", token=SUPPORT_TOKEN)
        )
        cfg = temp_config(tmp_path)
        cfg.hub.shutdown_grace = 2
        if store == "postgres":
            cfg.store.url = await stack.enter_async_context(temporary_schema())
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings(main, support, **more))])
        async with hub:
            yield hub, main, support


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_each_account_answers_its_own_chats_through_its_own_bot(tmp_path: Path, store: str) -> None:
    model = ScriptedModel(default="ok")
    async with two_bots(tmp_path, model, store=store) as (hub, main, support):
        main_update, _ = main.push_message(chat_id=42, text="to main")
        support_update, _ = support.push_message(chat_id=42, text="to support")
        (to_main,) = await main.wait_sent(1)
        (to_support,) = await support.wait_sent(1)
        assert to_main["chat_id"] == to_support["chat_id"] == 42
        # the same chat id on two bots: two conversations, the second named with its account
        runs = {r.context for r in await hub.runs.page(limit=10)}
        assert runs == {"telegram:chat:42", "telegram:chat:support/42"}
        # each bot's offset is its own, and the default account's key is the one stored before
        await main.wait_for(lambda: main.confirmed_offset == main_update + 1)
        await support.wait_for(lambda: support.confirmed_offset == support_update + 1)
        assert await hub.memory.get(OFFSET_KEY) == main_update + 1
        assert await hub.memory.get(f"{OFFSET_KEY}:support") == support_update + 1
        # each registers the command menus with its own bot
        await main.wait_calls("setMyCommands", 1)
        await support.wait_calls("setMyCommands", 1)
        # health and metrics by account
        metrics = hub.metrics.registry
        assert metrics.get_sample_value("hub_platform_sends_total", {"platform": "telegram", "result": "ok"}) == 1
        assert (
            metrics.get_sample_value("hub_platform_sends_total", {"platform": "telegram/support", "result": "ok"}) == 1
        )
        assert metrics.get_sample_value("hub_platform_connected", {"platform": "telegram/support"}) == 1


async def test_a_group_both_bots_are_in_is_answered_by_each(tmp_path: Path) -> None:
    """Two bots in one group see the same message ids: the inbox keeps them apart."""
    model = ScriptedModel(default="ok")
    async with two_bots(tmp_path, model, groups="all") as (hub, main, support):
        _, first = main.push_message(chat_id=-100, text="hello both", from_id=7, chat_type="supergroup")
        support.state.next_message_id = first  # the same message, as the second bot sees it
        support.push_message(chat_id=-100, text="hello both", from_id=7, chat_type="supergroup")
        await main.wait_sent(1)
        await support.wait_sent(1)
        names = sorted(r.context for r in await hub.runs.page(limit=10))
        assert names == ["telegram:chat:-100", "telegram:chat:support/-100"]


async def test_an_output_naming_a_conversation_goes_through_its_account(tmp_path: Path) -> None:
    model = ScriptedModel([reply("scheduled hello")], default="ok")
    async with two_bots(tmp_path, model) as (hub, main, support):
        result = await hub.send("telegram:chat:support/77", None, "say hello")
        assert result.ok
        (sent,) = await support.wait_sent(1)
        assert (sent["chat_id"], sent["text"]) == (77, "scheduled hello")
        assert main.sent == []


async def test_an_unknown_account_in_a_name_is_refused_and_sends_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([reply("to nobody")], default="ok")
    async with two_bots(tmp_path, model) as (hub, main, support):
        result = await hub.send("telegram:chat:sales/5", None, "hello")
        assert not result.outputs[0].sent
        assert "no Telegram account 'sales'" in (result.outputs[0].error or "")
        assert main.sent == support.sent == []


def test_an_account_takes_what_it_leaves_out_from_the_platform_table() -> None:
    s = TelegramSettings.model_validate(
        {
            "token": MAIN_TOKEN,
            "chat_rate": 3,
            "groups": "all",
            "accounts": {"support": {"token": SUPPORT_TOKEN, "groups": "off"}},
        }
    )
    (_, main), (name, support) = s.every_account()
    assert name == "support"
    assert (support.chat_rate, support.groups, support.bot_id()) == (3, "off", "222")
    assert (main.groups, main.bot_id()) == ("all", "111")


@pytest.mark.parametrize(
    ("account", "key", "says"),
    [
        ({"token": ""}, "extensions.telegram.accounts.support.token", "is empty"),
        ({"token": SUPPORT_TOKEN, "chat_rat": 1}, "extensions.telegram.accounts.support.chat_rat", "unknown key"),
        ({}, "extensions.telegram", "the same bot as the platform table"),
        ({"token": SUPPORT_TOKEN, "live": True}, "extensions.telegram", "accounts.support.live: every account takes"),
    ],
)
def test_hub_check_names_the_account_at_fault(account: dict[str, Any], key: str, says: str) -> None:
    cfg = config_from_dict({})
    table = {"token": MAIN_TOKEN, "accounts": {"support": account}}
    with pytest.raises(ConfigError) as e:
        load_extension("telegram", table, cfg)
    assert e.value.key == key and says in str(e.value)


def test_an_account_name_that_cannot_be_part_of_a_name_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        load_extension(
            "telegram", {"token": MAIN_TOKEN, "accounts": {"a/b": {"token": SUPPORT_TOKEN}}}, config_from_dict({})
        )
    assert "account name 'a/b'" in str(e.value)


async def test_webhook_mode_each_account_on_its_own_path_with_its_own_secret(tmp_path: Path) -> None:
    main_secret, support_secret = "main_webhook-secret-01", "support_webhook-secret-02"
    async with (
        FakeTelegram(bot_id=111, bot_username="main_bot", token=MAIN_TOKEN) as main,
        FakeTelegram(bot_id=222, bot_username="support_bot", token=SUPPORT_TOKEN) as support,
    ):
        cfg = temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1
        cfg.http = HttpSection(port=0)
        ext = extension(
            TelegramSettings.model_validate(
                {
                    "token": MAIN_TOKEN,
                    "base_url": f"{main.base_url}/bot",
                    "webhook_url": "https://bot.example.com/tg/main",
                    "webhook_secret": main_secret,
                    "accounts": {
                        "support": {
                            "token": SUPPORT_TOKEN,
                            "base_url": f"{support.base_url}/bot",
                            "webhook_url": "https://bot.example.com/tg/support",
                            "webhook_secret": support_secret,
                        }
                    },
                }
            )
        )
        hub = Hub(cfg, model=ScriptedModel([], default="ok"), load_extensions=False, extensions=[ext])
        async with hub:
            assert hub.http is not None
            base = f"http://127.0.0.1:{hub.http.port}"
            await main.wait_for(lambda: main.state.webhook_set >= 1, timeout=15)
            await support.wait_for(lambda: support.state.webhook_set >= 1, timeout=15)
            assert (main.state.webhook_secret, support.state.webhook_secret) == (main_secret, support_secret)
            update, _ = support.push_message(chat_id=9, text="to support")
            # the other account's secret is refused on this account's path
            assert (await support.deliver(update, url=f"{base}/tg/support", secret=main_secret))[0] == 401
            assert (await support.deliver(update, url=f"{base}/tg/support"))[0] == 200
            (sent,) = await support.wait_sent(1)
            assert sent["chat_id"] == 9 and main.sent == []
            assert [r.context for r in await hub.runs.page(limit=5)] == ["telegram:chat:support/9"]


def test_two_accounts_on_one_webhook_path_are_refused() -> None:
    table = {
        "token": MAIN_TOKEN,
        "webhook_url": "https://bot.example.com/tg",
        "webhook_secret": "main_webhook-secret-01",
        "accounts": {"support": {"token": SUPPORT_TOKEN}},  # takes webhook_url from the table
    }
    with pytest.raises(ConfigError) as e:
        load_extension("telegram", table, config_from_dict({}))
    assert "accounts.support.webhook_url: the same path as the platform table" in str(e.value)
