"""Two Discord bots in one hub (``[extensions.discord.accounts.NAME]``): the real discord.py
client of each logs in and speaks the gateway against the loopback fake, where both bots
are in the same guild."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.discord import FakeDiscord

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # discord imports audioop
    import discord  # noqa: F401

from hub_discord import DiscordSettings, extension


async def test_each_account_answers_its_mentions_through_its_own_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDiscord(token="main-token") as dc:
        support_bot = dc.add_bot("support-token", "SupportBot")
        dc.attach(monkeypatch)
        settings = DiscordSettings.model_validate(
            {
                "token": "main-token",
                "guild_ready_timeout": 0.05,
                "typing": False,
                "accounts": {"support": {"token": "support-token"}},
            }
        )
        cfg = temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1.0
        model = ScriptedModel([], default="pong")
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings, resolve=dc.resolve)])
        async with hub:
            assert sorted(i["token"] for i in dc.identifies) == ["main-token", "support-token"]
            to_main = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hello main")
            to_support = dc.push_message(dc.channel_id, f"<@{support_bot}> hello support")
            sent = await dc.wait_sent(2)
            by_reply = {s["reply_to"]: s["bot_id"] for s in sent}
            # each mention answered once, by the bot it mentions (each ignores the other's echo)
            assert by_reply == {to_main: dc.bot_id, to_support: support_bot}
            runs = sorted(r.context for r in await hub.runs.page(limit=10))
            assert runs == [f"discord:channel:{dc.channel_id}", f"discord:channel:support/{dc.channel_id}"]
            # an output naming the second account's channel goes out through its bot
            result = await hub.send(f"discord:channel:support/{dc.channel_id}", None, "say hi")
            assert result.outputs[0].sent
            assert (await dc.wait_sent(3))[-1]["bot_id"] == support_bot
            # each bot registers its slash commands as its own application
            await dc.wait_for(
                lambda: any(r.path.endswith(f"/applications/{support_bot}/commands") for r in dc.requests)
            )
            metrics = hub.metrics.registry
            assert metrics.get_sample_value("hub_platform_connected", {"platform": "discord/support"}) == 1
            assert metrics.get_sample_value("hub_platform_connected", {"platform": "discord"}) == 1
